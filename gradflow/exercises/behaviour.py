"""Checks of the pieces that are not one op's gradient: the backward walk's order, the optimizer's
step, clipping, the schedule, batches, the BPE merges, sampling's filter and the KV cache.

Each runs gradflow's piece and the learner's on the same inputs (gradflow's on copies, or on its
own copy of the state) and compares what they return and what they leave behind, saying which
step, which call, which element; the walk's order is checked by its rule instead (a node before
the nodes that made its inputs), since more than one order is right.
"""

import numpy as np

from gradflow.engine.autograd import Function, enable_grad, no_grad
from gradflow.engine.functions import cat
from gradflow.engine.rng import manual_seed
from gradflow.engine.tensor import Tensor
from gradflow.exercises.checks import compared_function, gradchecked, table_cases
from gradflow.exercises.diagnose import Failed, compare, sizes_of, within
from gradflow.nn import functional as F
from gradflow.nn.general_attention import GeneralAttention
from gradflow.nn.kv_cache import KVCache
from gradflow.nn.module import Parameter
from gradflow.optim import Adam, AdamW, WarmupCosine
from gradflow.text.bpe import BPETokenizer

# --- the backward walk -------------------------------------------------------------------------------


def _diamond():
    """c = x*y + exp(x*y): x*y is used twice, so its node must wait for both gradients"""
    x, y = (Tensor(np.linspace(-1, 1, 6).reshape(2, 3) * s, requires_grad=True) for s in (1.0, 0.5))
    xy = x * y
    return (xy + xy.exp()).sum()


def _no_bias():
    """a linear layer without a bias: one of its node's inputs is None"""
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    w = Tensor(np.arange(12.0).reshape(4, 3) / 10, requires_grad=True)
    return F.linear(x, w).tanh().sum()


def _chain():
    """a chain of 3000 tanh: deeper than Python lets a function call itself (1000 calls)"""
    x = Tensor(np.array([0.5]), requires_grad=True)
    for _ in range(3000):
        x = x.tanh()
    return x.sum()


def topological_order(piece, learner, seed=0):
    """Every node once, the root's first, each before the nodes that made its inputs; then backward runs
    on the learner's order over a few rows of the gradcheck table."""
    for build in (_diamond, _no_bias, _chain):
        root = build().grad_fn
        expected = piece.function(root)
        try:
            _check_order(learner(root), expected, root)
        except Failed as failed:
            raise within(f"on {build.__doc__}", failed) from None
    cases = table_cases("mul", "softmax", "layer_norm")
    with piece.replaced_by(learner):
        for case in cases:
            gradchecked(case.fn, case.inputs(), f"on gradflow's gradcheck case {case.label}, backward in your order")
    return f"3 graphs and {len(cases)} gradcheck cases"


def _check_order(got, expected, root):
    got = list(got) if got is not None else None
    if got is None:
        raise Failed("your topological_order returned None: return the list of nodes", "none")
    if not all(isinstance(n, Function) for n in got):
        kinds = sorted({type(n).__name__ for n in got if not isinstance(n, Function)})
        raise Failed(f"your order holds {', '.join(kinds)}: it must hold nodes (a tensor's grad_fn), not tensors")
    seen = set()
    for n in got:
        if n in seen:
            raise Failed(f"the {n.name} node appears twice: each node must run once, after all its gradients arrived")
        seen.add(n)
    missing = [n for n in expected if n not in seen]
    if missing:
        raise Failed(f"{len(missing)} of {len(expected)} nodes are missing (the first: a {missing[0].name} node): "
                     "the walk must reach every node that made an input of a node it reached", "order")  # fmt: skip
    if len(got) != len(expected):
        raise Failed(f"your order has {len(got)} nodes; only {len(expected)} lead to the root", "order")
    if got[0] is not root:
        raise Failed(f"the first node is a {got[0].name} node, not the root's ({root.name}): backward starts at the "
                     "root, the node that made the output", "order")  # fmt: skip
    place = {n: i for i, n in enumerate(got)}
    for n in got:
        for t in n.inputs:
            if t is not None and t.grad_fn is not None and place[t.grad_fn] < place[n]:
                raise Failed(
                    f"a {t.grad_fn.name} node comes before the {n.name} node that uses its output: backward would "
                    f"run {t.grad_fn.name} before {n.name} has sent it its gradient",
                    "order",
                )


