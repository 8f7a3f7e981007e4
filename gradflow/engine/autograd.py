"""Reverse-mode automatic differentiation: Function, an op and its node in the graph, and backward, the walk.

Read this file first (README.md gives the reading order); next comes engine/ops/elementwise.py.

Every differentiable op is a `Function` subclass with a static `forward(ctx, *arrays, **params)`
that computes the output from numpy arrays, and a static `backward(ctx, grad)` that receives
dL/d(output) and returns dL/d(input) for each positional input. `Op.apply(*tensors, **params)` runs
forward and, when an input requires grad (and not under `no_grad`), records the op as a node: the
output's `grad_fn`, which knows its inputs and, for each, the node that made it when the op ran
(`input_nodes`: the edges of the graph, along which backward sends the gradients). Positional
arguments of `apply` are the differentiable inputs (Tensors); keyword arguments are constants (axis,
shape, mask).

`backward(root)` is the chain rule, node by node. A tensor x used by the ops u1, u2, ... gets

    dL/dx = sum over the uses u of x of  dL/du * du/dx

so the walk visits the nodes in reverse topological order (root first, each node before the nodes
that made its inputs): a node runs only after every use of its output has sent its share. At the
node of each op u it pops dL/du (the sum of those shares), calls u's backward for dL/du * du/dx of
each input x, adds that to x's sum (a leaf, such as a parameter, keeps its sum in `.grad`), and
frees what u's forward saved.

Three concerns sit beside the walk, each in its own file: the guards that keep what forward saved
unchanged until backward uses it (saved.py), the names errors give ops, tensors and modules
(naming.py), and the tools that watch ops run (gf.profile, gf.detect_anomaly, retain_grads below,
module scopes), which attach at the engine's one extension point (hooks.py) and cost one check per op
while none is on.
"""

import functools
import weakref

import numpy as np

from gradflow.engine import hooks
from gradflow.engine.dtype import keep_dtype
from gradflow.engine.hooks import watchers
from gradflow.engine.naming import op_error, op_name
from gradflow.engine.saved import check_saved, guard_saved, viewed

_grad_enabled = True


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


class Function:
    """Base class of every differentiable op; an instance is the op's node in the graph.

    The instance is also the `ctx` that forward and backward share: forward stores what backward
    needs with `ctx.save_for_backward(*arrays)` or as attributes, and backward reads them back.
    """

    name = None  # how errors and graph drawings call the op; defaults to the class name in snake_case
    casts = False  # True for an op whose purpose is its output's dtype (Cast): exempt from keep_dtype
    scope = ()  # the modules whose forward ran the op, outermost first (naming.module_scope sets it)
    _saved = ()
    _saved_versions = ()  # (input index, its version) for each input whose memory forward saved (None: the output)
    _freed = False
    _retained = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = op_name(cls.__name__)

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
        """y = forward(the inputs' arrays); if an input needs a gradient, y.grad_fn is this node."""
        ctx = cls()
        ctx.inputs, arrays, ctx.needs_input_grad, ctx.input_nodes = _inputs(inputs)
        ctx.params, ctx._recording = params, True in ctx.needs_input_grad
        out = hooks.forward(_output, ctx, arrays) if watchers else _output(ctx, arrays)
        y = Tensor._make(out, ctx._recording, ctx if ctx._recording else None)
        if out.base is not None:  # a view (reshape, transpose, slice) shares its input's memory, and its guards
            y._base = viewed(out, ctx.inputs, arrays)
        if ctx._saved:  # backward will need these arrays as forward saw them
            guard_saved(ctx, arrays, y)
        return y

    def _release(self):
        """Free what forward saved; keep the graph's structure so it can still be drawn."""
        before = self.__dict__
        self.__dict__ = {k: before[k] for k in _STRUCTURE if k in before}
        self._freed = True
        self._recording = False

    def __repr__(self):
        return f"<{self.name}>"


_STRUCTURE = ("needs_input_grad", "inputs", "input_nodes", "params", "scope", "_retained")  # what _release keeps


def _inputs(inputs):
    """apply's inputs as Tensors (a number or an array becomes one), their arrays, which of them need
    a gradient (none under no_grad, where nothing is recorded), and the node that made each (None for
    a leaf). The node is kept as it is now: if an input is later changed in place, and that change is
    recorded as its new grad_fn (inplace.py), this op's gradient still goes to the node that made the
    values it read."""
    # (one loop, and _data and _requires_grad rather than the properties: this runs for every op; four list
    # comprehensions took twice as long)
    tensors, arrays, needs, nodes = [], [], [], []
    for t in inputs:
        if t is not None and not isinstance(t, Tensor):
            t = Tensor(t)
        need = _grad_enabled and t is not None and t._requires_grad  # under no_grad, none (nothing is recorded)
        tensors.append(t)
        arrays.append(None if t is None else t._data)  # _data: the array itself, unguarded
        needs.append(need)
        nodes.append(t.grad_fn if need else None)
    return tuple(tensors), arrays, tuple(needs), tuple(nodes)


