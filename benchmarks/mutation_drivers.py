"""The oracle's drivers for the pieces that are not run inside backward: each calls the reference and
the variant with the same random, valid arguments and compares what they return and what they
leave behind (mutation_compare.same); `topological_order` is judged by its rule instead.

A driver is driver(piece, fn, rng) and raises Different at the first disagreement. Arguments are
drawn inside the piece's domain (the one its exercise states): the argument checks gradflow's
piece makes are not part of what a learner writes.
"""

import copy
import math
import string

import numpy as np
from mutation_compare import Different, same

from gradflow.engine.autograd import enable_grad, no_grad
from gradflow.engine.functions import cat
from gradflow.engine.tensor import Tensor
from gradflow.nn import functional as F
from gradflow.nn.kv_cache import KVCache
from gradflow.nn.module import Parameter
from gradflow.optim.schedule import WarmupCosine
from gradflow.text.bpe import BPETokenizer

SEEDS_PER_DRIVER = 6  # independent draws of a whole driver's calls


def both(reference, variant, state, calls):
    """Make each call, call(fn, state) -> what it observes, with the reference on one copy of `state` and
    the variant on another, and compare. A call the reference cannot make ends the sequence."""
    ours, theirs = copy.deepcopy(state), copy.deepcopy(state)
    for i, call in enumerate(calls):
        try:
            want = call(reference, ours)
        except Exception:
            return
        try:
            got = call(variant, theirs)
        except Different:
            raise
        except Exception as error:
            raise Different(f"call {i + 1}: raised {type(error).__name__}: {error}") from None
        same(got, want, f"call {i + 1}")


def adam_update(piece, fn, rng):
    """Steps of Adam on one parameter: p, m, v (and v_max) compared after each, eps large enough to count."""
    for _ in range(SEEDS_PER_DRIVER):
        shape = tuple(rng.integers(1, 5, 2))
        amsgrad = bool(rng.random() < 0.5)
        state = dict(p=rng.standard_normal(shape), m=np.zeros(shape), v=np.zeros(shape))
        state["v_max"] = np.zeros(shape) if amsgrad else None
        lr, beta1, beta2 = rng.uniform(1e-3, 0.1), rng.uniform(0.5, 0.95), rng.uniform(0.9, 0.999)
        eps = 10 ** rng.uniform(-4, -1)
        # gradients of several scales, shrinking at the end so that v falls below v_max
        grads = [rng.standard_normal(shape) * s for s in (1.0, 10 ** rng.uniform(-3, 1), 1e-2, 1e-3)]

        def step(t, g):
            def call(f, s):
                f(s["p"], g.copy(), s["m"], s["v"], s["v_max"], t, lr, beta1, beta2, eps)
                return [s["p"], s["m"], s["v"], s["v_max"]]

            return call

        both(piece.function, fn, state, [step(t, g) for t, g in enumerate(grads, 1)])


def clip_grad_norm(piece, fn, rng):
    """Parameters with random gradients (one without), max_norm below and above their norm, four norms."""
    for _ in range(SEEDS_PER_DRIVER):
        norm_type = float(rng.choice([2.0, 1.0, math.inf, 3.0]))
        shapes = [tuple(rng.integers(1, 4, rng.integers(1, 3))) for _ in range(rng.integers(1, 4))]
        params = [Parameter(np.zeros(s)) for s in shapes]
        for p in params:
            p.grad = rng.standard_normal(p.shape)
        params.append(Parameter(np.zeros(2)))  # no gradient
        grads = [p.grad.data for p in params if p.grad is not None]
        norm = (
            max(np.abs(g).max() for g in grads)
            if norm_type == math.inf
            else sum((np.abs(g) ** norm_type).sum() for g in grads) ** (1 / norm_type)
        )
        max_norm = float(norm * rng.choice([0.3, 0.9, 1.1, 3.0]))
        single = bool(rng.random() < 0.25)  # a single tensor instead of a list

        def call(f, ps):
            total = f(ps[0] if single else ps, max_norm, norm_type)
            return [float(total), [None if p.grad is None else p.grad.data for p in ps]]

        both(piece.function, fn, params, [call])