# --- training ----------------------------------------------------------------------------------------


def _by_hand(
    start, grads, lr, betas, eps, weight_decay=0.0, decoupled=False, amsgrad=False, corrected=True, eps_inside=False
):
    """Adam's steps written out (L2 decay through the gradient, or AdamW's decoupled decay of the weight;
    AMSGrad's running maximum of v), with or without the bias correction (the first step cancels it out)
    and with eps inside the square root or outside: the classic wrong versions, to name them."""
    p, m, v, v_max = start.copy(), 0.0, 0.0, 0.0
    for t, g in enumerate(grads, 1):
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = g + weight_decay * p
        m, v = betas[0] * m + (1 - betas[0]) * g, betas[1] * v + (1 - betas[1]) * g * g
        v_max = np.maximum(v_max, v) if amsgrad else v
        m_hat, v_hat = (m / (1 - betas[0] ** t), v_max / (1 - betas[1] ** t)) if corrected else (m, v_max)
        with np.errstate(divide="ignore", invalid="ignore"):
            p -= lr * m_hat / (np.sqrt(v_hat + eps) if eps_inside else np.sqrt(v_hat) + eps)
    return p


ADAM_MISTAKES = (
    (dict(corrected=False), "bias correction", "m and v start at 0, so early on they are too small: divide them by "
     "(1 - beta1^t) and (1 - beta2^t)"),
    (dict(eps_inside=True), "eps inside the square root", "eps is added to sqrt(v_hat), not to v_hat under the root "
     "(Kingma & Ba; PyTorch): sqrt(v_hat) + eps"),
    (dict(eps=0.0), "eps left out", "without eps, a coordinate whose gradients were all zero divides 0 by 0: "
     "add eps to sqrt(v_hat) in the denominator"),
)  # fmt: skip


def _closest_mistake(got, expected, start, grads, settings):
    """(name, hint) of the classic mistake whose steps by hand `got` equals, the closest one when two do
    (without eps and with eps inside the root agree to 1e-11 where v is large), or None."""
    found = []
    for changed, name, hint in ADAM_MISTAKES:
        hand = _by_hand(start, grads, **{**settings, **changed})
        same = np.allclose(got, hand, rtol=1e-10, atol=1e-13, equal_nan=True)
        if same and not np.allclose(hand, expected, rtol=1e-10, atol=1e-13):
            with np.errstate(invalid="ignore"):
                found.append((np.nanmax(np.abs(got - hand), initial=0.0), name, hint))
    return min(found)[1:] if found else None


def _gradients(rng, scales, zeros):
    """One (3, 4) gradient per scale; with `zeros`, a quarter of the coordinates zero at every step."""
    dead = rng.random((3, 4)) < 0.25 if zeros else np.zeros((3, 4), dtype=bool)
    return [np.where(dead, 0.0, rng.standard_normal((3, 4)) * scale) for scale in scales]


