"""detect_anomaly(): name the first op that makes a NaN or an infinity, in forward or in backward.

A NaN spreads: every op that reads one makes more, so once the loss is NaN every tensor after the
first bad op is NaN too, and the loss cannot say where it began. Inside `with detect_anomaly():`

  forward   each op's output is checked as soon as it is made. The first non-finite one raises
            AnomalyError naming the op, its module (e.g. blocks.2.attn), its input shapes and the
            line of your code that called it (the innermost outside gradflow and models/, found
            only while anomaly mode is on). An op whose inputs were finite is the culprit (exp
            overflowing, 0/0). If an input already held the NaN, no checked op made it: the error
            names that input (a parameter, a tensor made by hand, or one made before the check).
  backward  each gradient a node's backward returns is checked, node by node in the order they
            run, so the first node to return a NaN or inf is named, with the line that called
            its op in forward (recorded then, only while anomaly mode is on).

One infinity is not an anomaly: an op passing on an inf it was given by an input or a constant
that is not a parameter, such as the -inf of an attention mask (whose softmax weights are 0).
Off by default. It is a watcher (engine/hooks.py): while it is off, the engine does not call it.
"""

import functools
import importlib.util
import inspect
import os

import numpy as np

from gradflow.engine.autograd import is_grad_enabled
from gradflow.engine.hooks import Watcher, watching
from gradflow.engine.naming import describe, module_path


class AnomalyError(FloatingPointError):
    """A NaN or an infinity appeared in forward or backward; the message names the op that made it."""


class _Checks(Watcher):
    """The checks below, at the moments the engine calls a watcher."""

    def forward_ends(self, node, out):
        check_forward(node, out)

    def walk_begins(self, root, grad, order):
        check_given_grad(grad)

    def backward_begins(self, node, grad):
        check_sum(node, grad)

    def backward_ends(self, node, grads):
        check_backward(node, grads)


_CHECKS = _Checks()


class detect_anomaly(watching):
    """Check every op's output and every gradient for NaN/inf (see the module's docstring).

    with gf.detect_anomaly():          # or as a decorator: @gf.detect_anomaly()
        loss = model(x, y)[1]
        loss.backward()
    """

    def __init__(self):
        super().__init__(_CHECKS)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly():
                return fn(*args, **kwargs)

        return wrapper


# --- forward -----------------------------------------------------------------------------------


def check_forward(ctx, out):
    """Each op's output, as soon as it is made, before it is handed on."""
    if ctx._recording:  # backward's message names the line that called the op: found now, while it runs
        ctx.created_at = user_line()
    if out.dtype.kind != "f" or np.isfinite(out).all():
        return
    tensors, params, scope = ctx.inputs, ctx.params, ctx.scope
    where = f"forward: {type(ctx).name} {_in(scope, is_grad_enabled())}"
    tail = f"; input shapes {_shapes(tensors)}; called at {user_line()}"
    given = set()  # "NaN" and "inf", if the inputs and constants hold them
    for i, t in enumerate(tensors):
        bad = set() if t is None else _kinds(t._data)
        given |= bad
        # a NaN in an input, or an inf in a parameter, is one no checked op made (an allowed inf is never NaN)
        if "NaN" in bad or (bad and t.is_leaf and t.requires_grad):
            origin = (
                f"made by {t.grad_fn.name} before detect_anomaly was on"
                if t.grad_fn is not None
                else "which no checked op made (a parameter, a tensor made by hand, or one made before "
                "detect_anomaly was on)"
            )
            raise AnomalyError(
                f"detect_anomaly: {where} got {_words(bad)} in its input {i} ({describe(t, scope)}), {origin}{tail}"
            )
    for key, value in params.items():  # the op's constants, such as masked_fill's value
        bad = _kinds(value) if isinstance(value, (float, np.floating, np.ndarray)) else set()
        if "NaN" in bad:
            raise AnomalyError(f"detect_anomaly: {where} was given NaN as its argument {key}{tail}")
        given |= bad
    made = _kinds(out)
    if not given or ("NaN" in made and "NaN" not in given):
        source = "finite inputs" if not given else "inputs without NaN"
        raise AnomalyError(f"detect_anomaly: {where} produced {_words(made)} from {source}{tail}")
    # else: an inf passed on from an input or a constant that may hold one (the -inf of a mask)


