"""The oracle's drivers for the pieces that are not run inside backward: each calls the reference and
the variant with the same random, valid arguments and compares what they return and what they
leave behind (mutation_compare.same); `topological_order` is judged by its rule instead.

A driver is driver(piece, fn, rng) and raises Different at the first disagreement; most are made from
a draw(rng) -> (state, calls) of arguments (`driven`). Arguments are
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


def adam_update(rng):
    """Steps of Adam on one parameter: p, m, v (and v_max) compared after each, eps large enough to count."""
    shape = tuple(rng.integers(1, 5, 2))
    state = dict(p=rng.standard_normal(shape), m=np.zeros(shape), v=np.zeros(shape))
    state["v_max"] = np.zeros(shape) if rng.random() < 0.5 else None  # AMSGrad
    lr, beta1, beta2 = rng.uniform(1e-3, 0.1), rng.uniform(0.5, 0.95), rng.uniform(0.9, 0.999)
    eps = 10 ** rng.uniform(-4, -1)
    # gradients of several scales, shrinking at the end so that v falls below v_max
    grads = [rng.standard_normal(shape) * s for s in (1.0, 10 ** rng.uniform(-3, 1), 1e-2, 1e-3)]

    def step(t, g):
        def call(f, s):
            f(s["p"], g.copy(), s["m"], s["v"], s["v_max"], t, lr, beta1, beta2, eps)
            return [s["p"], s["m"], s["v"], s["v_max"]]

        return call

    return state, [step(t, g) for t, g in enumerate(grads, 1)]


def clip_grad_norm(rng):
    """Parameters with random gradients of any size (one without), max_norm below and above their norm,
    four norms, a list or a single tensor."""
    norm_type = float(rng.choice([2.0, 1.0, math.inf, 3.0]))
    shapes = [tuple(rng.integers(1, 4, rng.integers(1, 3))) for _ in range(rng.integers(1, 4))]
    params = [Parameter(np.zeros(s)) for s in shapes]
    for p in params:
        p.grad = rng.standard_normal(p.shape) * 10 ** rng.uniform(-2, 1)
    params.append(Parameter(np.zeros(2)))  # no gradient
    grads = [p.grad.data.ravel() for p in params if p.grad is not None]
    norm = np.linalg.norm(np.concatenate(grads), norm_type)
    max_norm = float(norm * rng.choice([0.3, 0.9, 1.1, 3.0]))
    single = bool(rng.random() < 0.25)

    def call(f, ps):
        total = f(ps[0] if single else ps, max_norm, norm_type)
        return [float(total), [None if p.grad is None else p.grad.data for p in ps]]

    return params, [call]


def warmup_cosine(rng):
    """A random schedule (at times no warmup, warmup == decay, min_lr 0) at every step and past the end."""
    warmup = int(rng.choice([0, rng.integers(1, 8)], p=[0.2, 0.8]))
    decay = warmup + int(rng.choice([0, rng.integers(1, 30)], p=[0.15, 0.85]))
    max_lr = float(rng.uniform(0.01, 2.0))
    min_lr = float(rng.choice([0.0, rng.uniform(0, max_lr)], p=[0.3, 0.7]))
    return WarmupCosine(max_lr, warmup, decay, min_lr), [lambda f, s, t=t: f(s, t) for t in range(decay + 5)]


def get_batch(rng):
    """Random ids, sizes and seed; two calls on one generator: the batches and the draws they take."""
    ids = rng.integers(0, 1000, int(rng.integers(2, 300)))
    batch_size, block_size = int(rng.integers(1, 7)), int(rng.integers(1, ids.size))

    def call(f, s):
        got = f(s["ids"], batch_size, block_size, s["rng"])
        return [got, s["ids"], s["rng"].bit_generator.state["state"]["state"]]

    return dict(ids=ids, rng=np.random.default_rng(int(rng.integers(2**31)))), [call, call]


def merge_pair(rng):
    """Runs of few ids (overlapping pairs), chunk starts, a pair that may repeat one id."""
    letters = int(rng.integers(1, 4))
    ids = rng.integers(97, 97 + letters, int(rng.integers(1, 30)))
    starts = rng.random(ids.size) < 0.2
    starts[0] = True
    pair = tuple(int(i) for i in rng.integers(97, 97 + letters + 1, 2))  # one id past them: no occurrence

    def call(f, s):
        return [f(s["ids"], s["starts"], pair, 256), s["ids"], s["starts"]]

    return dict(ids=ids, starts=starts), [call]


def merge_chunk(rng):
    """A tokenizer trained on random text of few letters, then chunks of those letters merged."""
    letters = list(string.ascii_lowercase[: rng.integers(2, 5)])
    tokenizer = BPETokenizer.train("".join(rng.choice([*letters, " "], 400)), 256 + int(rng.integers(5, 40)))
    chunks = [[int(i) for i in rng.choice([ord(c) for c in letters], rng.integers(0, 25))] for _ in range(8)]
    calls = [lambda f, s, i=i: [f(s["tokenizer"], s["chunks"][i]), s["chunks"][i]] for i in range(len(chunks))]
    return dict(tokenizer=tokenizer, chunks=chunks), calls


def filter_probs(rng):
    """Random logits (with ties at times), temperature (0 too), top-k and top-p, alone and mixed."""
    size = int(rng.integers(1, 12))
    logits = rng.standard_normal(size) * rng.uniform(0.5, 3)
    logits = np.round(logits) if rng.random() < 0.3 else logits
    temperature = 0.0 if rng.random() < 0.15 else float(rng.uniform(0.2, 2.0))
    top_k = None if rng.random() < 0.4 else int(rng.integers(1, size + 3))
    top_p = None if rng.random() < 0.4 else float(rng.choice([1.0, rng.uniform(0.05, 1.0)]))

    def call(f, s):
        return [f(s, temperature, top_k, top_p), s]

    return logits, [call]


def kv_cache_append(rng):
    """Appends of random lengths past the first buffer, without grad, with grad but inputs without, and
    with: what each append returns, the cache's length, and with gradients the gradient of each input."""
    mode = rng.choice(["no_grad", "inputs without grad", "grad"])
    shape = (*rng.integers(1, 3, 2), int(rng.integers(1, 4)))  # (B, heads, hs) around the time axis
    lengths = rng.integers(1, 8, rng.integers(2, 8))
    steps = [[rng.standard_normal((*shape[:2], n, shape[2])) for _ in "kv"] for n in lengths]
    weights = rng.standard_normal((2 * shape[0], shape[1], int(lengths.sum()), shape[2]))
    return dict(cache=KVCache(), inputs=[]), [*(_append(mode, k, v) for k, v in steps), _gradients(mode, weights)]


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
            (cat([k, v], axis=0) * Tensor(weights)).sum().backward()
        return [[None if t.grad is None else t.grad.data for t in pair] for pair in s["inputs"]]

    return call