def adam_update(piece, learner, seed=0):
    """Three steps of Adam, Adam with L2 decay, AdamW and AMSGrad, each against gradflow's from the same start;
    then Adam where eps shows: gradients near eps in size, some coordinates never given one."""
    rng = np.random.default_rng(seed)
    # (optimizer, weight decay, AMSGrad, eps, gradient scales, some coordinates' gradients zero); shrinking
    # gradients make v fall below its largest value so far, so that AMSGrad's v_max counts in step 3
    runs = ((Adam, 0.0, False, 1e-8, (10.0, 1.0, 0.01), False), (Adam, 0.1, False, 1e-8, (10.0, 1.0, 0.01), False),
            (AdamW, 0.1, False, 1e-8, (10.0, 1.0, 0.01), False), (Adam, 0.0, True, 1e-8, (10.0, 1.0, 0.01), False),
            (Adam, 0.0, False, 1e-3, (1e-3, 1e-2, 1e-4), True))  # fmt: skip
    for kind, decay, amsgrad, eps, scales, zeros in runs:
        settings = dict(lr=0.01, betas=(0.9, 0.99), eps=eps)
        start = rng.standard_normal((3, 4))
        grads = _gradients(rng, scales, zeros)
        mine, ref = Parameter(start.copy()), Parameter(start.copy())
        mine_opt, ref_opt = (kind([q], weight_decay=decay, amsgrad=amsgrad, **settings) for q in (mine, ref))
        for t, g in enumerate(grads, 1):
            before = mine.data.copy()  # the same as ref's: every earlier step matched
            ref.grad, mine.grad = g.copy(), g.copy()
            ref_opt.step()
            with piece.replaced_by(learner):
                mine_opt.step()
            label = (f"{kind.__name__}(lr=0.01, betas=(0.9, 0.99), eps={eps:g}, weight_decay={decay}, "
                     f"amsgrad={amsgrad}), step {t}" + (", some gradients 0" if zeros else ""))  # fmt: skip
            if np.array_equal(mine.data, before, equal_nan=True):
                raise Failed(f"the parameter did not change at {label}.\n  hint: update p in place (p -= ...): "
                             "p = p - ... makes a new array that the parameter never sees", "inplace")  # fmt: skip
            # to the last digits float64 rounding leaves: a mistake shows in digits a looser test would miss
            wrong = not np.allclose(mine.data, ref.data, rtol=1e-10, atol=1e-13)
            written_out = dict(settings, weight_decay=decay, decoupled=kind is AdamW, amsgrad=amsgrad)
            mistake = _closest_mistake(mine.data, ref.data, start, grads[:t], written_out) if wrong else None
            if mistake:
                name, hint = mistake
                raise Failed(f"the parameter after {label} is Adam's with {name}.\n  hint: {hint}", name)
            compare(mine.data - before, ref.data - before, f"the change of the parameter at {label}", sizes_of((3, 4)))
            ours, theirs = ref_opt.state[id(ref)], mine_opt.state[id(mine)]
            if set(theirs) != set(ours):
                raise Failed(f"the state after {label} holds {sorted(theirs)}, gradflow's {sorted(ours)}: checkpoints "
                             "save and resume the state by these names", "state")  # fmt: skip
            for name in ("m", "v", "v_max"):
                if name in ours and not np.allclose(theirs[name], ours[name], rtol=1e-10, atol=1e-13, equal_nan=True):
                    raise Failed(f"the optimizer's {name} after {label} is not the step's new {name}.\n  hint: update "
                                 f"{name} in place, {name}[...] = ...: `{name} = ...` makes a new array that the "
                                 "optimizer's state never sees, so the next step starts from the old one",
                                 "state in place")  # fmt: skip
    return f"3 steps of each of {len(runs)} optimizers"


def clip_grad_norm(piece, learner, seed=0):
    """Clipped and unclipped (also a norm between max_norm / 2 and max_norm, and gradients so small that the
    1e-6 counts), the 2-norm, the 1-norm and the largest element, a parameter without a gradient, and one
    tensor passed alone."""
    rng = np.random.default_rng(seed)
    shapes = ((3, 4), (4,), (2, 2))
    # (max_norm as a multiple of the gradients' norm, or None for a fixed one, the norm, the gradients' scale)
    calls = ((None, 1.0, 2.0, 1.0), (None, 100.0, 2.0, 1.0), (None, 0.5, float("inf"), 1.0), (None, 2.0, 1.0, 1.0),
             (1.5, None, 2.0, 1.0), (0.5, None, 1.0, 1e-6), (None, 1e-7, 2.0, 1e-7))  # fmt: skip
    for relative, max_norm, norm_type, scale in calls:
        grads = [rng.standard_normal(s) * scale for s in shapes]
        if relative is not None:
            max_norm = relative * float(np.linalg.norm(np.concatenate([g.ravel() for g in grads]), norm_type))
        _clip_call(piece, learner, shapes, grads, max_norm, norm_type)
    one = Parameter(np.zeros((2, 3)))  # a single tensor, not a list: clip_grad_norm_(model.weight, 1.0)
    _clip_call(piece, learner, [(2, 3)], [rng.standard_normal((2, 3)) * 3], 1.0, 2.0, alone=one)
    return f"{len(calls) + 1} calls"


