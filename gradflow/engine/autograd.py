"""Reverse-mode automatic differentiation: the Function base class, grad mode, and backward.

Every differentiable op is a `Function` subclass with a static `forward(ctx, *arrays, **params)`
that computes the output from numpy arrays, and a static `backward(ctx, grad)` that receives
dL/d(output) and returns dL/d(input) for each positional input. Positional arguments of `apply`
are the differentiable inputs (Tensors); keyword arguments are constants (axis, shape, mask).

`backward()` visits the graph in reverse topological order, so a node runs only after every
gradient flowing into its output has been summed:  dL/dx = sum over uses u of x of dL/du du/dx.

Backward computes with the arrays forward saved, so they must still hold the forward pass's values
when it runs. A node remembers the version of each input whose memory it saved, and backward
refuses to run if one went up (an optimizer's step updates the parameters in place and counts it);
while the node lives, writes into that memory through `tensor.data` are refused (SavedArray).

Read this file first (README.md gives the reading order); then engine/ops/elementwise.py.
"""

import functools
import time
import weakref

import numpy as np

from gradflow.engine.dtype import get_default_dtype

_grad_enabled = True
_scope = ()  # the Modules whose forward is running, outermost first: recorded on each node for drawings
_profiler = None  # set by gradflow.profile(): receives (op name, "forward" or "backward", seconds)
_anomaly = False  # True inside gradflow.detect_anomaly(): every output and gradient is checked for NaN/inf
_retain_all = False  # True inside retain_grads(): backward keeps every tensor's gradient, not only the leaves'


def is_grad_enabled():
    """True unless inside `no_grad()`."""
    return _grad_enabled


