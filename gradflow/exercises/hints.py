"""What each exercise states, and its hints in levels: the idea, the shape of the answer, the formula.

A backward exercise states its forward and what to find (FORWARD); deriving the backward is the
exercise, so the derivation is not in the learner's file: it comes a level at a time from
`gradflow exercises hint NAME` (HINTS): first the idea (what the derivative depends on), then the
shape of the answer (which arrays, which axis), then the formula. The code itself only through
`gradflow exercises solution NAME`, which asks first.
"""

FIND = "g = dL/dy has y's shape; find"

FORWARD = {
    "add_backward": f"z = a + b, elementwise (a and b may broadcast).\n\n{FIND} (dL/da, dL/db).",
    "mul_backward": f"z = a * b, elementwise (a and b may broadcast).\n\n{FIND} (dL/da, dL/db).",
    "exp_backward": f"y = exp(x), elementwise.\n\n{FIND} dL/dx.",
    "log_backward": f"y = log(x), elementwise (x > 0).\n\n{FIND} dL/dx.",
    "div_backward": f"z = a / b, elementwise (a and b may broadcast).\n\n{FIND} (dL/da, dL/db).",
    "tanh_backward": f"y = tanh(x), elementwise; forward saved y.\n\n{FIND} dL/dx.",
    "mean_backward": f"y = (1/N) sum of x over `axis`, N = ctx.n elements per mean (keepdims as asked).\n\n"
    f"{FIND} dL/dx, of x's shape.",
    "reshape_backward": f"y = x with a new shape: the same elements in the same order.\n\n{FIND} dL/dx.",
    "permute_backward": f"y = x with its axes reordered: y.shape[i] = x.shape[axes[i]].\n\n{FIND} dL/dx.",
    "max_backward": "y = the max of x over ctx.axis (Min's: the min), keepdims as asked; forward saved x and y.\n\n"
    f"{FIND} dL/dx, of x's shape.",
    "matmul_backward": "C = A @ B,  C_ij = sum_k A_ik B_kj.  A: (..., n, k), B: (..., k, m), C: (..., n, m);\n"
    "a 1-D A is one row (k,), a 1-D B one column (k,), and that axis is gone from C.\n\n"
    "G = dL/dC has C's shape; find (dL/dA, dL/dB), of A's and B's shapes (batch axes may keep the broadcast shape).",
    "softmax_backward": "y_i = exp(x_i) / sum_j exp(x_j) along ctx.axis; forward saved y.\n\n"
    f"{FIND} dL/dx. Every y_i depends on every x_j of its row.",
    "log_softmax_backward": f"y_i = x_i - log sum_j exp(x_j) along ctx.axis; forward saved y.\n\n{FIND} dL/dx.",
    "layer_norm_backward": "y = xhat * w + b,  xhat = (x - mu) * r,  mu = mean(x),  r = 1 / sqrt(var(x) + eps),\n"
    "means over the last axis (size D). x: (..., D); w, b: (D,) or None; forward saved xhat, r, w.\n\n"
    f"{FIND} (dL/dx, dL/dw, dL/db). mu and r are functions of x too.",
    "rms_norm_backward": "y = xhat * w,  xhat = x * r,  r = 1 / sqrt(mean(x^2) + eps), over the last axis.\n"
    "x: (..., D); w: (D,) or None; forward saved xhat, r, w.\n\n"
    f"{FIND} (dL/dx, dL/dw). r is a function of x too.",
    "gelu_backward": "y = x h,  h = (1 + tanh(u)) / 2,  u = c (x + a x^3),  c = sqrt(2/pi),\n"
    "a = 0.044715 (GPT-2's GELU); forward saved x and tanh(u).\n\n"
    f"{FIND} dL/dx.",
    "attention_backward": "out = A' v,  A' = A * drop,  A = softmax(S) along the keys,  S = q k^T * scale + bias.\n"
    "q: (..., Tq, d), k: (..., Tk, d), v: (..., Tk, dv); bias broadcastable to (..., Tq, Tk); a masked\n"
    "score is -inf (weight 0); drop is dropout's scaled mask (A' = A without dropout).\n\n"
    "G = dL/d(out); find (dq, dk, dv), and dbias when the bias was given.",
    "linear_backward": "Y = X W^T + b: X (rows, in) is x's rows stacked, W (out, in), b (out,) or None,\n"
    "Y (rows, out).\n\n"
    "G = dL/dY; find (dL/dx, dL/dW, dL/db).",
    "embedding_backward": "y[n] = W[ids[n]]: row ids[n] of W (V, d) copied to place n; ids are constants.\n\n"
    f"{FIND} dL/dW, of W's shape.",
    "rope_backward": "y = R(theta) x, pair by pair: (a, b) -> (a cos - b sin, a sin + b cos);\n"
    "cos and sin are constants.\n\n"
    f"{FIND} dL/dx.",
    "cross_entropy_backward": "loss_n = -log softmax(z_n)[t_n]: z (N, C) logits, t (N,) target ids; rows whose target\n"
    "is ignore_index count for nothing; reduction mean (over the rows that count), sum or none.\n\n"
    "g = dL/d(loss) (a number, or (N,) for none); find dL/dz, of z's shape.",
}