def _clip_call(piece, learner, shapes, grads, max_norm, norm_type, alone=None):
    mine, ref = [Parameter(np.zeros(s)) for s in shapes], [Parameter(np.zeros(s)) for s in shapes]
    for p, q, g in zip(mine, ref, grads):
        p.grad, q.grad = g.copy(), g.copy()
    if alone is None:
        mine.append(Parameter(np.zeros(2)))  # no gradient: it counts for nothing and stays without one
        ref.append(Parameter(np.zeros(2)))
    total = piece.function(ref if alone is None else ref[0], max_norm, norm_type)
    got = learner(mine if alone is None else mine[0], max_norm, norm_type)
    given = "parameters" if alone is None else "one tensor"
    call = f"clip_grad_norm({given}, max_norm={max_norm:.6g}, norm_type={norm_type})"
    compare(None if got is None else np.float64(got), np.float64(total), f"the norm returned by {call}")
    own = [_clipped_alone(g, max_norm, norm_type) for g in grads]
    theirs = [np.asarray(p.grad) for p in mine[: len(grads)]]
    if not all(np.allclose(t, q.grad) for t, q in zip(theirs, ref)) and all(map(np.allclose, theirs, own)):
        raise Failed(f"after {call}, each gradient is clipped by its own norm.\n  hint: clipping scales every "
                     "gradient by one factor, max_norm over the norm of all of them together (the norm of the "
                     "norms), so that the update keeps its direction", "joint norm")  # fmt: skip
    for i, (p, q) in enumerate(zip(mine, ref)):
        if q.grad is None:
            if p.grad is not None:
                raise Failed(f"{call} gave parameter {i}, which had no gradient, one")
            continue
        compare(p.grad, q.grad, f"the gradient of parameter {i} after {call}", sizes_of(q.shape))


def _clipped_alone(g, max_norm, norm_type):
    """g clipped by its own norm: the per-tensor clipping that clip_grad_norm is not."""
    scale = max_norm / (np.linalg.norm(g.ravel(), norm_type) + 1e-6)
    return g * scale if scale < 1 else g


def warmup_cosine(piece, learner, seed=0):
    """The learning rate at every step of three schedules, and past their end."""
    schedules = (WarmupCosine(1e-3, 10, 100, 1e-4), WarmupCosine(6e-4, 0, 50), WarmupCosine(1.0, 5, 5, 0.1))
    for s in schedules:
        steps = range(0, s.decay + 20)
        expected = np.array([piece.function(s, t) for t in steps], dtype=np.float64)
        got = [learner(s, t) for t in steps]
        if any(g is None for g in got):
            raise Failed(f"{s} returned None at step {got.index(None)}", "none")
        what = f"the learning rates of {s} at steps 0.. (element i: step i)"
        compare(np.array(got, dtype=np.float64), expected, what)
    return f"{len(schedules)} schedules, every step"