class _GradMode:
    """Context manager and decorator that sets whether ops record the graph."""

    enabled = True

    def __enter__(self):
        global _grad_enabled
        self._previous = _grad_enabled
        _grad_enabled = self.enabled

    def __exit__(self, *exc):
        global _grad_enabled
        _grad_enabled = self._previous

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Record nothing and save nothing: for evaluation and for updating parameters."""

    enabled = False


class enable_grad(_GradMode):
    """Record the graph again inside a `no_grad` block."""

    enabled = True


class module_scope:
    """Ops recorded inside belong to `module` (and to the modules around it), for drawing the graph.

    A class rather than a generator-based context manager: it is entered on every module call.
    """

    __slots__ = ("module", "previous")

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        global _scope
        self.previous, _scope = _scope, _scope + (self.module,)

    def __exit__(self, *exc):
        global _scope
        _scope = self.previous


class retain_grads:
    """Inside the block, backward keeps the gradient of every tensor of the graph in its .grad, as if
    each had called retain_grad(): for drawing and exploring a graph with a gradient on every arrow.

        with gf.autograd.retain_grads():
            loss.backward()
    """

    def __enter__(self):
        global _retain_all
        self.previous, _retain_all = _retain_all, True

    def __exit__(self, *exc):
        global _retain_all
        _retain_all = self.previous


def unbroadcast(grad, shape):
    """Sum `grad` over the axes broadcasting created, so that it has `shape`.

    If y = broadcast(x), each x element was copied to several y elements, so
    dL/dx = sum of dL/dy over the copies: over the leading axes broadcasting added, and over the
    axes where x had size 1. This is the one place broadcasting is undone for every op.
    """
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    stretched = tuple(extra + i for i, n in enumerate(shape) if n == 1 and grad.shape[extra + i] != 1)
    return grad.sum(axis=tuple(range(extra)) + stretched, keepdims=True).reshape(shape)


def _camel_to_snake(name):
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


class Function:
    """Base class of every differentiable op; an instance is the op's node in the graph.

    The instance is also the `ctx` that forward and backward share: forward stores what backward
    needs with `ctx.save_for_backward(*arrays)` or as attributes, and backward reads them back.
    """

    name = None  # how errors and graph drawings call the op; defaults to the class name in snake_case
    casts = False  # True for an op whose purpose is its output's dtype (Cast): exempt from _keep_dtype
    _saved = ()
    _saved_versions = ()  # (input index, input, its version) for each input whose memory forward saved
    _freed = False
    _retained = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = _camel_to_snake(cls.__name__)

    @staticmethod
    def forward(ctx, *arrays, **params):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError

    def save_for_backward(self, *arrays):
        """Keep arrays for backward; under no_grad or when no input needs a gradient, keep nothing."""
        if self._recording:
            self._saved = arrays

    @property
    def recording(self):
        """True when backward will run: forward may skip work that only backward needs."""
        return self._recording

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(
                f"{self.name}: its saved arrays were freed by a backward pass; call backward(retain_graph=True) "
                "the first time to backward through the same graph again"
            )
        return self._saved

    @classmethod
    def apply(cls, *inputs, **params):
        """Run forward on the inputs' arrays and, if any input requires grad, record the node."""
        # (list comprehensions and _requires_grad: this runs for every op, so each microsecond counts)
        tensors = tuple([x if x is None or isinstance(x, Tensor) else Tensor(x) for x in inputs])
        arrays = [None if t is None else t._data for t in tensors]  # _data: the array itself, unguarded
        ctx = cls()
        if _grad_enabled:
            ctx.needs_input_grad = needs = tuple([t is not None and t._requires_grad for t in tensors])
            ctx._recording = True in needs
        else:  # under no_grad nothing is recorded: skip asking each input (decoding runs ~900 ops a token)
            ctx.needs_input_grad, ctx._recording = (False,) * len(tensors), False
        start = _profiler and time.perf_counter()
        try:
            out = cls.forward(ctx, *arrays, **params)
        except (ValueError, IndexError, TypeError) as e:
            raise _op_error(cls.name, e, tensors) from None
        if _profiler:
            _profiler.record(cls.name, "forward", time.perf_counter() - start)
        out = out if type(out) is np.ndarray else np.asarray(out)
        if not cls.casts:
            out = _keep_dtype(out, arrays)
        if _anomaly:
            anomaly.check_forward(ctx, out, tensors, params)
        if not ctx._recording:
            result = Tensor._make(out, requires_grad=False, grad_fn=None)
            if out.base is not None:  # a view counts in-place changes in its base's version, as with a graph
                result._base = _viewed(out, tensors, arrays)
            return result
        ctx.inputs = tensors
        ctx.params = params
        ctx.scope = _scope
        result = Tensor._make(out, requires_grad=True, grad_fn=ctx)
        if out.base is not None:  # a view (reshape, transpose, slice) shares its input's memory, and its guards
            result._base = _viewed(out, tensors, arrays)
        if ctx._saved:
            _guard_saved(ctx, arrays, result)
        return result

    def _release(self):
        """Free what forward saved; keep the graph's structure so it can still be drawn."""
        keep = ("needs_input_grad", "inputs", "params", "scope", "_retained")
        self.__dict__ = {k: v for k, v in self.__dict__.items() if k in keep}
        self._freed = True
        self._recording = False

    def __repr__(self):
        return f"<{self.name}>"


def _same_memory(s, a):
    """True if array s is array a or a view of a's memory (numpy's .base is the array owning the memory)."""
    return s is a or s.base is a or (a.base is not None and s.base is a.base and np.may_share_memory(s, a))


def _viewed(out, tensors, arrays):
    """The tensor whose memory `out` views, when it is an input's (None if it is another array's)."""
    for t, a in zip(tensors, arrays):
        if a is not None and _same_memory(out, a):
            return t if t._base is None else t._base
    return None


def _guard_saved(ctx, arrays, out):
    """Guard the memory forward saved, of inputs or of the output, until backward has used it.

    backward computes with the saved arrays, so they must still hold the forward pass's values:
    each saved input's version is remembered, for backward to compare (an optimizer's in-place
    update raises it), and writes through `.data` are refused while this node lives (Tensor.data).
    A saved output's version is remembered too, through a weak reference: the node must not keep
    its own output alive, and once nothing holds the output nothing can write into it.
    """
    saved = [s for s in ctx._saved if isinstance(s, np.ndarray)]
    versions = []
    for i, (t, a) in enumerate(zip(ctx.inputs, arrays)):
        if a is not None and any(_same_memory(s, a) for s in saved):
            versions.append((i, t, t.version))
            t._hold(ctx, i)
    if any(_same_memory(s, out._data) for s in saved):  # softmax and exp save their output
        out._hold(ctx, None)
        versions.append((None, weakref.ref(out), out.version))
    ctx._saved_versions = tuple(versions)


