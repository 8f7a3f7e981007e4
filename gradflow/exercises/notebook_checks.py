"""The tutorials' your-turn exercises: for each check id, how to compute the right answer from the
problem's data that the cell passes, the hints in levels, and the solution.

    EXERCISES["01.central_difference"].expected(f=f, x0=x0)  ->  (f(x0 + h) - f(x0 - h)) / 2h

A notebook holds none of this: its cell holds the blank and `check(id, answer, **data)`
(gradflow/exercises/notebook.py), so no answer, hint or expected value is there to read or paste
before the learner asks. Hints go from the idea, to the shape of the answer, to the formula; a
solution has one line per blank the check reads, in the order of the blanks, without indentation.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import gradflow as gf
from gradflow.exercises.diagnose import summed_to
from gradflow.inference import filter_probs
from gradflow.nn import functional as F


@dataclass(frozen=True)
class Exercise:
    expected: Callable  # (**data) -> the value the answer must equal
    hints: tuple  # the idea, the shape of the answer, the formula
    solution: tuple = ()  # the code of each blank the check reads; () when an earlier check's blank decides it
    tol: float = 1e-6  # relative and absolute, as np.allclose


def _softmax(z, T=1.0):
    """e^{(z_i - max z) / T} / Σ_j e^{(z_j - max z) / T}: the largest logit taken away first, so none overflows."""
    z = np.asarray(getattr(z, "data", z), dtype=np.float64)
    e = np.exp((z - z.max(axis=-1, keepdims=True)) / T)
    return e / e.sum(axis=-1, keepdims=True)


def _ops_in(root):
    """How many nodes of a scalar graph (notebook 00's Value) hold an op: every node but the leaves."""
    seen, stack = {}, [root]
    while stack:
        v = stack.pop()
        if id(v) not in seen:
            seen[id(v)] = v
            stack.extend(v.parents)
    return sum(1 for v in seen.values() if v.op)


def _grads(loss, *values):
    """d loss(*values) / d value for each value: fresh leaves that want their gradient, then backward (a
    notebook tensor that `loss` reads must come detached, or the learner's own .grad would change)."""
    leaves = [gf.tensor(np.asarray(getattr(v, "data", v), dtype=np.float64), requires_grad=True) for v in values]
    loss(*leaves).backward()
    return [leaf.grad for leaf in leaves]


def _sgd_step(loss_fn, x, w, b, lr):
    """θ - lr dL/dθ for θ = w, b."""
    gw, gb = _grads(lambda w, b: loss_fn(x.detach(), w, b), w, b)  # detached: the notebook's x keeps its .grad
    return w - lr * float(gw), b - lr * float(gb)


def _adam_first_step(g, lr, betas, eps):
    one = gf.tensor(0.0, requires_grad=True)
    one.grad = np.array(g)
    gf.optim.Adam([one], lr=lr, betas=betas, eps=eps).step()
    return one.item()


def _top_p(logits, vocab, p):
    return {vocab[t] for t in np.flatnonzero(filter_probs(logits, top_p=p))}


def _value_grad_of_sum(Q, K, V):
    """dV of L = Σ attention(Q, K, V) (causal): Aᵀ G with G = dL/dO all ones."""
    q, k, v = (gf.tensor(a, requires_grad=True) for a in (Q, K, V))
    F.scaled_dot_product_attention(q, k, v, causal=True).sum().backward()
    return v.grad


def _cross_weights_shape(attention, batch, queries, keys):
    rng = np.random.default_rng(0)
    d = attention.q_proj.weight.shape[-1]
    with gf.no_grad():
        x, context = rng.standard_normal((batch, queries, d)), rng.standard_normal((batch, keys, d))
        attention(gf.tensor(x), context=gf.tensor(context), need_weights=True)
    return tuple(attention.weights.shape)


def _position_table_grad(max_len, d, batch, T):
    wpe = gf.nn.LearnedPositionalEncoding(max_len=max_len, d_model=d)
    wpe(gf.zeros(batch, T, d)).backward(np.ones((batch, T, d)))
    return wpe.weight.grad


def _window_mask(T, window):
    """Row i sees column j when i - window < j ≤ i."""
    i, j = np.indices((T, T))
    return (j <= i) & (j > i - window)


def _heads_of(H, d_head, batch, token, head):
    """The features of one head: H's last axis cut into blocks of d_head."""
    H = np.asarray(getattr(H, "data", H))
    return H[batch, token, head * d_head : (head + 1) * d_head]


def _bpe_merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if tuple(ids[i : i + 2]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _cosine_halfway(max_lr, min_lr):
    """min + (max - min) (1 + cos(π/2)) / 2."""
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi / 2)) / 2


def _absmax(w, levels=7):
    """One scale s = max|w| / levels; each weight read back as clamp(round(w / s), -levels, levels) s."""
    s = np.abs(w).max() / levels
    return np.clip(np.round(w / s), -levels, levels) * s


