"""LoRA: fine-tune a frozen model by learning a small low-rank change to some of its Linear layers.

A Linear maps y = x W^T + b with W of shape (out, in). Fine-tuning all of W means learning
out * in numbers per layer and keeping Adam's two moments for each. LoRA ("LoRA: Low-Rank
Adaptation of Large Language Models", Hu et al., 2021) keeps W frozen and learns its change as a
product of two thin matrices, dW = (alpha / r) B A, with A: (r, in) and B: (out, r): r (in + out)
numbers instead of out * in. For SmolLM2's q_proj (576 x 576) at r = 8 that is 9,216 numbers
instead of 331,776.

    model = Llama(config)
    adapted = lora.apply(model, targets=("q_proj", "v_proj"), r=8, alpha=16)
    ...train: only the adapters require grad...
    lora.merge(model)                     # W += (alpha / r) B A: plain Linears' cost again

The weights keep their names (`layers.0.attn.q_proj.weight`), so a pretrained checkpoint loads
into an adapted model as into the plain one; the adapters add `...q_proj.A` and `...q_proj.B`,
and `lora_state_dict` returns only those.
"""

import math
from collections import Counter

import numpy as np

from gradflow.nn import functional as F
from gradflow.nn import init
from gradflow.nn.layers import Linear
from gradflow.nn.module import Module


class LoRALinear(Module):
    """y = x W^T + b + (alpha / r) dropout(x) A^T B^T,  i.e. y = base(x) + (alpha / r) B (A dropout(x))

    W and b are the base Linear's own Parameters, frozen; A: (r, in) and B: (out, r) are learned.

    B starts at zero, so B A = 0 and the adapted layer computes exactly what the base computed:
    fine-tuning starts from the pretrained model, not from a perturbed one. A starts random, as a
    fresh Linear(in, r) would (U(-1/sqrt(in), 1/sqrt(in)), the Kaiming-uniform draw that the
    paper's reference setup uses), so that the first gradient of B, which is G^T (A x) summed over
    the rows, is not zero: with both at zero neither would ever move.

    The scale alpha / r keeps the size of the update independent of the rank: each element of
    B A x sums r products, so with r doubled the same learning rate would move the output about
    twice as far. Dividing by r lets one alpha (and one learning rate) serve every r; the paper
    sets alpha once and does not tune it again.

    dropout (on the adapter's input only) regularises the adapter without touching the base path.
    """

    def __init__(self, base, r=8, alpha=16, dropout=0.0):
        super().__init__()
        if not isinstance(base, Linear):
            raise TypeError(f"LoRALinear: base must be an nn.Linear, got {type(base).__name__}")
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
            raise ValueError(f"LoRALinear: r must be a positive int, got {r!r}")
        if not 0 <= dropout < 1:
            raise ValueError(f"LoRALinear: dropout must be in [0, 1), got {dropout}")
        self.in_features, self.out_features = base.in_features, base.out_features
        self.r, self.alpha, self.dropout = int(r), alpha, dropout
        self.scale = alpha / r
        self.merged = False
        self.weight, self.bias = base.weight, base.bias
        for p in (self.weight, self.bias):
            if p is not None:
                p.requires_grad = False
        dtype = self.weight.dtype
        bound = 1 / math.sqrt(self.in_features)
        self.A = init.uniform_(init.parameter(self.r, self.in_features, dtype=dtype), -bound, bound)
        self.B = init.parameter(self.out_features, self.r, dtype=dtype)  # zeros

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ValueError(f"LoRALinear({self.in_features}, {self.out_features}): input has last size {x.shape[-1]}")
        y = F.linear(x, self.weight, self.bias)
        if self.merged:  # W already holds W + (alpha / r) B A
            return y
        h = F.linear(F.dropout(x, self.dropout, self.training), self.A)  # (..., r)
        # scaled at its thinnest: h is r wide, B's product the layer's width, and every array made here
        # stays with the graph until backward (8 x 76 rows of 576: 1.4 MB per q_proj per step)
        return y + F.linear(h * self.scale, self.B)

    def delta(self):
        """(alpha / r) B A, the change the adapter makes to W, as an array of W's shape."""
        return (self.scale * (self.B.data @ self.A.data)).astype(self.weight.dtype)

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, r={self.r}, alpha={self.alpha}, dropout={self.dropout}"


def apply(model, targets=("q_proj", "v_proj"), r=8, alpha=16, dropout=0.0):
    """Replace every Linear whose own name (the last part of its dotted name) is in targets by a
    LoRALinear around it, freeze every other parameter, and return the dotted names adapted.

    Every target must match at least one Linear: a misspelt one would otherwise leave the model
    with nothing to learn but say nothing.
    """
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    linears = [(name, module) for name, module in model.named_modules() if isinstance(module, Linear)]
    available = sorted({name.rsplit(".", 1)[-1] for name, _ in linears})
    for target in targets:
        if target not in available:
            raise ValueError(
                f"lora.apply: target {target!r} matches no Linear; the Linear names are {', '.join(available)}"
            )
    uses = Counter(id(p) for m in model.modules() for p in m._parameters.values() if p is not None)
    for name, linear in linears:
        if name.rpartition(".")[2] in targets and uses[id(linear.weight)] > 1:
            raise ValueError(
                f"lora.apply: {name}'s weight is tied to another layer's (the token embedding, say), and merging "
                f"its adapter would change both; leave {name.rpartition('.')[2]!r} out of targets"
            )
    model.requires_grad_(False)
    adapted = []
    for name, linear in linears:
        parent_name, _, attr = name.rpartition(".")
        if attr in targets:
            setattr(_module(model, parent_name), attr, LoRALinear(linear, r=r, alpha=alpha, dropout=dropout))
            adapted.append(name)
    return adapted


def _module(model, dotted):
    """The sub-module of model at a dotted name ("" is the model itself)."""
    for part in dotted.split(".") if dotted else []:
        model = model._modules[part]
    return model


def adapters(model):
    """(dotted name, LoRALinear) for every adapter in the model."""
    return [(name, m) for name, m in model.named_modules() if isinstance(m, LoRALinear)]


def merge(model):
    """W += (alpha / r) B A in every adapter, which then computes the base path alone: the model runs
    at the plain model's cost, and its state (without A and B) is a plain model's checkpoint."""
    for name, m in adapters(model):
        if m.merged:
            raise ValueError(f"lora.merge: {name} is already merged")
        m.weight.in_place()[...] += m.delta()
        m.merged = True


def unmerge(model):
    """W -= (alpha / r) B A in every merged adapter: the base weights back, up to float rounding."""
    for name, m in adapters(model):
        if not m.merged:
            raise ValueError(f"lora.unmerge: {name} is not merged")
        m.weight.in_place()[...] -= m.delta()
        m.merged = False


def lora_state_dict(model):
    """name -> copy of each adapter's A and B: all that fine-tuning changed, a small file."""
    return {f"{name}.{p}": getattr(m, p).data.copy() for name, m in adapters(model) for p in ("A", "B")}


def load_lora_state_dict(model, state):
    """Copy adapters saved by lora_state_dict into an adapted model; the names must be exactly its adapters'."""
    own = lora_state_dict(model)
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise ValueError(f"load_lora_state_dict: missing {missing or 'nothing'}, unexpected {unexpected or 'nothing'}")
    model.load_state_dict(state, strict=False)