def describe(t, scope=()):
    """How errors name a tensor: 'weight of shape (4, 3)' (its .name, or its name as a parameter of the
    modules in `scope`), else 'a tensor of shape (4, 3)'; a view also names the tensor it views."""
    name = t.name or _parameter_name(t, scope)
    text = f"{name} of shape {t.shape}" if name else f"a tensor of shape {t.shape}"
    return text if t._base is None else f"{text}, a view of {describe(t._base, scope)}"


def _parameter_name(t, scope):
    """t's dotted name among the parameters of the modules in scope (outermost first), or None. The
    op's own module is searched first, so a shared weight is called by the name it has there."""
    if not scope:
        return None
    tree = list(scope[0].named_modules())
    prefixes = {id(m): prefix for prefix, m in tree}
    for m in [*reversed(scope), *(m for _, m in tree)]:
        for name, p in m._parameters.items():
            if p is t:
                prefix = prefixes.get(id(m), "")
                return f"{prefix}.{name}" if prefix else name
    return None


def module_path(scope):
    """The dotted name of the innermost module of `scope` in the outermost one (e.g. blocks.2.attn),
    the outermost's class name for an op in its own forward, None outside any module."""
    if not scope:
        return None
    names = {id(m): name for name, m in scope[0].named_modules()}
    return names.get(id(scope[-1])) or type(scope[0]).__name__


def _op_error(name, error, tensors):
    """Re-raise a numpy error as the op's own, naming the op and its input shapes."""
    message = str(error)
    if not message.startswith(f"{name}:"):
        shapes = ", ".join("None" if t is None else str(t.shape) for t in tensors)
        message = f"{name}: {message} (input shapes {shapes})"
    if isinstance(error, IndexError) and not isinstance(error, ValueError):
        return IndexError(message)
    return (ValueError if isinstance(error, ValueError) else TypeError)(message)


def _keep_dtype(out, arrays):
    """Results stay in the inputs' float dtype.

    numpy 2 promotes float32 with a float64 scalar or constant to float64 without a word; an
    op's result is cast back to the widest float dtype of its inputs (integer inputs that produce
    floats, as in the mean of token ids, give the default float dtype).
    """
    if out.dtype.kind != "f":
        return out
    dtype = None
    for a in arrays:
        if a is not None and a.dtype.kind == "f" and (dtype is None or a.dtype.itemsize > dtype.itemsize):
            dtype = a.dtype
    dtype = dtype or get_default_dtype()
    return out if out.dtype == dtype else out.astype(dtype)


def topological_order(root):
    """Nodes reachable from `root`, each before the nodes that produced its inputs.

    An iterative depth-first search (no recursion, so a chain of 100,000 ops works): a node is
    emitted after all of its inputs' nodes, and the reverse of that order is returned.
    """
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
            continue
        if node in visited:
            continue
        visited.add(node)
        stack.append((node, True))
        for t in reversed(node.inputs):
            if t is not None and t.grad_fn is not None and t.grad_fn not in visited:
                stack.append((t.grad_fn, False))
    return order[::-1]


