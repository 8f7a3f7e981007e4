"""The toy model of "The Math Behind Large Language Models: A Worked Walk-Through" (HumindLabs AI).

Read it with tutorials/02_worked_walkthrough.ipynb, after gradflow/engine/autograd.py; next, gpt.py.

It builds a tiny transformer and writes every number out; this model holds exactly the
weights it prints: vocabulary the/cat/sat/on/mat, d = 4, d_k = 2 (one head), d_ff = 3, and the
input "the cat sat".

The document computes two things, in this order, and never joins them:

    X = E[ids]                                                      (3, 4)
    attention:  Q = X W_Q,  K = X W_K,  V = X W_V                   (3, 2) each
                S = Q K^T,  S_scaled = S / sqrt(d_k),  A = softmax(S_scaled),  Z = A V
    next token: x = X[-1]  (the embedding of "sat", not Z)
                h = W_1 x + b_1,  h+ = ReLU(h),  FFN(x) = W_2 h+ + b_2,  y = FFN(x) + x
                h_last = LayerNorm(y) = gamma * (y - mu) / sigma + beta      (epsilon ignored)
                logits = W_out h_last,  P = softmax(logits),  loss = -log P[target]

Z has d_k = 2 columns and the document prints no W_O to bring it back to d = 4, so its FFN reads
the embedding x itself. This model follows the document: the loss does not depend on W_Q, W_K,
W_V (their gradient is zero, and backward never reaches them), and each position's logits depend
only on its own token. W_out is its own matrix, not tied to E.
"""

import math
from dataclasses import dataclass

import numpy as np

import gradflow as gf
from gradflow.nn import functional as F

# --- the weights, typed in from the document ---------------------------------------------------

E = [  # token embeddings, one row per token id
    [0.2, 0.4, -0.1, 0.3],  # the
    [0.5, -0.2, 0.6, 0.1],  # cat
    [-0.3, 0.7, 0.2, -0.4],  # sat
    [0.1, 0.3, -0.5, 0.8],  # on
    [0.6, -0.1, 0.4, 0.2],  # mat
]
W_Q = [  # (d, d_k): the attention multiplies rows, Q = X W_Q
    [1.0, 0.0],
    [0.0, 1.0],
    [-0.5, 0.2],
    [0.3, -0.1],
]
W_K = [
    [0.5, 0.2],
    [-0.3, 0.8],
    [0.7, -0.1],
    [0.1, 0.4],
]
W_V = [
    [0.6, -0.2],
    [0.3, 0.5],
    [-0.4, 0.1],
    [0.2, 0.7],
]
W_1 = [  # (d_ff, d): the FFN multiplies columns, h = W_1 x + b_1
    [0.5, -0.3, 0.4, 0.2],
    [-0.2, 0.8, -0.1, 0.6],
    [0.3, 0.1, 0.7, -0.5],
]
b_1 = [0.1, -0.1, 0.0]
W_2 = [  # (d, d_ff)
    [0.4, -0.3, 0.5],
    [0.2, 0.6, -0.2],
    [-0.1, 0.4, 0.3],
    [0.7, -0.2, 0.1],
]
b_2 = [0.0, 0.0, 0.0, 0.0]
gamma = [1.0, 1.0, 1.0, 1.0]  # LayerNorm scale and shift at their initial values, as printed
beta = [0.0, 0.0, 0.0, 0.0]
W_out = [  # (|V|, d): logits = W_out h_last, one row per token
    [0.3, -0.2, 0.5, 0.1],  # the
    [-0.1, 0.6, -0.3, 0.4],  # cat
    [0.4, 0.2, 0.1, -0.2],  # sat
    [0.2, 0.5, 0.3, 0.6],  # on
    [-0.3, 0.1, 0.4, 0.2],  # mat
]


@dataclass
class ToyConfig:
    vocab: tuple = ("the", "cat", "sat", "on", "mat")
    d: int = 4  # embedding width
    d_k: int = 2  # query/key/value width of the single head
    d_ff: int = 3  # inner width of the feed-forward network
    ln_eps: float = 0.0  # the document ignores epsilon "for brevity"; a real LayerNorm uses 1e-5

    @property
    def vocab_size(self):
        return len(self.vocab)