# --- backward ----------------------------------------------------------------------------------


def check_given_grad(grad):
    """The gradient given to backward() starts every other one: it must be finite too."""
    if grad.dtype.kind == "f" and not np.isfinite(grad).all():
        raise AnomalyError(f"detect_anomaly: backward: the gradient given to backward() holds {_words(_kinds(grad))}")


def check_backward(node, grads):
    """The gradients node's backward returned, one per input (None where the input needs none)."""
    for i, g in enumerate(grads):
        if g is not None and g.dtype.kind == "f" and not np.isfinite(g).all():
            t = node.inputs[i]
            raise AnomalyError(
                f"detect_anomaly: backward: {node.name} {_in(node.scope, True)} returned {_words(_kinds(g))} in "
                f"the gradient of its input {i} ({describe(t, node.scope)}) from a finite gradient of its output; "
                f"input shapes {_shapes(node.inputs)}; the op was called at {_created_at(node)}"
            )


def check_sum(node, grad):
    """The gradient reaching node's output, before its backward runs. Every gradient a backward returned
    was checked, and so was the one given to backward(): a non-finite one here is a sum. A tensor used
    several times gets the sum of their gradients, and finite terms can still overflow."""
    if grad.dtype.kind == "f" and not np.isfinite(grad).all():
        raise AnomalyError(
            f"detect_anomaly: backward: the gradients reaching the output of {node.name} "
            f"{_in(node.scope, True)} from its several uses add up to {_words(_kinds(grad))} (each was "
            f"finite); the op was called at {_created_at(node)}"
        )


# --- naming ------------------------------------------------------------------------------------


def _kinds(a):
    """Which of "NaN" and "inf" occur in array a (none in an array of integers or booleans)."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return set()
    return {k for k, present in (("NaN", np.isnan(a).any()), ("inf", np.isinf(a).any())) if present}


def _words(kinds):
    return " and ".join(sorted(kinds))  # "NaN", "inf" or "NaN and inf"


def _shapes(tensors):
    return ", ".join("None" if t is None else str(tuple(t.shape)) for t in tensors)


def _in(scope, grad_enabled):
    path = module_path(scope)
    if path:
        return f"in {path}"
    return "outside any module" if grad_enabled else "in a module not known (no_grad does not track modules)"


def _created_at(node):
    line = getattr(node, "created_at", None)
    return line or "a line not recorded (its forward ran without detect_anomaly)"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # gradflow/, above engine/


@functools.cache
def _library_folders():
    """gradflow's folder and gradflow.models' (inside it when installed from a wheel, the repository's
    models/ when editable), found without importing the models."""
    spec = importlib.util.find_spec("gradflow.models")
    models = [os.path.dirname(os.path.abspath(spec.origin)) + os.sep] if spec and spec.origin else []
    return (_PACKAGE, *models)


@functools.cache
def _inside_engine(filename):
    """Code of gradflow itself or of the model definitions in gradflow.models: not the line that is meant."""
    return os.path.abspath(filename).startswith(_library_folders())


def user_line():
    """file:line of the innermost frame outside gradflow and models/: the user's call that made the op."""
    frame = inspect.currentframe()
    try:
        while frame is not None and _inside_engine(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None:
            return None
        path = frame.f_code.co_filename
        if path.startswith(os.getcwd() + os.sep):
            path = os.path.relpath(path)
        return f"{path}:{frame.f_lineno}"
    finally:
        del frame  # a frame refers to its own locals: break the cycle