def topological_order(piece, fn, rng):
    """Random graphs with shared nodes (diamonds), leaves without a gradient, and chains: the rule holds."""
    for _ in range(DRAWS):
        root = _random_graph(rng).grad_fn
        try:
            order = list(fn(root))
            _obeys_the_rule(order, root)
        except Different:
            raise
        except Exception as error:  # the variant raised, or returned what is not a list of nodes
            raise Different(f"raised {type(error).__name__}: {error}") from None


_OPS = (
    lambda a, b: a + b,
    lambda a, b: a * b,
    lambda a, b: a.tanh(),
    lambda a, b: a - b.exp(),
    lambda a, b: (F.linear(a[None], b[None]) * a)[0],  # a node with an input of None (no bias)
)


def _random_graph(rng):
    """A random computation of a few tensors: ops pick their operands among all made so far."""
    leaves = [Tensor(rng.standard_normal(3), requires_grad=bool(rng.random() < 0.8)) for _ in range(rng.integers(1, 4))]
    leaves[0].requires_grad = True
    made = list(leaves)
    for _ in range(rng.integers(1, 40)):
        a, b = (made[i] for i in rng.integers(0, len(made), 2))
        made.append(_OPS[rng.integers(len(_OPS))](a, b))
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


def driven(draw):
    """A driver from a draw(rng) -> (state, calls): DRAWS independent draws, each made with the reference and
    the variant."""

    def driver(piece, fn, rng):
        for _ in range(DRAWS):
            state, calls = draw(rng)
            both(piece.function, fn, state, calls)

    return driver


DRAWS = 20  # independent draws of a driver's arguments
DRAWN = (adam_update, clip_grad_norm, warmup_cosine, get_batch, merge_pair, merge_chunk, filter_probs, kv_cache_append)
DRIVERS = {draw.__name__: driven(draw) for draw in DRAWN} | {"topological_order": topological_order}