def _output(ctx, arrays):
    """The op's output array, in its inputs' float dtype; a numpy error inside forward, as the op's own."""
    try:
        out = type(ctx).forward(ctx, *arrays, **ctx.params)
    except (ValueError, IndexError, TypeError) as e:
        raise op_error(ctx.name, e, ctx.inputs) from None
    out = out if type(out) is np.ndarray else np.asarray(out)
    return out if ctx.casts else keep_dtype(out, arrays)


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
        for made_by in reversed(node.input_nodes):
            if made_by is not None and made_by not in visited:
                stack.append((made_by, False))
    return order[::-1]


def backward(root, grad=None, retain_graph=False):
    """Accumulate d(root)/d(leaf), times `grad`, into every leaf's `.grad`: the chain rule, node by node."""
    grad = _root_grad(root, grad)
    if root.grad_fn is None:  # root is a leaf: its gradient is the one given
        root._accumulate_grad(grad)
        return
    order = topological_order(root.grad_fn)
    hooks.walk_begins(root, grad, order)
    pending = {root.grad_fn: grad}  # node -> dL/d(its output), summed over the uses visited so far
    for node in order:  # every use of a node's output comes before it: its gradient is complete
        grad = pending.pop(node, None)
        if grad is not None:  # (None: no gradient flowed into this node's output)
            check_saved(node)  # what its forward saved is still there, unchanged (saved.py)
            _keep_retained(node, grad)
            grads = hooks.backward(_input_grads, node, grad) if watchers else _input_grads(node, grad)
            for t, made_by, g in zip(node.inputs, node.input_nodes, grads):
                if g is None:
                    continue
                if made_by is None:  # a leaf: its .grad sums the gradients of every path to it
                    t._accumulate_grad(g)
                elif made_by in pending:  # t has several uses: dL/dt sums over them
                    pending[made_by] = pending[made_by] + g
                else:
                    pending[made_by] = g
        if not retain_graph:  # free what forward saved; the graph's structure stays, for drawings
            node._release()


def _input_grads(node, grad):
    """node's backward: from dL/d(output), dL/d(input) for each input, in its shape and dtype (None where
    the input needs none)."""
    grads = type(node).backward(node, grad)
    if type(grads) is not tuple or len(grads) != len(node.inputs):  # a bare array, a list, or a miscount
        grads = _as_grad_tuple(node, grads)
    return [
        None if g is None or not need else _input_grad(node, i, t, g)
        for i, (t, g, need) in enumerate(zip(node.inputs, grads, node.needs_input_grad))
    ]


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
    shape, dtype = t._data.shape, t._data.dtype  # the array's own: numpy's tuple and np.dtype, read once per node
    if type(g) is np.ndarray and g.shape == shape:  # the common case: nothing to reduce
        return g if g.dtype == dtype else g.astype(dtype)
    g = np.asarray(g)
    try:
        fits = np.broadcast_shapes(g.shape, shape) == g.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{node.name}.backward returned a gradient of shape {g.shape} for input {i} of shape {shape}")
    return unbroadcast(g, shape).astype(dtype, copy=False)


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


def _root_grad(root, grad):
    """dL/d(root), where the walk starts: `grad`, checked against root, or 1 for a one-element root."""
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
        return np.ones(root.shape, dtype=root.dtype)
    grad = np.asarray(grad)
    if grad.shape != root.shape:
        raise ValueError(f"backward: grad has shape {grad.shape} but the output has shape {root.shape}")
    return grad.astype(root.dtype, copy=False)


# --- gradients of tensors that are not leaves ---------------------------------------------------


def set_retained(node, tensor):
    """Make backward store the gradient of `tensor`, the output of `node`, in `tensor.grad`."""
    node._retained = weakref.ref(tensor)


def _keep_retained(node, grad):
    """Store dL/d(node's output) in the output's .grad, if it asked to keep it (Tensor.retain_grad)."""
    retained = node._retained and node._retained()
    if retained is not None:
        retained._accumulate_grad(grad)


class _RetainAll(hooks.Watcher):
    """Before the walk, every node's output asks to keep its gradient: each is the root or an input of
    a later node."""

    def walk_begins(self, root, grad, order):
        set_retained(root.grad_fn, root)
        for node in order:
            for t, made_by in zip(node.inputs, node.input_nodes):
                if made_by is not None:
                    set_retained(made_by, t)


class retain_grads(hooks.watching):
    """Inside the block, backward keeps the gradient of every tensor of the graph in its .grad, as if
    each had called retain_grad(): for drawing and exploring a graph with a gradient on every arrow.

        with gf.autograd.retain_grads():
            loss.backward()
    """

    def __init__(self):
        super().__init__(_RETAIN_ALL)


_RETAIN_ALL = _RetainAll()

# apply makes Tensors, and Tensor's operators apply Functions: each module needs the other. tensor.py
# imports this module before it defines Tensor, so Tensor is imported here, once Function exists.
from gradflow.engine.tensor import Tensor  # noqa: E402