def warmup_cosine(piece, fn, rng):
    """Random schedules (no warmup, warmup == decay, min_lr 0 or not) at every step and past the end."""
    for _ in range(SEEDS_PER_DRIVER):
        warmup = int(rng.integers(0, 8))
        decay = warmup + int(rng.choice([0, rng.integers(1, 30)]))
        max_lr = float(rng.uniform(0.01, 2.0))
        schedule = WarmupCosine(max_lr, warmup, decay, float(rng.choice([0.0, rng.uniform(0, max_lr)])))
        calls = [lambda f, s, t=t: f(s, t) for t in range(decay + 5)]
        both(piece.function, fn, schedule, calls)


def get_batch(piece, fn, rng):
    """Random ids, sizes and seeds; two calls on one generator: the batches and the draws they take."""
    for _ in range(SEEDS_PER_DRIVER):
        ids = rng.integers(0, 1000, int(rng.integers(2, 300)))
        batch_size, block_size = int(rng.integers(1, 7)), int(rng.integers(1, ids.size))
        state = dict(ids=ids, rng=np.random.default_rng(int(rng.integers(2**31))))

        def call(f, s):
            got = f(s["ids"], batch_size, block_size, s["rng"])
            return [got, s["ids"], s["rng"].bit_generator.state["state"]["state"]]

        both(piece.function, fn, state, [call, call])


def merge_pair(piece, fn, rng):
    """Runs of few ids (overlapping pairs), chunk starts, a pair that may repeat one id."""
    for _ in range(4 * SEEDS_PER_DRIVER):
        letters = int(rng.integers(1, 4))
        ids = rng.integers(97, 97 + letters, int(rng.integers(1, 30)))
        starts = rng.random(ids.size) < 0.2
        starts[0] = True
        pair = tuple(int(i) for i in rng.integers(97, 97 + letters, 2))
        state = dict(ids=ids, starts=starts)
        both(piece.function, fn, state, [lambda f, s: [f(s["ids"], s["starts"], pair, 256), s["ids"], s["starts"]]])


def merge_chunk(piece, fn, rng):
    """A tokenizer trained on random text of few letters, then chunks of those letters merged."""
    for _ in range(SEEDS_PER_DRIVER):
        letters = list(string.ascii_lowercase[: rng.integers(2, 5)])
        text = "".join(rng.choice(letters + [" "], 400))
        tokenizer = BPETokenizer.train(text, 256 + int(rng.integers(5, 40)))
        alphabet = [ord(c) for c in letters]
        chunks = [[int(i) for i in rng.choice(alphabet, rng.integers(0, 25))] for _ in range(8)]
        state = dict(tokenizer=tokenizer, chunks=chunks)
        calls = [lambda f, s, i=i: [f(s["tokenizer"], s["chunks"][i]), s["chunks"][i]] for i in range(len(chunks))]
        both(piece.function, fn, state, calls)


def filter_probs(piece, fn, rng):
    """Random logits (with ties), temperature (0 too), top-k and top-p, alone and mixed."""
    for _ in range(4 * SEEDS_PER_DRIVER):
        size = int(rng.integers(1, 12))
        logits = rng.standard_normal(size) * rng.uniform(0.5, 3)
        logits = np.round(logits) if rng.random() < 0.3 else logits  # ties
        temperature = 0.0 if rng.random() < 0.15 else float(rng.uniform(0.2, 2.0))
        top_k = None if rng.random() < 0.4 else int(rng.integers(1, size + 3))
        top_p = None if rng.random() < 0.4 else float(rng.choice([1.0, rng.uniform(0.05, 1.0)]))
        call = lambda f, s: [f(s, temperature, top_k, top_p), s]  # noqa: E731
        both(piece.function, fn, logits, [call])