def get_batch(piece, learner, seed=0):
    """Windows of the ids and the same windows one on; with the same seed, gradflow's very batches."""
    ids = np.arange(100, 300)  # ids unlike their positions, so a window of positions shows
    for batch_size, block_size, seed in ((4, 8, 0), (3, 1, 1), (2, 199, 2)):
        call = f"get_batch(ids, batch_size={batch_size}, block_size={block_size}, rng=default_rng({seed}))"
        got = learner(ids, batch_size, block_size, np.random.default_rng(seed))
        expected = piece.function(ids, batch_size, block_size, np.random.default_rng(seed))
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise Failed(f"{call} returned {type(got).__name__}, expected a pair (x, y)", "count")
        x, y = (np.asarray(a) for a in got)
        for name, a in (("x", x), ("y", y)):
            if a.shape != (batch_size, block_size):
                compare(a, expected[0], f"{name} of {call}")
        for b in range(batch_size):
            start = int(x[b, 0]) - 100
            if not (0 <= start < len(ids) and np.array_equal(x[b], ids[start : start + block_size])):
                raise Failed(f"x[{b}] of {call} is not a window of consecutive ids: {x[b][:5]}...")
            if not np.array_equal(y[b], ids[start + 1 : start + block_size + 1]):
                raise Failed(f"y[{b}] of {call} is not x[{b}] moved on by one: y[{b}][:4] = {y[b][:4]}, x[{b}][:5] = "
                             f"{x[b][:5]}: y[t] must be the token that follows x[t]")  # fmt: skip
        if not np.array_equal(x, expected[0]):
            raise Failed(f"x of {call} holds windows of the ids, but not gradflow's for the same seed.\n  hint: draw "
                         "the starts in one call, rng.integers(0, len(ids) - block_size, size=batch_size), so that "
                         "a seed gives gradflow's batches (the capstone compares your training with gradflow's)",
                         "rng")  # fmt: skip
    return "3 calls"


# --- text --------------------------------------------------------------------------------------------

_TEXT = "the cat sat on the mat; the cats sat. aaaa aaa bb bbb " * 3


def merge_pair(piece, learner, seed=0):
    """Hand-made calls (runs of one id, a pair across a chunk's start), then a whole training run."""
    wrapped = compared_function(piece, learner, outputs=("the new ids", "kept"))
    calls = (
        ([97, 97, 97, 98], [1, 0, 0, 0], (97, 97)),  # "aaab": left to right, "aa" "a" "b"
        ([97, 97, 97, 97, 98, 97], [1, 0, 0, 0, 0, 0], (97, 97)),
        ([97, 98, 97, 98], [1, 0, 1, 0], (98, 97)),  # b|a crosses a chunk's start: not merged
        ([97, 98, 99], [1, 0, 0], (120, 121)),  # no occurrence
        ([97, 98, 99], [1, 0, 0], (120, 120)),  # no occurrence of a pair of one id twice
        ([97, 97, 97, 98, 97, 97, 97, 97, 97], [1, 0, 0, 0, 0, 0, 0, 0, 0], (97, 97)),  # runs of 3 and 5
        ([97, 97, 97, 97], [1, 0, 1, 0], (97, 97)),  # a run cut by a chunk's start
        ([97, 97, 98, 97, 97, 97, 98, 98, 97, 97, 97], [1] + [0] * 10, (97, 97)),  # 3 runs, 2nd and 3rd 5 apart
    )
    for ids, starts, pair in calls:
        given = np.array(ids)
        wrapped(given, np.array(starts, dtype=bool), pair, 256)
        if not np.array_equal(given, ids):
            raise Failed(f"merge_pair(ids={ids}, ..., pair={pair}) changed the ids it was given: return new ones "
                         "(the caller still reads them)", "inplace")  # fmt: skip
    ours = BPETokenizer.train(_TEXT, 280)
    with piece.replaced_by(wrapped):
        theirs = BPETokenizer.train(_TEXT, 280)
    if theirs.merges != ours.merges:
        raise Failed(f"training with your merge_pair learned other merges: {theirs.merges[:6]}..., gradflow's "
                     f"{ours.merges[:6]}...")  # fmt: skip
    return f"{len(calls)} calls and a training run of {len(ours.merges)} merges"


