"""Grading a learner's piece against gradflow's own, call by call, and by finite differences.

While a check runs, the learner's function stands where gradflow's piece was (Piece.replaced_by),
wrapped so that every call also runs gradflow's piece on the same arguments and compares the two
results at once (diagnose.compare): a wrong gradient is caught at the op that made it, named by its
input and element, before it mixes with the rest of the graph. The learner's result is what the
engine goes on with, so the finite-difference gradcheck (engine/gradcheck.py) over the rows of
gradflow's gradcheck table (tools/gradcheck_table.py) then checks the whole chain as it ran.

A layer's check also trains nothing but asks whether a whole model still gradchecks with the
learner's piece inside: a 1-layer GPT built from gradflow.nn, in float64.
"""

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gradflow.engine.autograd import no_grad
from gradflow.engine.gradcheck import analytic_and_numerical
from gradflow.engine.kernels import use_kernels
from gradflow.engine.rng import manual_seed
from gradflow.engine.tensor import Tensor
from gradflow.exercises.diagnose import Failed, compare, learner_error, sizes_of, summed_to, within
from gradflow.exercises.mistakes import named
from gradflow.nn import functional as F
from gradflow.nn.blocks import TransformerBlock
from gradflow.nn.layers import Embedding, LayerNorm, Linear
from gradflow.nn.module import Module
from gradflow.nn.positional import LearnedPositionalEncoding
from gradflow.tools.gradcheck_table import CASES

# seal.py's events: a call of the learner's function begins; did the learner's code change what it must not?
BEFORE, VERIFY = "gradflow.exercises.before", "gradflow.exercises.verify"


class Learner:
    """The learner's function, called so that an error inside it becomes their own line (diagnose.Failed).

    After each call it asks the grading process's seal (seal.py) whether the call changed anything it
    must not; outside a grading process nobody listens and the question costs nothing.
    """

    def __init__(self, fn, path, who):
        self.fn, self.path, self.who = fn, path, who
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        sys.audit(BEFORE)
        try:
            return self.fn(*args, **kwargs)
        except Failed:
            raise
        except Exception as error:  # anything their code raised: shown as their line, not as gradflow's
            raise learner_error(error, self.path, self.who) from None
        finally:
            sys.audit(VERIFY)


def compared_backward(piece, learner, mistakes=()):
    """A backward(ctx, grad) that runs gradflow's and the learner's, compares each input's gradient
    (after the engine's own reduction of a broadcast gradient), and returns the learner's. A wrong
    gradient that one of `mistakes` (mistakes.py) computes is named as that mistake."""
    names = [p for p in inspect.signature(piece.owner.forward).parameters][1:]

    def backward(ctx, grad):
        inputs = ctx.inputs
        n = len(inputs)
        given = grad.copy()  # as it came, for the mistakes' formulas (the learner's code may change grad)
        expected = piece.function(ctx, grad.copy())
        expected = expected if isinstance(expected, (tuple, list)) else (expected,)
        got = learner(ctx, grad)
        said = f"{piece.qualname} returned"
        if not isinstance(got, (tuple, list)):
            if n != 1:
                listed = ", ".join(names[:n])
                raise Failed(f"{said} a single {type(got).__name__} for {n} inputs ({listed}): return a tuple, "
                             "one gradient (or None) per input", "count")  # fmt: skip
            got = (got,)
        if len(got) != n:
            raise Failed(f"{said} {len(got)} gradients for {n} input{'s' * (n != 1)} ({', '.join(names[:n])})", "count")
        sizes = sizes_of(*(t.shape for t in inputs if t is not None))
        for i, (t, want, mine) in enumerate(zip(inputs, expected, got)):
            if not ctx.needs_input_grad[i] or want is None:
                continue
            what = f"the gradient of {names[i]} (input {i}, shape {t.shape})"
            mine = _as_engine_does(mine, t.shape)
            try:
                compare(mine, _as_engine_does(want, t.shape), what, sizes)
            except Failed as failed:
                mistake = mine is not None and named(mistakes, ctx, given, i, mine, t.shape, _as_engine_does)
                if not mistake:
                    raise
                said = str(failed).split("\n  hint:")[0]
                raise Failed(f"{said}\n  hint: {mistake.name}: {mistake.hint}", "named") from None
        return got

    return backward


def _as_engine_does(g, shape):
    """The engine sums a gradient of the broadcast shape back to its input's (autograd._input_grad):
    a backward may return either, so both are compared after that sum."""
    if g is None:
        return None
    g = np.asarray(g)
    summed = summed_to(g, shape)
    return g if summed is None else summed