HINTS = {
    "add_backward": (
        "a sum passes a change in either input straight through: dz/da = 1 and dz/db = 1",
        "two arrays, one per input, each the incoming g (the engine sums a broadcast one back)",
        "dL/da = g,  dL/db = g",
    ),
    "mul_backward": (
        "nudging a changes z by as much as the factor it is multiplied with: the other input",
        "two arrays, one per input, each g times the other input (saved by forward)",
        "dL/da = g * b,  dL/db = g * a",
    ),
    "unbroadcast": (
        "broadcasting copies an element along an axis; the copies' gradients add up in the original",
        "two kinds of axes to sum over: the leading axes grad has and shape lacks, and the axes where shape has 1 "
        "and grad more (keep those with keepdims)",
        "sum over the extra leading axes, then over every axis i with shape[i] == 1 < grad.shape[i], keepdims=True",
    ),
    "topological_order": (
        "a node may run only once every node that uses its output has run: the reverse of a post-order",
        "a list of nodes with the root first; a stack of (node, children still to visit) replaces the recursion, "
        "and a set of visited ids keeps a shared node to one place",
        "depth-first from the root: push a node's input nodes; append a node after all of them are done; reverse",
    ),
    "exp_backward": (
        "exp is its own derivative, and forward already computed it",
        "one array of x's shape: g times the saved output",
        "dL/dx = g * exp(x) = g * y",
    ),
    "log_backward": (
        "the slope of log at x is the reciprocal of x",
        "one array of x's shape: g scaled elementwise by something of x",
        "dL/dx = g / x",
    ),
    "div_backward": (
        "a / b is a times 1/b: a enters linearly, b through a reciprocal whose slope is negative",
        "two arrays: for a, g divided by b; for b, a negative term that falls with b squared",
        "dL/da = g / b,  dL/db = -g * a / b^2",
    ),
    "tanh_backward": (
        "tanh's slope can be written with tanh itself, which forward saved",
        "one array of x's shape: g times a function of y alone",
        "dL/dx = g * (1 - y^2)",
    ),
    "sum_backward": (
        "every element of a sum's input adds to it with slope 1: the gradient is copied back to each",
        "first give g back the reduced axes as size 1 (unless keepdims kept them), then stretch it to the "
        "input's shape",
        "g with size-1 axes inserted at `axis`, broadcast to `shape`",
    ),
    "mean_backward": (
        "a mean is a sum divided by the count: each element's slope is 1/N",
        "one array of x's shape: g spread back over the averaged axes, then scaled",
        "dL/dx_i = g / N, spread as Sum's backward spreads it",
    ),
    "reshape_backward": (
        "a reshape moves no value: each element of y is one element of x",
        "one array: g, in x's shape",
        "dL/dx = g reshaped to x's shape",
    ),
    "permute_backward": (
        "a permutation of axes moves no value: undo the move",
        "one array of x's shape: g with its axes put back, by the inverse permutation of ctx.axes",
        "the inverse permutation is the argsort of axes: dL/dx = g transposed by it",
    ),
    "matmul_backward": (
        "C_ij = sum_k A_ik B_kj: A_ik reaches every C_ij of row i through B_kj; B_kj every C_ij of column j "
        "through A_ik",
        "dL/dA has A's shape (n, k): it is G (n, m) times a (m, k) matrix made from B; dL/dB (k, m) is a (k, n) "
        "matrix made from A times G. Get the 2-D case right first; then a 1-D operand is a row or a column whose "
        "axis you put back into G",
        "dL/dA = G @ B^T,  dL/dB = A^T @ G (transposing the last two axes)",
    ),
    "max_backward": (
        "only the elements equal to the max moved it; a nudge to any other changes nothing",
        "a mask of x's shape, True where x equals the max (the max spread back over the reduced axes); "
        "ties share g, so divide by how many tied",
        "dL/dx = mask * g / (number of True in the mask along axis), g spread back over axis",
    ),
    "softmax_backward": (
        "each y_i depends on every x_j of its row, through the shared sum: the Jacobian is a full matrix, not "
        "only its diagonal",
        "dL/dx_j = sum_i g_i dy_i/dx_j: a sum over the row, along ctx.axis only, kept as size 1 to broadcast back",
        "dy_i/dx_j = y_i ([i = j] - y_j), so dL/dx = y * (g - sum(g * y) along ctx.axis, keepdims)",
    ),
    "log_softmax_backward": (
        "y_i = x_i - logsumexp(x): x_j reaches y_i directly (when i = j) and through the logsumexp, whose "
        "slope is softmax(x)_j",
        "g as it is, minus softmax(x) times one sum of g along ctx.axis (keepdims); softmax(x) = exp(y)",
        "dL/dx = g - exp(y) * sum(g) along ctx.axis",
    ),
    "layer_norm_backward": (
        "x reaches xhat three ways: directly, through the mean mu, and through the variance in r; and w, b "
        "are gains and shifts of each column",
        "gh = g * w reaches xhat; dL/dx = r times gh minus two means over the last axis (one from mu, one from the "
        "variance); dL/dw, dL/db sum over every row (every axis but the last)",
        "dL/dx = r * (gh - mean(gh) - xhat * mean(gh * xhat)),  dL/dw = sum over rows of g * xhat,  dL/db = sum "
        "over rows of g",
    ),
    "rms_norm_backward": (
        "LayerNorm without the centring: x reaches xhat directly and through r (the mean of x^2)",
        "gh = g * w; dL/dx = r times gh minus one mean over the last axis (from r); dL/dw sums over rows",
        "dL/dx = r * (gh - xhat * mean(gh * xhat)),  dL/dw = sum over rows of g * xhat",
    ),
    "gelu_backward": (
        "y = x h(x) is a product: the product rule, then the chain rule through tanh and the cubic",
        "dy/dx = h + x dh/dx with dh/dx = (1 - tanh(u)^2) / 2 * du/dx; every term of x's shape",
        "dL/dx = g * (h + x (1 - tanh(u)^2) / 2 * c (1 + 3 a x^2))",
    ),
    "causal_mask": (
        "query i sits at position tk - tq + i of the keys; it may see every key at or before its own position",
        "a (tq, tk) boolean array from two index grids: query positions down the rows, key positions across",
        "mask[i, j] = j <= i + (tk - tq)",
    ),
    "attention_backward": (
        "walk forward's lines backwards, one chain rule each: out = A' v, then dropout, then the softmax of each "
        "query's row, then the scaled product",
        "dv (..., Tk, dv) from A' and G; dA (..., Tq, Tk) from G and v; dS as softmax's backward along the keys; "
        "dq and dk from dS and the other operand, times scale; dbias = dS",
        "dv = A'^T G,  dA = (G v^T) * drop,  dS = A * (dA - rowsum(dA * A)),  dq = dS k scale,  dk = dS^T q scale",
    ),
    "linear_backward": (
        "Y = X W^T + b is a matmul and a broadcast add: each has a backward you wrote",
        "dL/dX (rows, in) is G times W; dL/dW (out, in) is G^T times X; dL/db sums G over the rows; reshape dL/dx "
        "back to x's shape",
        "dL/dX = G W,  dL/dW = G^T X,  dL/db = sum of G over rows",
    ),
    "embedding_backward": (
        "row W_i reaches every place n where ids[n] = i; a token used twice gets both gradients",
        "dL/dW: zeros of W's shape, with each g_n added into row ids[n] (an add that accumulates at repeated ids)",
        "dL/dW_i = sum of g_n over the places n with ids[n] = i (np.add.at)",
    ),
    "rope_backward": (
        "each pair is turned by a rotation R; a rotation's Jacobian is R itself",
        "dL/dx has x's shape: G turned by R^T, the rotation by the opposite angle",
        "(ga, gb) -> (ga cos + gb sin, -ga sin + gb cos): the forward with sin negated",
    ),
    "cross_entropy_backward": (
        "loss_n = logsumexp(z_n) - z_n[t_n]: the first term's slope is softmax(z_n), the second's the one-hot target",
        "(N, C): softmax of each row minus 1 at the target; rows with ignore_index zero; then scaled by g (and "
        "1/count for mean)",
        "dL/dz_nc = g * (softmax(z_n)_c - [c = t_n]), / (rows that count) for mean, 0 on ignored rows",
    ),
    "adam_update": (
        "Adam keeps running averages of g and g^2, corrects their start at zero, and steps by their ratio",
        "m and v (p's shape) start at 0 and change in place, as p does; with v_max, step by the larger of it and v",
        "m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)",
    ),
    "clip_grad_norm": (
        "the norm of all gradients together, as if they were one long vector",
        "one factor for every gradient, min(1, max_norm / (norm + eps)); multiply in place; return the norm before",
        "norm = sqrt(sum over parameters of sum(g^2)); g *= max_norm / (norm + 1e-6) when norm > max_norm",
    ),
    "warmup_cosine": (
        "three phases: a linear rise to max_lr, a cosine fall to min_lr, then min_lr for good",
        "the step decides the phase; in the fall, the fraction of the decay done so far, from 0 to 1",
        "warmup: max_lr (step+1) / warmup; then min_lr + (max_lr - min_lr) (1 + cos(pi f)) / 2; after: min_lr",
    ),
    "get_batch": (
        "a window of block_size ids predicts, at every position, the id just after it",
        "batch_size random starts (from the generator given), each a window; y is the same windows one further",
        "x[b] = ids[s_b : s_b + T],  y[b] = ids[s_b + 1 : s_b + T + 1]",
    ),
    "merge_pair": (
        "a pair occurs at i where ids[i] and ids[i + 1] are its two halves, inside one chunk (starts marks where "
        "chunks begin); left to right, an occurrence cannot overlap the one before it",
        "a vector of occurrence positions; in a run of equal ids (a == b) keep every other one; write new_id at "
        "each kept position, and mark the position after it as not kept",
        "at = where (ids[:-1] == a) & (ids[1:] == b) & not starts[1:]; ids[at] = new_id; kept[at + 1] = False; "
        "return ids[kept], kept",
    ),
    "merge_chunk": (
        "encoding replays training's merges, the earliest learned first, on the chunk's byte ids",
        "while some adjacent pair has a merge: the pair of lowest rank (self.rank), merged at every place it "
        "occurs, left to right",
        "rank = min over adjacent pairs of self.rank (absent: never); the merged id is 256 + rank",
    ),
    "filter_probs": (
        "three filters on one distribution: temperature reshapes it, top-k and top-p cut its tail (T = 0 is "
        "greedy: all the probability on the argmax)",
        "z = logits / T; below the k-th largest z, -inf; the softmax; then, sorted from the largest, the shortest "
        "prefix whose sum reaches top_p kept, the rest 0, renormalised",
        "p = softmax(z with z < kth -> -inf); keep order[: (first n with cumsum(p[order])[n] >= top_p) + 1]; "
        "p / p.sum()",
    ),
    "kv_cache_append": (
        "the cache grows along the time axis: what came before, then this step's keys and values",
        "k and v are (B, n_kv, T, hs): with gradients wanted, cat the old and new along axis -2; without, write "
        "them into buffers at positions length .. length + T (growing the buffers when full)",
        "k_all = cat([self.k, k], axis=-2), the same for v; keep them in self.k, self.v and return them",
    ),
}
