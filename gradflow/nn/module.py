"""Module and Parameter: how layers own their weights and buffers, name them, save and load them.

A Module registers every Parameter and sub-Module assigned to one of its attributes, in the order
assigned, so `named_parameters()` yields dotted names such as `blocks.0.attn.q_proj.weight` that
map one to one onto PyTorch checkpoints. A buffer (register_buffer) is a tensor the module keeps
but does not learn, such as a fixed mask: saved in the state dict unless non-persistent, cast by
`to(dtype)`, never given to an optimizer.
"""

import numpy as np

from gradflow.engine.autograd import is_grad_enabled
from gradflow.engine.device import device as device_type
from gradflow.engine.dtype import FLOAT_DTYPES, is_float
from gradflow.engine.naming import module_scope
from gradflow.engine.tensor import Tensor, as_tensor


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
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent", set())

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        if name in self._buffers and not isinstance(value, (Parameter, Module)):
            self._buffers[name] = _buffer(type(self).__name__, name, value)  # a new value for the buffer
            object.__setattr__(self, name, self._buffers[name])
            return
        self._forget(name)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self._forget(name)
        object.__delattr__(self, name)

    def _forget(self, name):
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers.pop(name, None)
        self._non_persistent.discard(name)

    def register_buffer(self, name, tensor, persistent=True):
        """Keep `tensor` as attribute `name`: moved by to(), saved in state_dict() when persistent,
        never learned (it is not a parameter). tensor may be None, a Tensor, or array data."""
        if "_buffers" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}: call super().__init__() before register_buffer")
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"register_buffer: name must be a non-empty string without '.', got {name!r}")
        if name in self.__dict__ and name not in self._buffers:
            raise KeyError(f"register_buffer: {type(self).__name__} already has an attribute {name!r}")
        self._buffers[name] = _buffer(type(self).__name__, name, tensor)
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        object.__setattr__(self, name, self._buffers[name])

    def register_parameter(self, name, param):
        """setattr(self, name, param), PyTorch's spelling; param must be a Parameter or None."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got {type(param).__name__}")
        setattr(self, name, param)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def __call__(self, *args, **kwargs):
        if not is_grad_enabled():  # nothing is recorded, so there is no op to tell its module
            return self.forward(*args, **kwargs)
        with module_scope(self):  # the ops recorded here know they belong to this module
            return self.forward(*args, **kwargs)

    # --- the tree -------------------------------------------------------------------------------

    def named_children(self):
        """(name, module) for each direct sub-module, each once, in the order assigned."""
        seen = set()
        for name, module in self._modules.items():
            if id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        return (m for _, m in self.named_children())

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
        return (m for _, m in self.named_modules())

    def apply(self, fn):
        """fn(m) for every sub-module, children before parents, then for self; returns self.
        (PyTorch's: `model.apply(init_weights)`.)"""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def _named(self, table, prefix, recurse):
        """(dotted name, entry) of one kind (parameters or buffers), a shared entry once per name."""
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is not None:
                    yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, Parameter) for every parameter; a shared (tied) parameter once, by its first name."""
        seen = set()
        for name, p in self._named("_parameters", prefix, recurse):
            if remove_duplicate and id(p) in seen:
                continue
            seen.add(id(p))
            yield name, p

    def parameters(self, recurse=True):
        """Every parameter once, as a generator, as PyTorch's (`next(model.parameters())`; list() it to keep it)."""
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix="", recurse=True):
        """(dotted name, buffer Tensor) for every buffer, persistent or not."""
        seen = set()
        for name, b in self._named("_buffers", prefix, recurse):
            if id(b) not in seen:
                seen.add(id(b))
                yield name, b

    def buffers(self, recurse=True):
        return (b for _, b in self.named_buffers(recurse=recurse))

    def num_parameters(self):
        """How many numbers the model learns (a tied weight counts once)."""
        return sum(p.numel() for p in self.parameters())

    # --- state ----------------------------------------------------------------------------------

    def _state_entries(self):
        """name -> Tensor of everything state_dict holds: every parameter under each of its names,
        then each module's persistent buffers, module by module (PyTorch's order)."""
        entries = {}
        for prefix, module in self.named_modules():
            buffers = [(n, b) for n, b in module._buffers.items() if n not in module._non_persistent]
            for name, t in [*module._parameters.items(), *buffers]:
                if t is not None:
                    entries[f"{prefix}.{name}" if prefix else name] = t
        return entries

    def state_dict(self):
        """name -> copy of the weights and persistent buffers (numpy arrays); a tied weight appears
        under each of its names, as in PyTorch."""
        return {name: t.data.copy() for name, t in self._state_entries().items()}

    def load_state_dict(self, state, strict=True):
        """Copy weights and buffers in by name; with strict, a missing, unexpected or wrongly shaped
        entry is an error.

        Nothing is cast silently: a weight must be real floating-point numbers (not bool, int,
        complex or text), and a tied weight (one Parameter under two names, like GPT's embedding and
        head) saved twice must be saved equal, or which copy wins would be arbitrary. A buffer
        takes the entry in its own dtype.
        """
        own = self._state_entries()
        missing = [n for n in own if n not in state]
        unexpected = [n for n in state if n not in own]
        wrong = [
            f"{n}: checkpoint {tuple(np.shape(state[n]))}, model {own[n].shape}"
            for n in own
            if n in state and tuple(np.shape(state[n])) != own[n].shape
        ]
        wrong += [f"{n}: dtype {np.asarray(state[n]).dtype}, not floating-point" for n, t in own.items()
                  if n in state and isinstance(t, Parameter) and np.asarray(state[n]).dtype.kind != "f"]  # fmt: skip
        wrong += [f"{n}: dtype {np.asarray(state[n]).dtype}, not real numbers" for n, t in own.items()
                  if n in state and np.asarray(state[n]).dtype.kind not in "biuf"]  # fmt: skip
        first_name = {}
        for n, p in own.items():
            if n in state and not wrong and isinstance(p, Parameter):
                tied = first_name.setdefault(id(p), n)
                if tied != n and not np.array_equal(state[tied], state[n]):
                    wrong.append(f"{tied} and {n} are one tied weight but the checkpoint holds two different values")
        problems = wrong + ([f"missing: {', '.join(missing)}"] if strict and missing else [])
        problems += [f"unexpected: {', '.join(unexpected)}"] if strict and unexpected else []
        if problems:
            raise ValueError("load_state_dict: " + "; ".join(problems))
        for name, t in own.items():
            if name in state:
                t.data = np.array(state[name], dtype=t.dtype)
        return missing, unexpected

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Freeze (False) or unfreeze every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none=True):
        """Forget the gradients: p.grad = None (PyTorch's default since 2.0: a later backward then
        writes the gradient instead of adding to zeros), or zeros with set_to_none=False."""
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    # --- dtype and device -----------------------------------------------------------------------

    def to(self, *args, dtype=None, device=None, non_blocking=False):
        """Cast every floating-point parameter (and its gradient) and buffer to dtype, in place;
        returns self. As PyTorch's: to(dtype), to("cpu"), to(device, dtype), to(tensor).

        gradflow runs on the CPU: "cpu" (or gf.device("cpu")) is accepted and changes nothing, other
        devices are an error (engine/device.py).
        """
        for arg in args:
            if isinstance(arg, (str, device_type)):
                device = arg
            elif isinstance(arg, Tensor):
                dtype = arg.dtype
            else:
                dtype = arg
        if device is not None and str(device).split(":")[0] != "cpu":
            raise ValueError(f"Module.to: gradflow computes on the CPU (numpy), not {device!r}; leave the device out")
        if dtype is None:
            return self
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"Module.to: {dtype!r} is neither a dtype nor a device") from None
        if dtype not in FLOAT_DTYPES:
            raise TypeError(f"Module.to: dtype must be float32 or float64 (gradflow computes in these), got {dtype}")
        for t in [*self.parameters(), *self.buffers()]:
            if is_float(t.dtype):
                t.data = t.data.astype(dtype)
                if t.grad is not None:
                    t.grad = t.grad.astype(dtype)
        return self

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    def half(self):
        return self.to(np.float16)  # refused by to(), with what to write instead

    def cpu(self):
        return self

    def cuda(self, device=None):
        return self.to("cuda")

    # --- printing -------------------------------------------------------------------------------

    def extra_repr(self):
        """What the module's line shows besides its name, e.g. `Linear(128, 512, bias=True)`."""
        return ", ".join(f"{n}={p.shape}" for n, p in self._parameters.items() if p is not None)

    def __repr__(self):
        """PyTorch's nested form: Name(extra) for a leaf; else Name( then extra and one line per
        child, each indented by two spaces, then )."""
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        lines += [f"({name}): {repr(m)}".replace("\n", "\n  ") for name, m in self._modules.items()]
        if not self._modules and len(lines) <= 1:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