def compared_function(piece, learner, outputs=None):
    """A function that runs gradflow's piece and the learner's on the same arguments (gradflow's on
    copies), compares the results, and returns the learner's. `outputs` names a tuple's parts."""
    signature = inspect.signature(piece.function)

    def function(*args, **kwargs):
        expected = piece.function(*_copied(args), **_copied(kwargs))
        got = learner(*args, **kwargs)
        call = describe_call(piece, signature, args, kwargs)
        if outputs is None:
            compare(got, expected, f"the result of {call}", sizes_of(*_shapes(args)))
            return got
        if not isinstance(got, (tuple, list)) or len(got) != len(outputs):
            raise Failed(f"{call} returned {type(got).__name__}, expected a tuple ({', '.join(outputs)})", "count")
        for name, mine, want in zip(outputs, got, expected):
            compare(mine, want, f"{name}, returned by {call}")
        return got

    return function


def describe_call(piece, signature, args, kwargs):
    """'unbroadcast(grad=<array (3, 4)>, shape=(1, 4))': a call as a learner can redo it."""
    bound = signature.bind_partial(*args, **kwargs).arguments
    shown = ", ".join(f"{k}={_short(v)}" for k, v in bound.items() if k not in ("self", "ctx"))
    return f"{piece.attribute}({shown})"


def _short(v):
    if isinstance(v, np.ndarray):
        return f"<array {v.shape}>" if v.size > 8 else np.array2string(v, separator=", ")
    return repr(v)


def _copied(values):
    if isinstance(values, dict):
        return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in values.items()}
    return tuple(v.copy() if isinstance(v, np.ndarray) else v for v in values)


def _shapes(args):
    return [a.shape for a in args if isinstance(a, np.ndarray)]


def table_cases(*names):
    """The rows of gradflow's gradcheck table for these ops ("mul" takes "mul", not "rmul")."""
    cases = [c for c in CASES if any(c.name == n or c.name.startswith(n + " ") for n in names)]
    if not cases:
        raise ValueError(f"table_cases: no row of the gradcheck table is named {names}")
    return cases


def gradchecked(fn, inputs, where):
    """Gradcheck fn at inputs (engine/gradcheck.py's rule: |analytic - numeric| <= 1e-5 + 1e-4 |numeric|),
    every Failed said to come from `where`."""
    try:
        pairs = analytic_and_numerical(fn, *inputs)
        for i, analytic, numeric in pairs:
            if not np.allclose(analytic, numeric, rtol=1e-4, atol=1e-5):
                compare(analytic, numeric, f"the gradient of input {i} (shape {numeric.shape}), by finite differences")
    except Failed as failed:
        raise within(where, failed) from None


@dataclass(frozen=True)
class Plain:
    """The plain cases of an op, checked and reported first: `said` names them ("2-D cases")."""

    said: str
    test: Callable  # a gradcheck case -> whether it is one of them


SAME_SHAPE = Plain("same-shape cases", lambda case: len(set(case.shapes)) == 1 and not case.transposed)
# unbroadcast's plain cases: two operands of one shape (expand's and repeat's single input broadcasts)
OPERANDS_OF_ONE_SHAPE = Plain(
    "same-shape cases", lambda case: len(case.shapes) > 1 and len(set(case.shapes)) == 1 and not case.transposed
)
TWO_D = Plain("2-D cases", lambda case: all(len(s) == 2 for s in case.shapes) and not case.transposed)
ROWS = Plain("the cases of one matrix of rows", lambda case: len(case.shapes[0]) == 2 and not case.transposed)
ONE_ROW = Plain("one row", lambda case: len(case.shapes[0]) == 1)


def what_is_new(case, first, plain):
    """What a case adds to the plain cases `first`, in a learner's words: "a vector operand", "batch axes", ..."""
    shapes, seen = case.shapes, {len(s) for c in first for s in c.shapes}
    if " " in case.name:  # a variant of the op the table names: "softmax axis=0", "layer_norm no affine"
        return case.name.split(" ", 1)[1]
    if case.transposed:
        return "transposed (non-contiguous) inputs"
    if any(len(s) == 0 for s in shapes) and 0 not in seen:
        return "a scalar operand"
    if plain is SAME_SHAPE and len(set(shapes)) > 1:
        return "broadcasting"
    if any(len(s) == 1 for s in shapes) and 1 not in seen:
        return "a vector operand"
    if max(len(s) for s in shapes) > max(seen):
        return "several rows" if max(seen) == 1 else "batch axes"
    return "another shape"