def _kv_cache_bytes(layers, kv_heads, head_size, positions, itemsize, batch=1):
    """A key and a value per layer, per sequence, per kv head, per position, per feature."""
    return 2 * layers * batch * kv_heads * head_size * positions * itemsize


def _causal_reach(block, x, position):
    """The positions whose output moves when the input at `position` does. The input moves by a random
    vector: adding one number to every feature would vanish in the LayerNorm, leaving rounding alone to
    reach the later positions."""
    changed = x.data.copy()
    changed[:, position] += np.random.default_rng(0).standard_normal(changed.shape[-1])
    with gf.no_grad():
        moved = np.abs(block(gf.tensor(changed)).data - block(x).data).max(axis=(0, 2)) > 1e-9
    return set(np.flatnonzero(moved).tolist())


def _untied_extra(config, count):
    """count: the model's parameter count of a config (the notebook passes GPT.count_parameters, since the
    library below gradflow/cli does not import the models)."""
    untied = type(config)(**{**vars(config), "tie_weights": False})
    return count(untied) - count(config)


def _last_input(model, ids, position):
    with gf.no_grad():
        return model.wte(ids[:, position : position + 1]) + model.wpe(np.array([position]))


EXERCISES = {
    # 00: a scalar engine
    "00.demo": Exercise(  # notebook 00's first cell shows check on it: a right answer, then a blank
        lambda a, b: a + b,
        ("add the two numbers given as a and b", "the answer is a single number", "the sum a + b of the two data"),
    ),
    "00.partial_x": Exercise(
        lambda x, y: 2 * x * y,
        (
            "hold y fixed: f is y times a function of x alone",
            "f = x*y*x = x^2 y; differentiate x^2 and keep the factor y",
            "df/dx = 2 x y, at x = 3 and y = 4",
        ),
        ("df_dx = 2 * 3 * 4",),
    ),
    "00.minus": Exercise(
        lambda x, y: (x - y, 1.0, -1.0),
        (
            "subtracting y is adding a multiple of y: which multiple?",
            "x - y = x + c y for one constant c; a Value times a number is a product node, so the engine knows "
            "its slope",
            "c = -1: then d/dx = 1 and d/dy = -1 come out of the sum and the product",
        ),
        ("return x + (-1) * y",),
    ),
    "00.sigmoid": Exercise(
        lambda x: (1 / (1 + math.exp(-x)), math.exp(-x) / (1 + math.exp(-x)) ** 2),
        (
            "Value has no sigmoid, but it has tanh: an identity turns one into the other with products and sums",
            "three steps: halve x (a product with 0.5), take its tanh, then shift by 1 and scale by 0.5",
            "σ(x) = (1 + tanh(x / 2)) / 2, written with Value's methods; its slope σ(1 - σ) comes for free",
        ),
        ("return 0.5 * (1 + (x * 0.5).tanh())",),
    ),
    "00.parents_first": Exercise(
        lambda: True,
        (
            "a node may join the order only once everything it was made from is in it",
            "the loop over v.parents should do to each parent what the whole function does to the root",
            "recurse: the parent's own visit, before v is appended",
        ),
        ("visit(p)",),
    ),
    "00.product_rule": Exercise(
        lambda a: (1 + a) * math.exp(a),
        (
            "y is a product of two functions of a: the product rule gives one term per factor",
            "d(a e^a)/da = (da/da) e^a + a (d e^a / da)",
            "(1 + a) e^a, at a = 1",
        ),
        ("predicted = 2 * math.e",),
    ),
    "00.neuron_ops": Exercise(
        lambda root: _ops_in(root),
        (
            "count the nodes that hold an op, not the leaves: what does one neuron compute?",
            "o = tanh(x1 w1 + x2 w2 + b): list its products, its sums and its nonlinearity",
            "two products, two sums and one tanh",
        ),
        ("n_ops = 5",),
    ),
    "00.gradient_step": Exercise(
        lambda losses: losses[1],  # the training run above: the loss after its first step
        (
            "a step moves each parameter a little against its gradient",
            "change the number the Value holds (its data), not the name p: rebinding p changes nothing in net",
            "p.data ← p.data - lr · p.grad",
        ),
        ("p.data -= lr * p.grad",),
    ),
    "00.hidden_layer": Exercise(
        lambda X, W1, b1: np.tanh(X.data @ W1.data.T + b1.data),
        (
            "one matrix product does all four neurons for all four points at once",
            "X is (4, 2) and W1_ is (4, 2), one row per neuron: which one needs its transpose so that the result "
            "is (4, 4)?",
            "H = tanh(X W1ᵀ + b1), the bias broadcast along the rows",
        ),
        ("H_mine = (X @ W1_.T + b1_).tanh()",),
    ),
    # 01: autograd from scratch
    "01.central_difference": Exercise(
        lambda f, x0, h=1e-4: (f(x0 + h) - f(x0 - h)) / (2 * h),
        (
            "step to both sides of x0, not one: the errors of the two sides cancel to first order",
            "two evaluations of f, one at x0 + h and one at x0 - h, and the distance between the points",
            "(f(x0 + h) - f(x0 - h)) / 2h with h = 1e-4",
        ),
        ("central_1e4 = (f(x0 + 1e-4) - f(x0 - 1e-4)) / (2 * 1e-4)",),
    ),
    "01.chain_rule": Exercise(
        lambda x0: math.exp(math.sin(x0)) * math.cos(x0),
        (
            "a function of a function: the chain rule multiplies the two slopes",
            "the outer function exp, differentiated and evaluated at the inner value u = sin x0; the inner one, at x0",
            "exp(sin x0) · cos x0",
        ),
        ("chain_answer = math.exp(math.sin(x0)) * math.cos(x0)",),
    ),
    "01.other_target": Exercise(
        lambda w, x, b, t: float(_grads(lambda w: ((w * x + b).tanh() - t) ** 2, w)[0]),
        (
            "the same chain as above: only the target changed, so only one factor changes",
            "three factors: dL/dy of (y - t)^2, dy/du of tanh, du/dw of w x + b",
            "2 (y - t) (1 - y²) x with t = -0.4",
        ),
        ("w_bar_other_target = 2 * (y_ - (-0.4)) * (1 - y_**2) * x_",),
    ),
    "01.leaf_target": Exercise(
        lambda w, x, b, t: float(_grads(lambda t: (gf.tensor(w * x + b).tanh() - t) ** 2, t)[0]),
        (
            "backward fills .grad only on the leaves that asked for it",
            "the target must be a leaf tensor, made with the flag that asks autograd to keep its gradient",
            "a tensor holding 0.2 with requires_grad set",
        ),
        ("target = gf.tensor(0.2, requires_grad=True)",),
    ),
    "01.count_mul": Exercise(
        lambda loss: sum(node.name == "mul" for node in gf.autograd.topological_order(loss.grad_fn)),
        (
            "count the products in L = (tanh(w x + b) - t)²",
            "one product makes the neuron's input; the square is computed as a product too",
            "w · x, and e · e",
        ),
        ("n_mul = 2",),
    ),
    "01.numerical_grad": Exercise(
        lambda loss_fn, x, w, b: float(_grads(lambda b: loss_fn(x.detach(), w.detach(), b), b)[0]),
        (
            "gradflow already estimates gradients by finite differences: gf.numerical_grad",
            "it returns one gradient per input, in the order you pass the inputs",
            "pass loss_fn and x, w, b; dL/db is the third",
        ),
        ("numeric_b = gf.numerical_grad(loss_fn, x, w, b)[2]",),
        tol=1e-8,
    ),
    "01.sgd_step": Exercise(
        _sgd_step,
        (
            "a step moves each parameter a little against its gradient, outside the graph",
            "change each tensor's array in place (its .data), w1 then b1, each from its own .grad",
            "θ ← θ - lr · dL/dθ, for θ = w1 and θ = b1",
        ),
        ("w1.data -= lr * w1.grad", "b1.data -= lr * b1.grad"),
    ),
    "01.matmul_grad": Exercise(
        lambda X, W: _grads(lambda W: (gf.tensor(X.data) @ W).sum(), W)[0],
        (
            "L sums every element of A = X W: how much does W[i, j] add to that sum?",
            "W[i, j] meets every X[n, i] (n = 0..3) in column j of A: the answer is (3, 2), one sum per row of W",
            "dL/dW = Xᵀ G with G = dL/dA, here a (4, 2) array of ones",
        ),
        ("my_dW = X.data.T @ np.ones((4, 2))",),
    ),
    "01.bias_grad": Exercise(
        lambda A_bar, shape: summed_to(np.asarray(A_bar), shape),
        (
            "the bias was copied along one axis: its gradient collects every copy's",
            "a (4, 1) bias was stretched to (4, 2): sum A_bar over that stretched axis and keep it as size 1",
            "dL/dc[i] = Σ_j A_bar[i, j], shape (4, 1)",
        ),
        ("row_bias_grad = A_bar.sum(axis=1, keepdims=True)",),
    ),
    "01.square_backward": Exercise(
        lambda: True,  # the cell's gradcheck: finite differences agree with the backward written
        (
            "the docstring says y = x²: the chain rule multiplies the incoming gradient by dy/dx",
            "return an array of x's shape, elementwise: the incoming grad times the local slope",
            "dL/dx = dL/dy · 2x",
        ),
        ("return grad * 2 * x",),
    ),
    # 02: the worked walk-through
    "02.embedding_lookup": Exercise(
        lambda model, sentence: model.E.data[model.encode(sentence)],
        (
            "an embedding is a lookup: each word's id picks one row of E",
            "encode the reversed sentence to its ids, then index E's array with the whole list of ids at once",
            'X[i] = E[id(word i)], for the words of "sat cat the"',
        ),
        ('X_reversed = model.E.data[model.encode("sat cat the")]',),
    ),
    "02.one_query": Exercise(
        lambda Q, K, d_k, row: _softmax(Q.data[row] @ K.data.T / math.sqrt(d_k)),
        (
            "one query row against every key: three dot products, scaled, then a softmax",
            "q_cat is row 1 of Q, the keys are the rows of K (from out), d_k is model.config.d_k",
            "s_j = q_cat · k_j / √d_k; A_j = e^{s_j} / Σ_i e^{s_i}",
        ),
        (
            'scores_cat = out["Q"].data[1] @ out["K"].data.T / math.sqrt(model.config.d_k)',
            "A_cat = np.exp(scores_cat) / np.exp(scores_cat).sum()",
        ),
    ),
    "02.layer_norm": Exercise(
        lambda y: (y.data - y.data.mean(-1, keepdims=True)) / y.data.std(-1, keepdims=True),
        (
            "LayerNorm centres a row, then scales it to unit spread",
            "subtract the row's mean, divide by its standard deviation; numpy's std divides by d, as LayerNorm does",
            "(y - μ) / σ with μ = mean(y), σ² = mean((y - μ)²)",
        ),
        ("ln_mine = (y_np - y_np.mean()) / y_np.std()",),
    ),
    "02.softmax": Exercise(
        lambda logits: _softmax(logits),
        (
            "a softmax turns scores into probabilities: positive, summing to 1",
            "exponentiate every logit, then divide by the total",
            "P_i = e^{l_i} / Σ_j e^{l_j}",
        ),
        ("P_mine = np.exp(logits.data) / np.exp(logits.data).sum()",),
    ),
    "02.greedy": Exercise(
        lambda logits, vocab: vocab[int(np.argmax(logits.data))],
        (
            "the greedy choice is the most probable word",
            "find the position of the largest probability, then look it up in vocab",
            "vocab[argmax P]",
        ),
        ("best_word = vocab[int(np.argmax(P_mine))]",),
    ),
    "02.temperature": Exercise(
        lambda logits, T: _softmax(logits, T),
        (
            "temperature rescales the logits before the softmax: T below 1 sharpens the distribution",
            "the same softmax as before, on logits / T",
            "P_i = e^{l_i / T} / Σ_j e^{l_j / T} with T = 0.25",
        ),
        ("P_quarter = np.exp(logits.data / 0.25) / np.exp(logits.data / 0.25).sum()",),
    ),
    "02.top_p": Exercise(
        _top_p,
        (
            "top-p keeps the fewest most probable words whose probabilities add up to p",
            "sort the probabilities from the largest, add them up one by one, and stop at the first total ≥ 0.5",
            "the running totals are 0.2463, 0.4734, ...: keep the words up to the one that crosses 0.5",
        ),
        ('nucleus_half = {"mat", "sat", "cat"}',),
    ),
    "02.cross_entropy": Exercise(
        lambda logits, target: -math.log(_softmax(logits)[target]),
        (
            "the cross-entropy of one target is how surprised the model is by it",
            "the probability the model gave to the right word, mat, then its log",
            "L = -log P(mat)",
        ),
        ("loss_mat = -math.log(P.data[MAT])",),
    ),
    "02.perplexity": Exercise(
        lambda logits, target: 1 / _softmax(logits)[target],
        (
            "this check follows from the one above: once the loss is right, this one is too",
            "the perplexity exp(L) undoes the log",
            "exp(-log P(mat)) = 1 / P(mat)",
        ),
    ),
    "02.softmax_grad": Exercise(
        lambda logits, target: _grads(lambda l: F.cross_entropy(l.reshape(1, -1), np.array([target])), logits)[0],
        (
            "softmax and the log in the loss cancel in the gradient: the result is simple",
            "one number per logit, (5,): the probabilities with something taken away at the target only",
            "dL/dl = P - onehot(mat)",
        ),
        ("g_mat = P.data - np.eye(5)[MAT]",),
    ),
    "02.adam_first_step": Exercise(
        _adam_first_step,
        (
            "at the first step the bias corrections undo the averages' start at zero",
            "at t = 1, m̂ = g and v̂ = g², so the step's size does not depend on how small g is",
            "θ₁ = 0 - α g / (|g| + ε), with g = 3e-5",
        ),
        ("adam_after = -alpha * 3e-5 / (abs(3e-5) + eps)",),
    ),
    # 03: attention in depth
    "03.one_query": Exercise(
        lambda q, K, V: F.scaled_dot_product_attention(gf.tensor(np.array([q])), K, V).data[0],
        (
            "attention for one query: scores against every key, a softmax, then a weighted average of the values",
            "q = [1, 1] against the rows of K, scaled by 1/√d_k; the weights (3,) then mix the 3 rows of V",
            "w_j = softmax_j(q · k_j / √d_k); o = Σ_j w_j v_j",
        ),
        (
            "weights_q11 = np.exp(np.array([1.0, 1.0]) @ K.numpy().T / np.sqrt(d_k))",
            "O_q11 = weights_q11 / weights_q11.sum() @ V.numpy()",
        ),
    ),
    "03.scale_for_variance": Exercise(
        lambda d_k, var: 1 / math.sqrt(var * var * d_k),
        (
            "the scale is chosen so that q · k has variance 1: what is its variance now?",
            "each product q_i k_i has variance Var(q_i) Var(k_i) = 2 · 2, and q · k adds d_k = 64 of them",
            "Var(q · k) = 4 d_k, so multiply by 1 / √(4 d_k)",
        ),
        ("scale_var2 = 1 / np.sqrt(4 * 64)",),
    ),
    "03.window_mask": Exercise(
        _window_mask,
        (
            "a sliding window of 2: each token sees itself and the one just before, and nothing else",
            "two conditions on (row i, column j) joined by and: j ≤ i (causal) and j ≥ i - 1 (the window)",
            "the lower triangle, cut to the diagonal and the band just below it",
        ),
        ("window_mask = np.tril(np.ones((5, 5), bool)) & np.triu(np.ones((5, 5), bool), k=-1)",),
    ),
    "03.head_slice": Exercise(
        _heads_of,
        (
            "splitting into heads only regroups the last axis: each head owns a contiguous block of features",
            "batch 0, token 2, and on the last axis head 1's block of d_head features",
            "head h holds features h · d_head up to (h + 1) · d_head",
        ),
        ("head1_token2 = H.numpy()[0, 2, d_head : 2 * d_head]",),
    ),
    "03.cross_weights_shape": Exercise(
        _cross_weights_shape,
        (
            "attention weights have one number per (batch, head, query, key)",
            "the queries come from x (4 tokens), the keys from the context (9 tokens)",
            "(B, heads, T, S): batch 2, n_heads heads, T queries, S keys",
        ),
        ("cross_weights_shape = (2, n_heads, 4, 9)",),
    ),
    "03.gqa_cache_bytes": Exercise(
        lambda kv_heads, head_size, itemsize: _kv_cache_bytes(1, kv_heads, head_size, 1, itemsize),
        (
            "a cache stores, for every token, the keys and the values of each key-value head",
            "count the numbers per token: keys and values, n_kv heads, h_s each; then the bytes per float64",
            "2 · n_kv · h_s · 8 bytes",
        ),
        ("gqa_bytes_per_token = 2 * n_kv * h_s * 8",),
    ),
    "03.separator_attends": Exercise(
        lambda A, n: np.bincount(A[:, 0, n].argmax(-1)).argmax(),
        (
            "to write the reversed number, the first output digit must come from somewhere in the input",
            "the first digit of the reversal is the last digit read, the one just before the separator",
            "the separator sits at position n; the last digit at n - 1",
        ),
        ("separator_looks_at = n - 1",),
    ),
    "03.value_grad": Exercise(
        _value_grad_of_sum,
        (
            "O = A V: each value row reaches the output through the attention weights",
            "dV has V's shape (2, 2, 5, 4); G = dL/dO is all ones here; the batch and head axes stay, the last "
            "two of A swap",
            "dV = Aᵀ G (transposing the last two axes of A), G = ones",
        ),
        ("dV_of_sum = np.swapaxes(A_hand, -1, -2) @ np.ones(shape)",),
    ),
    # 04: positions
    "04.undo_perm": Exercise(
        lambda attention, x: attention(x).data,
        (
            "to undo a shuffle, you need the inverse shuffle: where did each original row go?",
            "an array of 6 indices: entry i is the position in the shuffled order that holds original row i",
            "the inverse permutation, perm⁻¹, which sorting perm gives",
        ),
        ("undo_perm = np.argsort(perm)",),
        tol=1e-12,
    ),
    "04.sinusoid_row": Exercise(
        lambda position, d: gf.nn.sinusoidal_table(position + 1, d)[position],
        (
            "each pair of features is a sine and a cosine of the position at one frequency",
            "d = 4 gives 2 frequencies, ω_i = 10000^(-2i/d): ω_0 = 1, ω_1 = 0.01",
            "[sin(2 ω_0), cos(2 ω_0), sin(2 ω_1), cos(2 ω_1)]",
        ),
        ("pe_at_2 = [math.sin(2), math.cos(2), math.sin(2 * 0.01), math.cos(2 * 0.01)]",),
    ),
    "04.position_table_grad": Exercise(
        _position_table_grad,
        (
            "a learned position row gets the gradient of every token that used it",
            "the input is 2 sequences of 5 positions, the gradient is all ones: which rows of the (8, 4) table "
            "were used, and how often?",
            "rows 0..4: the sum over the 2 sequences; rows 5..7: unused, zero",
        ),
        ("table_grad = np.concatenate([np.full((5, 4), 2.0), np.zeros((3, 4))])",),
    ),
    "04.rope_pair": Exercise(
        lambda position: gf.nn.RotaryEmbedding(2)(gf.tensor(np.tile([1.0, 0.0], (position + 1, 1)))).data[position],
        (
            "RoPE turns each pair of features by an angle proportional to the position",
            "with d = 2 the frequency is 1, so position 3 turns (1, 0) by 3 radians",
            "(cos 3, sin 3)",
        ),
        ("pair_at_3 = [math.cos(3), math.sin(3)]",),
    ),
    "04.rope_relative": Exercise(
        lambda rope, q, k, m, n: (rope(q, offset=m) @ rope(k, offset=n).T).item(),
        (
            "RoPE's dot product depends on the positions only through their difference",
            "the key sits at 0 here: the query must be as far ahead of it as 7 is of 4",
            "m - n = 7 - 4",
        ),
        ("query_position = 3",),
        tol=1e-12,
    ),
    # 05: norms, feed-forward, residuals
    "05.rms_norm": Exercise(
        lambda x: F.rms_norm(gf.tensor(x), eps=0.0).data,
        (
            "RMSNorm scales a row to unit root mean square, without centring it",
            "the mean of the squares, its square root, and x divided by it (eps = 0 here)",
            "x / √(mean(x²))",
        ),
        ("rms_by_hand = x / np.sqrt(np.mean(x**2))",),
    ),
    "05.beta_grad": Exercise(
        lambda g: summed_to(g, g.shape[-1:]),
        (
            "beta is added to every row: its gradient collects every row's",
            "g is (n, d) and beta is (d,): sum away the axis beta was broadcast along",
            "dL/dβ_j = Σ_n g[n, j]",
        ),
        ("beta_grad = g.sum(axis=0)",),
    ),
    "05.pre_norm": Exercise(
        lambda x: x - F.layer_norm(gf.tensor(x), eps=1e-5).data,
        (
            "pre-norm: the block normalises a copy of x, transforms it, and adds the result to x",
            "the residual stream keeps v3 as it is; the update is F(LN(v3)) with F(z) = -z (ln3 is the LayerNorm "
            "above)",
            "x + F(LN(x)) = v3 - LN(v3)",
        ),
        ("pre_norm_out = v3 - ln3(v3)",),
    ),
    "05.swiglu_slope": Exercise(
        lambda x: float(_grads(lambda x: x.silu() * x, x)[0]),
        (
            "x² σ(x) is a product: the product rule gives one term per factor",
            "d(x²)/dx = 2x and dσ/dx = σ(1 - σ)",
            "2x σ(x) + x² σ(x)(1 - σ(x)) at x = 2, σ(2) = 1 / (1 + e⁻²)",
        ),
        ("swiglu_slope = 2 * 2 / (1 + math.exp(-2)) + 4 / (1 + math.exp(-2)) * (1 - 1 / (1 + math.exp(-2)))",),
    ),
    "05.residual_init": Exercise(
        lambda config: 0.02 / math.sqrt(2 * config.n_layer),
        (
            "GPT-2 shrinks the projections that write into the residual stream, which adds 2 of them per layer",
            "the base standard deviation 0.02, divided by the square root of the number of residual additions",
            "0.02 / √(2 L) with L = 6",
        ),
        ("o_proj_std = 0.02 / math.sqrt(2 * 6)",),
    ),
    "05.block_parameters": Exercise(
        lambda model: model.blocks[0].num_parameters(),
        (
            "count weights and biases layer by layer: attention, MLP, two LayerNorms",
            "attention has 4 d×d projections with biases; the MLP goes d → 4d → d with biases; a LayerNorm has a "
            "gain and a bias",
            "4(d² + d) + 8d² + 5d + 2·2d with d = 768",
        ),
        ("block_parameters = 4 * (768 * 768 + 768) + 8 * 768 * 768 + 5 * 768 + 2 * 2 * 768",),
    ),
    # 06: training a toy language model
    "06.bpe_merge": Exercise(
        _bpe_merge,
        (
            "the pair starts at i when the token at i and the one after it are the pair's two tokens",
            "compare the two ids at i and i + 1 with pair; at the last position there is no i + 1",
            "a bound check first (so that ids[i + 1] exists), then the comparison",
        ),
        ("if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:",),
    ),
    "06.parameter_count": Exercise(
        lambda config, count: count(config),
        (
            "count by part: token table, position table, the blocks, the final LayerNorm",
            "a table is rows × width; each block has 12 d² weights and 13 d biases and gains (tied head: no "
            "extra matrix)",
            "V d + T d + L (12 d² + 13 d) + 2 d",
        ),
        ("n_default = 103 * 128 + 64 * 128 + 4 * (12 * 128**2 + 13 * 128) + 2 * 128",),
    ),
    "06.uniform_loss": Exercise(
        lambda V: F.cross_entropy(gf.zeros(1, V), np.array([0])).item(),
        (
            "a model that knows nothing gives every token the same probability",
            "with V tokens that probability is 1 / V; the loss is its negative log",
            "-log(1 / V)",
        ),
        ("uniform_loss = math.log(V)",),
    ),
    "06.lr_halfway": Exercise(
        _cosine_halfway,
        (
            "half way through the decay, the cosine is at its half-way point too",
            "cos(π / 2) = 0, so the schedule's cosine factor (1 + cos) / 2 is 1/2",
            "half way between max_lr = 1e-2 and min_lr = 1e-3",
        ),
        ("lr_halfway = (1e-2 + 1e-3) / 2",),
    ),
    "06.perplexity": Exercise(
        lambda val_loss: math.exp(val_loss),
        (
            "perplexity is the loss, undone from log space",
            "val_final is a mean negative log-likelihood in nats",
            "e to the power of the loss",
        ),
        ("final_perplexity = math.exp(val_final)",),
    ),
    "06.tokens_trained": Exercise(
        lambda history, batch, context: len(history["step"]) * batch * context,
        (
            "each step reads a batch of windows, each window a context of tokens",
            "three numbers from the training run above: steps, batch size, context",
            "steps · B · T",
        ),
        ("tokens_trained = steps * B * T",),
    ),
    "06.temperature": Exercise(
        lambda logits, T: _softmax(logits, T),
        (
            "temperature divides the logits before the softmax",
            "exponentials of large logits overflow: subtracting the largest logit first changes nothing in the result",
            "P_i = e^{(l_i - max l) / T} / Σ_j e^{(l_j - max l) / T} with T = 0.5",
        ),
        (
            "p_half_mine = np.exp((logits_next - logits_next.max()) / 0.5) "
            "/ np.exp((logits_next - logits_next.max()) / 0.5).sum()",
        ),
        tol=1e-5,
    ),
    "06.top_k": Exercise(
        lambda logits, names, k: {str(names[i]) for i in np.argsort(logits)[-k:]},
        (
            "top-k keeps the k most probable words, nothing else",
            "look at toy_logits: which two are largest?",
            'the two most probable: "mat" and one of "cat", "sat"',
        ),
        ('top2_words = {"mat", "sat"}',),
    ),
    "06.kv_cache_bytes": Exercise(
        _kv_cache_bytes,
        (
            "the cache holds a key and a value per layer, per sequence, per key-value head, per position",
            "multiply the counts: keys and values, layers, batch, kv heads, positions, head size",
            "2 · L · B · n_kv · T · h_s · 8 bytes",
        ),
        ("cache_bytes_f64 = 2 * L * B_dec * n_kv * T * h_s * 8",),
    ),
    "06.chinchilla": Exercise(
        lambda config, count: 20 * count(config),
        (
            "Chinchilla's rule of thumb ties the tokens to the parameters",
            "the default GPTConfig is GPT-2 small: count its parameters (the cell above does)",
            "D = 20 N: twenty training tokens for each of the N parameters",
        ),
        ("chinchilla_gpt2 = 20 * 124_439_808",),
    ),
    # 07: a real LLM, SmolLM2-135M
    "07.q_row_bytes": Exercise(
        lambda gguf, tensor: gguf.tensor(tensor).data.shape[-1],
        (
            "a quantised row is stored in blocks of 32 weights, each block a fixed number of bytes",
            "a row of 576 weights is 576 / 32 blocks; Q4_1-style blocks take 20 bytes each",
            "(576 / 32) · 20 bytes",
        ),
        ("q_row_bytes = 576 // 32 * 20",),
    ),
    "07.absmax": Exercise(
        _absmax,
        (
            "absmax quantisation picks the one scale that maps the largest weight to the largest code, 7",
            "the scale is max|w| / 7; each weight is divided by it, rounded, clamped to [-7, 7], and multiplied back",
            "s = 1.4 / 7 = 0.2; 0.13 / 0.2 rounds to 1, -0.35 / 0.2 to -2, 0.02 / 0.2 to 0",
        ),
        ("s4 = np.abs(w4).max() / 7", "w4_read_back = np.clip(np.round(w4 / s4), -7, 7) * s4"),
    ),
    "07.digit_tokens": Exercise(
        lambda tokenizer, text: len(tokenizer.encode(text)),
        (
            "look at how the tokenizer treats numbers in the cells above",
            "this tokenizer never merges digits",
            "one token per digit",
        ),
        ("n_tokens_12345 = 5",),
    ),
    "07.layer_parameters": Exercise(
        lambda layer: layer.num_parameters(),
        (
            "count a layer by its matrices: attention's four and the MLP's three, then the two norms",
            "q and o are 576 × 576; k and v are 192 × 576 (3 kv heads of 64); gate, up and down are 576 × 1536; "
            "RMSNorm has no bias",
            "2·576² + 2·192·576 + 3·576·1536 + 2·576",
        ),
        ("layer_parameters = 2 * 576 * 576 + 2 * 192 * 576 + 3 * 576 * 1536 + 2 * 576",),
    ),
    "07.rope_theta": Exercise(
        lambda rope, i: rope.theta[i],
        (
            "RoPE's frequencies fall geometrically from 1 along the pairs of features",
            "θ_i = base^(-2i/d) with this model's base and head size",
            "base = 100000, d = 64, i = 1",
        ),
        ("theta_1 = 100_000 ** (-2 / 64)",),
    ),
    "07.kv_cache_f16": Exercise(
        lambda config, positions: _kv_cache_bytes(
            config.n_layer, config.n_kv_heads, config.d_model // config.n_heads, positions, itemsize=2
        ),
        (
            "the cache holds a key and a value per layer, per kv head, per position",
            "count: 2 (k and v) · layers · kv heads · head size · positions, then 2 bytes per float16",
            "2 · 30 · 3 · 64 · 2048 · 2 bytes",
        ),
        ("cache_bytes_f16 = 2 * 30 * 3 * 64 * 2048 * 2",),
    ),
    "07.previous_token": Exercise(
        lambda A, labels, token: labels[int(A[labels.index(token)].argmax())],
        (
            "a previous-token head attends from each token to the one just before it",
            'look up " mat" in labels and step back',
            'the token just before " mat"',
        ),
        ('prev_head_at_mat = labels[labels.index(" mat") - 1]',),
    ),
    "07.temperature": Exercise(
        lambda logits, T, token: _softmax(logits, T)[token],
        (
            "temperature divides the logits before the softmax; then read one probability",
            "subtract the largest logit before exponentiating (they are large), then normalise and pick paris",
            "P(paris) = e^{(z_paris - max z) / T} / Σ_j e^{(z_j - max z) / T}, T = 0.5",
        ),
        ("p_paris_half = (np.exp((z - z.max()) / 0.5) / np.exp((z - z.max()) / 0.5).sum())[paris]",),
        tol=1e-5,
    ),
    "07.chatml": Exercise(
        lambda system, user: (
            f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
        ),
        (
            "ChatML is a list of messages, each a dict with a role and a content",
            "compare with brief: which roles appear, and in which order?",
            'two messages: the "system" one, then the "user" one, with the texts of brief',
        ),
        ('my_messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]',),
    ),
    # 08: reading models/gpt.py line by line
    "08.embedding_shape": Exercise(
        lambda model, ids: tuple((model.wte(ids) + model.wpe(np.arange(ids.shape[1]))).shape),
        (
            "the token and position embeddings are added: one vector per token of each sequence",
            "ids is a batch of sequences; each id becomes a row of n_embd numbers",
            "(batch, time, width)",
        ),
        ("x0_shape = (2, 5, 16)",),
    ),
    "08.cross_entropy": Exercise(
        lambda model, ids, targets: model(ids, targets)[1].item(),
        (
            "cross_entropy wants one row of logits per prediction and one target id per row",
            "flatten the batch and time axes: logits (2, 5, 11) to (10, 11), targets (2, 5) to (10,)",
            "gf.nn.functional.cross_entropy on the flattened logits and targets",
        ),
        ("my_loss = gf.nn.functional.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1))",),
    ),
    "08.train_config": Exercise(
        lambda count, config_class: count(
            config_class(vocab_size=103, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=False)
        ),
        (
            "`gradflow train`'s defaults are in its --help; a GPTConfig takes the same numbers",
            "vocabulary 103, context 64, 4 layers, 4 heads, width 128",
            "and no biases: bias=False",
        ),
        ("train_default = GPTConfig(vocab_size=103, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=False)",),
    ),
    "08.causal_reach": Exercise(
        _causal_reach,
        (
            "causal attention: which positions can see position 3?",
            "a token reaches itself and the tokens after it, never those before",
            "the positions from 3 to the end of the 5",
        ),
        ("changed_rows = {3, 4}",),
    ),
    "08.untied_head": Exercise(
        _untied_extra,
        (
            "tied weights share the token table with the output head",
            "untied, the head gets a matrix of its own: what shape maps width d to V logits?",
            "V × d",
        ),
        ("untied_extra = V * d",),
    ),
    "08.fc2_std": Exercise(
        lambda config: 0.02 / math.sqrt(2 * config.n_layer),
        (
            "the same rule as the projections into the residual stream above",
            "GPT-2 small has 12 layers, each adding 2 residual updates",
            "0.02 / √(2 L) with L = 12",
        ),
        ("fc2_std_small = 0.02 / math.sqrt(24)",),
    ),
    "08.last_input": Exercise(
        _last_input,
        (
            "the last token's input is its embedding plus the embedding of its position",
            "take the last token of each sequence (keep the time axis, length 1) and the position table's row for it",
            "position 4, not 0: wte(last ids) + wpe row 4",
        ),
        ("x0_last = model.wte(ids[:, 4:]) + model.wpe.weight[4]",),
    ),
    "08.c_attn_shape": Exercise(
        lambda weights: tuple(weights["transformer.h.0.attn.c_attn.weight"].shape),
        (
            "GPT-2 stores the query, key and value projections as one matrix, input features first",
            "its rows are the input width, its columns q, k and v side by side",
            "(d, 3 d) with d = 16",
        ),
        ("c_attn_shape = (16, 48)",),
    ),
}