def merge_chunk(piece, learner, seed=0):
    """Encoding text with a trained tokenizer: every chunk, compared with gradflow's merges."""
    tok = BPETokenizer.train(_TEXT, 280)
    wrapped = compared_function(piece, learner)
    with piece.replaced_by(wrapped):
        ids = tok.encode("the cat sat on the mats; aaaaa bbbb! naïve ☕")
    if tok.decode(ids) != "the cat sat on the mats; aaaaa bbbb! naïve ☕":
        raise Failed("encoding and decoding with your merge_chunk does not give the text back")
    return "an encoding of 13 chunks"


# --- sampling ----------------------------------------------------------------------------------------


def filter_probs(piece, learner, seed=0):
    """Temperature, top-k, top-p and their mix, greedy, and ties."""
    wrapped = compared_function(piece, learner)
    logits = np.random.default_rng(2).standard_normal(10) * 2
    calls = ((1.0, None, None), (0.5, None, None), (1.0, 3, None), (1.0, None, 0.8), (0.7, 5, 0.6),
             (0.0, None, None), (1.0, None, 1.0), (1.0, 10, None), (2.0, 1, None), (1.0, 25, None))  # fmt: skip
    for temperature, top_k, top_p in calls:
        wrapped(logits, temperature, top_k, top_p)
    wrapped(np.array([1.0, 3.0, 3.0, 0.0]), 1.0, 2, None)  # a tie at the k-th place: both kept
    return f"{len(calls) + 1} calls"


def kv_cache_append(piece, learner, seed=0):
    """Appending step by step (past the first buffer's 16 places), with and without gradients, and a whole
    attention layer decoding token by token with the cache against the same layer over the whole sequence."""
    rng = np.random.default_rng(3)
    for grad in (False, True):
        mine, ref = KVCache(), KVCache()
        steps = [rng.standard_normal((2, 2, n, 3)) for n in (3, 1, 1, 14, 1, 2)]
        with enable_grad() if grad else no_grad():
            kept = []
            for i, (k, v) in enumerate(zip(steps, [s[..., ::-1] * 2 for s in steps])):
                k_in, v_in = Tensor(k, requires_grad=grad), Tensor(v.copy(), requires_grad=grad)
                kept.append(k_in)
                got = learner(mine, k_in, v_in)
                want = piece.function(ref, Tensor(k), Tensor(v.copy()))
                label = f"append number {i + 1} ({'with' if grad else 'without'} gradients)"
                if not isinstance(got, (tuple, list)) or len(got) != 2:
                    raise Failed(f"{label} returned {type(got).__name__}, expected the pair (k, v) so far", "count")
                for name, g, w in zip(("k", "v"), got, want):
                    compare(g.data if isinstance(g, Tensor) else g, w.data, f"the {name} returned by {label}")
                if mine.length != ref.length:
                    raise Failed(f"after {label} the cache's length is {mine.length}, expected {ref.length}: "
                                 "keep self.k and self.v, all the keys and values so far")  # fmt: skip
            if grad:
                total = got[0].sum() if isinstance(got[0], Tensor) else None
                if total is None or not total.requires_grad:
                    raise Failed("with gradients wanted, the keys you return carry none: join them with cat, an op "
                                 "the engine records, so the gradient reaches every step's keys", "grad")  # fmt: skip
                total.backward()
                for i, k_in in enumerate(kept):
                    compare(k_in.grad, np.ones(k_in.shape), f"the gradient reaching the keys of append number {i + 1}")
    layer, x = _attention_layer()
    with no_grad():
        whole = layer(x, causal=True).data
        cache = KVCache()
        with piece.replaced_by(learner):
            steps = [layer(x[:, t : t + 1], causal=True, cache=cache) for t in range(x.shape[1])]
        compare(cat(steps, axis=1).data, whole, "the attention outputs decoded token by token with your cache")
    return "12 appends and a decoding of 5 tokens"


def _attention_layer():
    manual_seed(0)
    layer = GeneralAttention(4, 2, dtype=np.float64)
    return layer, Tensor(np.random.default_rng(4).standard_normal((2, 5, 4)))
