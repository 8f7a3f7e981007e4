"""Module and Parameter: how layers own their weights, name them, save and load them.

A Module registers every Parameter and sub-Module assigned to one of its attributes, in the order
assigned, so `named_parameters()` yields dotted names such as `blocks.0.attn.q_proj.weight` that
map one to one onto PyTorch checkpoints.
"""

import numpy as np

from gradflow.engine.autograd import is_grad_enabled, module_scope
from gradflow.engine.tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that a Module owns and an optimizer updates (requires grad by default)."""

    def __init__(self, data, requires_grad=True):
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter(" + super().__repr__()[len("tensor(") :]


class Module:
    """Base class of layers and models: subclasses set attributes in __init__ and define forward."""

    training = True

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def __call__(self, *args, **kwargs):
        if not is_grad_enabled():  # nothing is recorded, so there is no op to tell its module
            return self.forward(*args, **kwargs)
        with module_scope(self):  # the ops recorded here know they belong to this module
            return self.forward(*args, **kwargs)

    # --- the tree -------------------------------------------------------------------------------

    def named_modules(self, prefix=""):
        """(dotted name, module) for this module and every module below it, each once."""
        seen, stack = set(), [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [(f"{name}.{n}" if name else n, m) for n, m in module._modules.items()]
            stack.extend(reversed(children))

    def modules(self):
        return [m for _, m in self.named_modules()]

    def named_parameters(self, remove_duplicate=True):
        """(dotted name, Parameter) for every parameter; a shared (tied) parameter once, by its first name."""
        seen = set()
        for prefix, module in self.named_modules():
            for name, p in module._parameters.items():
                if remove_duplicate and id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{prefix}.{name}" if prefix else name), p

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def num_parameters(self):
        """How many numbers the model learns (a tied weight counts once)."""
        return sum(p.numel() for p in self.parameters())

    # --- state ----------------------------------------------------------------------------------

    def state_dict(self):
        """name -> copy of the weights; a tied weight appears under each of its names, as in PyTorch."""
        return {name: p.data.copy() for name, p in self.named_parameters(remove_duplicate=False)}

    def load_state_dict(self, state, strict=True):
        """Copy weights in by name; with strict, a missing, unexpected or wrongly shaped entry is an error.

        Nothing is cast silently: an entry that is not real floating-point numbers (bool, int,
        complex, text) is an error, and a tied weight (one Parameter under two names, like GPT's
        embedding and head) saved twice must be saved equal, or which copy wins would be arbitrary.
        """
        own = dict(self.named_parameters(remove_duplicate=False))
        missing = [n for n in own if n not in state]
        unexpected = [n for n in state if n not in own]
        wrong = [
            f"{n}: checkpoint {tuple(np.shape(state[n]))}, model {own[n].shape}"
            for n in own
            if n in state and tuple(np.shape(state[n])) != own[n].shape
        ]
        wrong += [f"{n}: dtype {np.asarray(state[n]).dtype}, not floating-point" for n in own
                  if n in state and np.asarray(state[n]).dtype.kind != "f"]  # fmt: skip
        first_name = {}
        for n, p in own.items():
            if n in state and not wrong:
                tied = first_name.setdefault(id(p), n)
                if tied != n and not np.array_equal(state[tied], state[n]):
                    wrong.append(f"{tied} and {n} are one tied weight but the checkpoint holds two different values")
        problems = wrong + ([f"missing: {', '.join(missing)}"] if strict and missing else [])
        problems += [f"unexpected: {', '.join(unexpected)}"] if strict and unexpected else []
        if problems:
            raise ValueError("load_state_dict: " + "; ".join(problems))
        for name, p in own.items():
            if name in state:
                p.data = np.array(state[name], dtype=p.dtype)
        return missing, unexpected

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    # --- printing -------------------------------------------------------------------------------

    def extra_repr(self):
        """What the module's line shows besides its name, e.g. `Linear(128, 512, bias=True)`."""
        return ", ".join(f"{n}={p.shape}" for n, p in self._parameters.items())

    def __repr__(self):
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not self._modules:
            return head + ")"
        lines = [head]
        for name, m in self._modules.items():
            child = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        return "\n".join(lines) + "\n)"


class ModuleList(Module):
    """A list of modules, registered as `0`, `1`, ..."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self._modules)), module)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def extra_repr(self):
        return ""


class Sequential(ModuleList):
    """Modules applied one after another: y = f_n(... f_2(f_1(x)))."""

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x