def kv_cache_append(piece, fn, rng):
    """Appends of random lengths past the first buffer, without grad, with grad but inputs without, and
    with: what each append returns, the cache's length, and with gradients the gradient of each input."""
    for mode in ("no_grad", "inputs without grad", "grad") * 2:
        shape = tuple(rng.integers(1, 3, 2))
        hs = int(rng.integers(1, 4))
        steps = [
            (rng.standard_normal((*shape, n, hs)), rng.standard_normal((*shape, n, hs)))
            for n in rng.integers(1, 8, rng.integers(2, 8))
        ]
        weights = rng.standard_normal((2, *shape, sum(k.shape[-2] for k, _ in steps), hs))
        both(
            piece.function,
            fn,
            dict(cache=KVCache(), inputs=[]),
            [_append(mode, k, v) for k, v in steps] + [_gradients(mode, weights)],
        )


def _append(mode, k, v):
    def call(f, s):
        with no_grad() if mode == "no_grad" else enable_grad():
            ins = [Tensor(a.copy(), requires_grad=mode == "grad") for a in (k, v)]
            s["inputs"].append(ins)
            got = f(s["cache"], *ins)
            s["last"] = got
            return [[g.data for g in got], s["cache"].length]

    return call


def _gradients(mode, weights):
    """After the last append: backward from sum(w * (k, v)), each input's gradient."""

    def call(f, s):
        if mode != "grad":
            return None
        with enable_grad():
            k, v = s["last"]
            (cat([k, v], axis=0) * Tensor(weights.reshape(-1, *weights.shape[2:]))).sum().backward()
        return [[None if t.grad is None else t.grad.data for t in pair] for pair in s["inputs"]]

    return call


def topological_order(piece, fn, rng):
    """Random graphs with shared nodes (diamonds), inputs without a node, and a long chain: the rule holds."""
    for _ in range(SEEDS_PER_DRIVER):
        root = _random_graph(rng).grad_fn
        try:
            got = fn(root)
            got = list(got)
        except Exception as error:
            raise Different(f"raised {type(error).__name__}: {error}") from None
        _obeys_the_rule(got, root)


def _random_graph(rng):
    """A random computation of a few tensors: ops pick their operands among all made so far."""
    leaves = [Tensor(rng.standard_normal(3), requires_grad=bool(rng.random() < 0.8)) for _ in range(rng.integers(1, 4))]
    leaves[0].requires_grad = True
    made = list(leaves)
    for _ in range(rng.integers(1, 40)):
        a, b = (made[i] for i in rng.integers(0, len(made), 2))
        ops = (
            a.__add__,
            a.__mul__,
            lambda b: a.tanh(),
            lambda b: a - b.exp(),
            lambda b: (F.linear(a[None], b[None]) * a)[0],
        )
        made.append(ops[rng.integers(len(ops))](b))
        if rng.random() < 0.1:
            for _ in range(rng.integers(50, 400)):  # a chain
                made[-1] = made[-1].tanh()
    return sum(made[1:], made[0]).sum()


def _obeys_the_rule(order, root):
    """Each reachable node once, the root first, every node before the nodes that made its inputs."""
    reachable, stack = {root}, [root]
    while stack:
        for made_by in stack.pop().input_nodes:
            if made_by is not None and made_by not in reachable:
                reachable.add(made_by)
                stack.append(made_by)
    place = {}
    for i, node in enumerate(order):
        if node in place:
            raise Different(f"a {type(node).__name__} node is in the order twice")
        place[node] = i
    if set(place) != reachable:
        raise Different(f"{len(set(place) - reachable)} nodes too many, {len(reachable - set(place))} missing")
    if order[0] is not root:
        raise Different("the root is not first")
    for node in order:
        for made_by in node.input_nodes:
            if made_by is not None and place[made_by] < place[node]:
                raise Different(f"a {type(made_by).__name__} node comes before the {type(node).__name__} using it")


DRIVERS = {
    f.__name__: f
    for f in (adam_update, clip_grad_norm, warmup_cosine, get_batch, merge_pair, merge_chunk, filter_probs)
    + (kv_cache_append, topological_order)
}