class ToyModel(gf.nn.Module):
    """The document's toy transformer; `walkthrough` returns every number it prints."""

    def __init__(self, config=None, dtype=None):
        super().__init__()
        self.config = config = config or ToyConfig()
        dtype = dtype or gf.get_default_dtype()
        V, d, d_k, d_ff = config.vocab_size, config.d, config.d_k, config.d_ff

        def printed(values, shape):
            w = np.array(values, dtype=dtype)
            if w.shape != shape:
                raise ValueError(f"ToyModel: the printed weights have shape {w.shape}, the config asks for {shape}")
            return gf.nn.Parameter(w)

        self.E = printed(E, (V, d))
        self.W_Q = printed(W_Q, (d, d_k))
        self.W_K = printed(W_K, (d, d_k))
        self.W_V = printed(W_V, (d, d_k))
        self.W_1 = printed(W_1, (d_ff, d))
        self.b_1 = printed(b_1, (d_ff,))
        self.W_2 = printed(W_2, (d, d_ff))
        self.b_2 = printed(b_2, (d,))
        self.gamma = printed(gamma, (d,))
        self.beta = printed(beta, (d,))
        self.W_out = printed(W_out, (V, d))

    # --- text <-> ids: the vocabulary is a lookup table ------------------------------------------

    def encode(self, text):
        """Text to token ids, one per space-separated word: "the cat sat" -> [0, 1, 2]."""
        return np.array([self.config.vocab.index(word) for word in text.split()], dtype=np.int64)

    def decode(self, ids):
        return " ".join(self.config.vocab[int(i)] for i in np.asarray(ids).reshape(-1))

    # --- the walk-through --------------------------------------------------------------------------

    def walkthrough(self, ids, target=None):
        """Every quantity the document prints, in its order, as gradflow Tensors.

        ids: one sequence, e.g. encode("the cat sat"); target: the id of the true next token (for
        "loss"). The FFN, LayerNorm and output rows are those of the last token, as in the document.
        """
        ids = np.asarray(ids)
        if ids.ndim != 1:
            raise ValueError(f"walkthrough: ids must be one sequence (T,), got shape {ids.shape}")
        out = {}

        # section 1, embeddings: row i of X is E[ids[i]] (the document adds no positional encoding)
        out["X"] = X = F.embedding(ids, self.E)

        # section 2, single-head scaled dot-product attention, unmasked: every token sees every token
        out["Q"] = Q = X @ self.W_Q
        out["K"] = K = X @ self.W_K
        out["V"] = V = X @ self.W_V
        out["S"] = S = Q @ K.T  # S_ij = Q_i . K_j
        # dot products of d_k random terms have variance ~ d_k; dividing by sqrt(d_k) keeps softmax soft
        out["S_scaled"] = S_scaled = S / math.sqrt(self.config.d_k)
        out["A"] = A = F.softmax(S_scaled, axis=-1)  # each row sums to 1
        out["Z"] = A @ V  # printed, but nothing below reads it (see the module docstring)

        # section 4, the position-wise FFN on x = the embedding of the last token, then Add & Norm
        out["x"] = x = X[-1]
        out["h"] = h = self.W_1 @ x + self.b_1
        out["relu_h"] = relu_h = h.relu()
        out["ffn"] = ffn = self.W_2 @ relu_h + self.b_2
        out["residual"] = y = ffn + x
        out["mu"] = y.mean()
        out["var"] = y.var(ddof=0)  # population variance (divide by d), as LayerNorm uses
        out["sigma"] = out["var"].sqrt()
        out["ln"] = h_last = F.layer_norm(y, self.gamma.shape, self.gamma, self.beta, eps=self.config.ln_eps)

        # section 5, output projection and softmax over the vocabulary
        out["logits"] = logits = self.W_out @ h_last
        out["P"] = F.softmax(logits, axis=-1)

        # section 7, cross-entropy: L = -log P[target], via log_softmax so that a tiny P cannot underflow
        if target is not None:
            out["loss"] = -F.log_softmax(logits, axis=-1)[int(target)]
        return out

    # --- the same computation at every position, as a language model ------------------------------

    def forward(self, ids, targets=None):
        """Next-token logits at every position (..., T, |V|) and, given targets, the mean cross-entropy.

        Applies the walk-through's next-token path to each position: h_last = LayerNorm(x + FFN(x)),
        logits = h_last W_out^T, with W x written x W^T so that it applies to every row at once. The
        attention output is not used, because the document never feeds Z onward.
        """
        x = F.embedding(ids, self.E)
        relu_h = (x @ self.W_1.T + self.b_1).relu()
        y = x + relu_h @ self.W_2.T + self.b_2
        h_last = F.layer_norm(y, self.gamma.shape, self.gamma, self.beta, eps=self.config.ln_eps)
        logits = h_last @ self.W_out.T
        if targets is None:
            return logits, None
        targets = np.asarray(targets)
        loss = F.cross_entropy(logits.reshape(-1, self.config.vocab_size), targets.reshape(-1))
        return logits, loss