def _buffer(owner, name, value):
    """A buffer's value as a Tensor (or None): a Parameter is not a buffer, array data becomes a Tensor."""
    if isinstance(value, Parameter):
        raise TypeError(f"{owner}: buffer {name!r} cannot hold a Parameter; assign it as an attribute instead")
    return None if value is None else as_tensor(value)


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
    """Modules applied one after another: y = f_n(... f_2(f_1(x))). Named `0`, `1`, ..., or, given one
    dict (an OrderedDict, as PyTorch takes), by its keys: `Sequential(OrderedDict(fc=lin)).fc`."""

    def __init__(self, *modules):
        if len(modules) == 1 and isinstance(modules[0], dict):
            super().__init__()
            for name, m in modules[0].items():
                setattr(self, name, m)
        else:
            super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


class ModuleDict(Module):
    """A dict of modules, registered under their keys: `d["wte"]` and `d.wte` are the same module."""

    def __init__(self, modules=None):
        super().__init__()
        for name, m in dict(modules or {}).items():
            self[name] = m

    def __getitem__(self, name):
        return self._modules[name]

    def __setitem__(self, name, module):
        setattr(self, name, module)

    def __delitem__(self, name):
        delattr(self, name)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, name):
        return name in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def extra_repr(self):
        return ""