@dataclass(frozen=True)
class OnTable:
    """Check a piece that runs inside backward on the table's rows for `ops`, compared call by call.

    plain: the cases a learner gets right first, checked first and reported ("2-D cases pass; now a
    vector operand"). model: also gradcheck the 1-layer GPT with the piece inside. extra: more
    computations to run with it (fn() -> a tensor to backward from), for what the table's random
    inputs never meet (ties). mistakes: the classic wrong backwards to name (mistakes.py). backward_side:
    the piece runs in backward (False for a forward piece, the causal mask: which inputs want a gradient,
    and the scale of an upstream gradient, change nothing in it).
    """

    ops: tuple
    plain: Plain = SAME_SHAPE
    model: bool = False
    extra: tuple = ()
    mistakes: tuple = ()
    backward_side: bool = True  # runs in backward: also graded with one input requiring a gradient, at scales

    def __call__(self, piece, learner, seed=0):
        wrapped = (
            compared_backward(piece, learner, self.mistakes)
            if piece.attribute == "backward"
            else compared_function(piece, learner)
        )
        cases = table_cases(*self.ops)
        first = [c for c in cases if " " not in c.name and self.plain.test(c)]  # no variant ("axis=0") is plain
        first = first if len(first) < len(cases) else []  # every case plain: nothing to say first
        with use_kernels("plain"), piece.replaced_by(wrapped):
            for case in first:
                gradchecked(case.fn, case.inputs(seed=seed), f"on gradflow's gradcheck case {case.label}")
            for case in (c for c in cases if c not in first):
                now = f"{self.plain.said} pass; now {what_is_new(case, first, self.plain)}, " if first else ""
                gradchecked(case.fn, case.inputs(seed=seed), f"{now}on gradflow's gradcheck case {case.label}")
            for case in [c for c in cases if len(c.shapes) > 1 and self.backward_side][:2]:
                for i in range(len(case.shapes)):  # a backward must give each input it is asked for
                    inputs = case.inputs(seed=seed + 1)
                    for j, x in enumerate(inputs):
                        x.requires_grad = i == j
                    where = f"with only input {i} requiring a gradient (ctx.needs_input_grad), on {case.label}"
                    gradchecked(case.fn, inputs, where)
            for scale in (1e-4, 30.0) if self.backward_side else ():
                _at_scale(cases[0], scale, seed)
            for build in self.extra:
                try:
                    build().backward()
                except Failed as failed:
                    raise within(f"on {build.__doc__}", failed) from None
            if self.model:
                model, ids, targets = tiny_gpt()
                gradchecked(lambda *p: model(ids, targets), model.parameters(), f"in {TinyGPT.__doc__}")
        said = f"{len(cases)} gradcheck case{'s' * (len(cases) != 1)}"
        said += f" and {len(self.extra)} more" if self.extra else ""
        return said + (" and a whole 1-layer GPT" if self.model else "")


def _at_scale(case, scale, seed):
    """Run a case's backward with its inputs times `scale` and an upstream gradient that is zero in about
    half its elements: every call is compared with gradflow's (compared_backward), no finite differences,
    so that magnitudes where a constant (an eps, a 1e-6) or a dropped term shows are graded too."""
    inputs = [Tensor(x.data * scale, requires_grad=True) for x in case.inputs(seed=seed + 2)]
    with no_grad():
        y = case.fn(*[Tensor(x.data) for x in inputs])
    if not np.isfinite(y.data).all():  # too large for this op: gradflow's own gradient is not a number either
        return
    rng = np.random.default_rng(seed + 3)
    grad = rng.standard_normal(y.shape) * (rng.random(y.shape) < 0.5)
    try:
        case.fn(*inputs).backward(grad)
    except Failed as failed:
        raise within(
            f"with the inputs of {case.label} times {scale:g} and half the upstream gradient zero", failed
        ) from None


class TinyGPT(Module):
    """a 1-layer GPT built from gradflow.nn in float64 (vocabulary 5, width 4, 2 heads, context 3)"""

    def __init__(self, vocab=5, d=4, heads=2, context=3):
        super().__init__()
        f64 = np.float64
        self.wte = Embedding(vocab, d, dtype=f64)
        self.wte.weight.data = self.wte.weight.data * 0.02  # GPT-2's N(0, 0.02^2) from Embedding's N(0, 1) draw
        self.wpe = LearnedPositionalEncoding(context, d, dtype=f64)
        self.block = TransformerBlock(d, heads, 2 * d, ffn="gelu", norm="layer", dtype=f64)
        self.ln_f = LayerNorm(d, dtype=f64)
        self.head = Linear(d, vocab, bias=False, dtype=f64)

    def forward(self, ids, targets):
        x = self.block(self.wpe(self.wte(ids)), causal=True)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def tiny_gpt():
    """(model, ids, targets): the same tiny model and batch at every call."""
    manual_seed(0)
    model = TinyGPT()
    rng = np.random.default_rng(0)
    for p in model.parameters():  # biases and gains away from 0 and 1, so that every path carries a gradient
        p.data[...] += rng.normal(0, 0.3, p.shape)
    ids = np.array([[0, 3, 3], [4, 1, 0]])
    return model, ids, np.array([[3, 3, 1], [1, 0, 2]])