def backward(root, grad=None, retain_graph=False):
    """Accumulate d(root)/d(leaf), times `grad`, into every leaf's `.grad`."""
    if not root.requires_grad:
        raise RuntimeError(
            "backward: this tensor does not require grad and has no graph to differentiate: "
            "create its inputs with requires_grad=True (and outside no_grad)"
        )
    if grad is None:
        if root.numel() != 1:
            raise ValueError(
                f"backward: the gradient can only be implied for a one-element output, "
                f"this one has shape {root.shape}: pass grad= of that shape, or reduce it first (e.g. .sum())"
            )
        grad = np.ones(root.shape, dtype=root.dtype)
    else:
        grad = np.asarray(grad)
        if grad.shape != root.shape:
            raise ValueError(f"backward: grad has shape {grad.shape} but the output has shape {root.shape}")
        grad = grad.astype(root.dtype, copy=False)
    if root.grad_fn is None:
        root._accumulate_grad(grad)
        return

    if _anomaly:
        anomaly.check_given_grad(grad)
    pending = {root.grad_fn: grad}
    order = topological_order(root.grad_fn)
    if _retain_all:  # each op's output is its root or an input of a later op: keep each one's gradient
        set_retained(root.grad_fn, root)
        for node in order:
            for t in node.inputs:
                if t is not None and t.grad_fn is not None:
                    set_retained(t.grad_fn, t)
    for node in order:
        grad = pending.pop(node, None)
        if grad is None:  # nothing flowed here (its output's gradient was None)
            if not retain_graph:
                node._release()
            continue
        if node._freed:
            raise RuntimeError(
                f"backward: trying to backward through the graph a second time, but {node.name} freed its "
                "saved arrays after the first; call backward(retain_graph=True) the first time to keep them"
            )
        for i, t, version in node._saved_versions:
            t = t() if i is None else t  # the output, weakly held (see _guard_saved)
            if t is not None and t.version != version:
                role = "output" if i is None else f"input {i}"
                raise RuntimeError(
                    f"backward: {node.name}'s saved {role} ({describe(t, node.scope)}) was modified in place "
                    f"after the forward pass (version {version}, now {t.version}); backward needs the values the "
                    "forward pass used: run the forward pass again after changing them (optimizer.step() "
                    "changes every parameter)"
                )
        retained = node._retained and node._retained()
        if retained is not None:
            retained._accumulate_grad(grad)
        start = _profiler and time.perf_counter()
        input_grads = _as_grad_tuple(node, type(node).backward(node, grad))
        if _profiler:
            _profiler.record(node.name, "backward", time.perf_counter() - start)
        if _anomaly:
            anomaly.check_backward(node, input_grads)
        for i, (t, g) in enumerate(zip(node.inputs, input_grads)):
            if g is None or not node.needs_input_grad[i]:
                continue
            g = _input_grad(node, i, t, g)
            if t.grad_fn is None:
                t._accumulate_grad(g)
            elif t.grad_fn in pending:
                pending[t.grad_fn] = pending[t.grad_fn] + g
                if _anomaly:
                    anomaly.check_sum(t.grad_fn, pending[t.grad_fn])
            else:
                pending[t.grad_fn] = g
        if not retain_graph:
            node._release()


def _as_grad_tuple(node, grads):
    """backward returns one gradient per input: a tuple (or list), or a bare array for a single input."""
    n = len(node.inputs)
    if not isinstance(grads, (tuple, list)):
        if n != 1:
            raise ValueError(
                f"{node.name}.backward returned a single {type(grads).__name__} for {n} inputs; "
                "return a tuple with one gradient (or None) per input"
            )
        return (grads,)
    if len(grads) != n:
        raise ValueError(f"{node.name}.backward returned {len(grads)} gradients for {n} input{'s' * (n != 1)}")
    return grads


def _input_grad(node, i, t, g):
    """Reduce a backward's gradient to its input's shape and dtype, or say why it can't be."""
    if type(g) is np.ndarray and g.shape == t.shape:  # the common case: nothing to reduce
        return g if g.dtype == t.dtype else g.astype(t.dtype)
    g = np.asarray(g)
    try:
        fits = np.broadcast_shapes(g.shape, t.shape) == g.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"{node.name}.backward returned a gradient of shape {g.shape} for input {i} of shape {t.shape}"
        )
    return unbroadcast(g, t.shape).astype(t.dtype, copy=False)


def set_retained(node, tensor):
    """Make backward store the gradient of `tensor`, the output of `node`, in `tensor.grad`."""
    node._retained = weakref.ref(tensor)


from gradflow.engine import anomaly  # noqa: E402  (anomaly.py uses this module's helpers)
from gradflow.engine.tensor import Tensor  # noqa: E402  (tensor.py imports this module first)
