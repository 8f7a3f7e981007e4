"""The exercises, in the order a learner does them: each uses only what the ones before it built.

Every exercise is one piece of gradflow's own code (pieces.Piece), a check (checks.OnTable for a
piece that runs inside backward, a function of behaviour.py for the others), what the learner is
given around the blank, and one paragraph saying what to write.
"""

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gradflow.engine import autograd, grad_norm, ops
from gradflow.engine.ops import attention, reduce
from gradflow.engine.tensor import Tensor
from gradflow.exercises import behaviour, mistakes
from gradflow.exercises.checks import ONE_ROW, OPERANDS_OF_ONE_SHAPE, ROWS, TWO_D, OnTable
from gradflow.exercises.hints import FORWARD, HINTS
from gradflow.exercises.pieces import Piece
from gradflow.inference.generate import filter_probs, sample
from gradflow.nn import functional as F
from gradflow.nn.kv_cache import KVCache
from gradflow.optim import adam
from gradflow.optim.adam import Adam
from gradflow.optim.schedule import WarmupCosine
from gradflow.text import batches, bpe

TRACKS = ("autograd basics", "tensor ops and broadcasting", "fused ops", "layers", "training", "text", "sampling")
CAPSTONE_TRACKS = TRACKS[: TRACKS.index("training") + 1]  # the pieces a training run is made of


@dataclass(frozen=True)
class Exercise:
    name: str
    track: str
    title: str
    piece: Piece
    task: str  # what to write, for the top of the learner's file
    check: Callable  # (piece, learner) -> what was checked, in words; raises diagnose.Failed
    given: tuple = ()  # gradflow's code around the blank, shown in the file (the piece's class without it)

    @property
    def hints(self):
        """(the idea, the shape of the answer, the formula): what `gradflow exercises hint` gives, in turn."""
        return HINTS[self.name]

    @property
    def states(self):
        """For a backward, its forward and what to find, which the learner's file shows in place of the op's
        docstring (that holds the derivation, the exercise itself); None for the other pieces."""
        return FORWARD.get(self.name)


def _backward(op, title, task, check, name=None, given=None):
    name = name or f"{op.name}_backward"
    return Exercise(name, None, title, Piece(op, "backward"), task, check, (op,) if given is None else given)


def _track(track, *exercises):
    return [Exercise(e.name, track, e.title, e.piece, e.task, e.check, e.given) for e in exercises]


def _ties():
    """a row with a tie for the max: [1, 3, 3]"""
    return Tensor([[1.0, 3.0, 3.0], [0.0, -1.0, 2.0]], requires_grad=True).max(axis=1).sum()


def _square_logits():
    """5 rows over 5 classes, where an (N,) weight times an (N, C) array is no error"""
    z = Tensor(np.random.default_rng(5).standard_normal((5, 5)), requires_grad=True)
    return F.cross_entropy(z, np.array([2, 0, 4, 1, 2]))


EXERCISES = (
    *_track(
        "autograd basics",
        _backward(
            ops.Add,
            "Add.backward: a sum passes its gradient on",
            "Return (dL/da, dL/db) given g = dL/dz.",
            OnTable(("add", "radd")),
        ),
        _backward(
            ops.Mul,
            "Mul.backward: the product rule",
            "Return (dL/da, dL/db). Return None for an input whose ctx.needs_input_grad is False, or compute it "
            "anyway: the engine drops it.",
            OnTable(("mul", "rmul"), mistakes=mistakes.MUL),
        ),
        Exercise(
            "unbroadcast",
            None,
            "unbroadcast: summing a gradient back to its input's shape",
            Piece(autograd, "unbroadcast"),
            "When a (1, 4) tensor meets a (3, 4) one, its row is copied three times, so the gradient reaching it "
            "is the sum over the copies. Sum `grad` over the axes broadcasting added or stretched, so that the "
            "result has exactly `shape`. The engine calls it for every op's every input.",
            OnTable(("add", "sub", "mul", "div", "matmul", "where", "expand", "repeat"), OPERANDS_OF_ONE_SHAPE),
            (autograd._input_grad,),
        ),
        Exercise(
            "topological_order",
            None,
            "topological_order: the order backward visits the nodes in",
            Piece(autograd, "topological_order"),
            "Return every node reachable from `root` (through node.inputs, each a Tensor or None, and their "
            ".grad_fn), the root first, each node before the nodes that made its inputs, so that a node runs "
            "only when every gradient of its output has arrived. Without recursion: a chain of 3000 ops must "
            "work.",
            behaviour.topological_order,
            (autograd.backward,),
        ),
        _backward(ops.Exp, "Exp.backward: the function that is its own derivative", "Return dL/dx.", OnTable(("exp",))),
        _backward(ops.Log, "Log.backward", "Return dL/dx.", OnTable(("log",))),
        _backward(ops.Div, "Div.backward: the quotient rule", "Return (dL/da, dL/db).", OnTable(("div", "rtruediv"))),
        _backward(
            ops.Tanh,
            "Tanh.backward: from the saved output",
            "Return dL/dx from y = tanh(x), saved by forward.",
            OnTable(("tanh",)),
        ),
    ),
    *_track(
        "tensor ops and broadcasting",
        Exercise(
            "sum_backward",
            None,
            "Sum with axis and keepdims: spread the gradient back",
            Piece(reduce, "spread"),
            "Sum.backward, Mean.backward and Max.backward all call spread: give the gradient of the reduced "
            "tensor back the axes the reduction removed (unless keepdims kept them), then broadcast it to the "
            "input's shape. grad has the reduced shape (`shape` without the axes in `axis`, or with them as size "
            "1 when keepdims); the result has `shape`. `axis` is a tuple of non-negative axes.",
            OnTable(("sum", "mean", "max")),
            (reduce.Sum,),
        ),
        _backward(
            ops.Mean,
            "Mean.backward",
            "Return dL/dx; ctx.n is the number of elements each mean averages.",
            OnTable(("mean",)),
        ),
        _backward(
            ops.Reshape,
            "Reshape.backward",
            "Return dL/dx.",
            OnTable(("reshape", "view", "flatten", "squeeze", "unsqueeze")),
        ),
        _backward(
            ops.Permute,
            "Permute.backward: the inverse permutation",
            "Return dL/dx: g's axes put back in x's order.",
            OnTable(("permute", "transpose", "swapaxes", "T")),
        ),
        _backward(
            ops.Matmul,
            "Matmul.backward, with batches and vectors",
            "Return (dL/dA, dL/dB). Batch axes broadcast (the engine sums them back); a 1-D operand is a row "
            "or a column whose axis is gone from C.",
            OnTable(("matmul",), TWO_D),
        ),
        Exercise(
            "max_backward",
            None,
            "Max.backward (Min's too): the gradient goes to the largest",
            Piece(reduce._Extreme, "backward", "Max.backward"),
            "Return dL/dx. Mind the ties: a row [1, 3, 3] has its max twice.",
            OnTable(("max", "min"), extra=(_ties,)),
            (reduce._Extreme, reduce.Max),
        ),
    ),
    *_track(
        "fused ops",
        _backward(
            ops.Softmax,
            "Softmax.backward",
            "Return dL/dx along ctx.axis, from the saved y.",
            OnTable(("softmax",), ONE_ROW, mistakes=mistakes.SOFTMAX),
        ),
        _backward(
            ops.LogSoftmax,
            "LogSoftmax.backward",
            "Return dL/dx along ctx.axis, from the saved y.",
            OnTable(("log_softmax",), ONE_ROW),
        ),
        _backward(
            ops.LayerNorm,
            "LayerNorm.backward",
            "Return (dL/dx, dL/dw, dL/db); w and b may be None.",
            OnTable(("layer_norm",), ROWS, model=True, mistakes=mistakes.LAYER_NORM),
        ),
        _backward(
            ops.RMSNorm,
            "RMSNorm.backward",
            "Return (dL/dx, dL/dw); w may be None.",
            OnTable(("rms_norm",)),
            name="rms_norm_backward",
        ),
        _backward(
            ops.Gelu,
            "Gelu.backward (GPT-2's tanh form)",
            "Return dL/dx from the saved x and tanh(u).",
            OnTable(("gelu", "F.gelu approximate=tanh"), model=True),
        ),
        Exercise(
            "causal_mask",
            None,
            "causal_mask: who may attend to whom",
            Piece(attention, "causal_mask"),
            "Return the (tq, tk) boolean mask, True where query i may see key j. The queries are the last tq of "
            "the tk positions (a KV cache holds the earlier ones).",
            OnTable(("attention causal",), backward_side=False),
            (attention.allowed_keys,),
        ),
        _backward(
            ops.ScaledDotProductAttention,
            "attention's backward",
            "Return (dq, dk, dv), and dbias when the bias was given (ctx.needs_input_grad has 4 entries then).",
            OnTable(("attention",), model=True, mistakes=mistakes.ATTENTION),
            name="attention_backward",
        ),
    ),
    *_track(
        "layers",
        _backward(
            ops.Linear,
            "Linear.backward: y = x W^T + b",
            "Return (dL/dx, dL/dW, dL/db); b may be None.",
            OnTable(("linear",), model=True),
        ),
        _backward(
            ops.Embedding,
            "Embedding.backward: a token used twice",
            "Return dL/dW.",
            OnTable(("embedding",), model=True),
        ),
        _backward(
            ops.Rope,
            "Rope.backward: the inverse rotation",
            "Return dL/dx (a one-element tuple, or the array).",
            OnTable(("rope",)),
        ),
    ),
    *_track(
        "training",
        _backward(
            ops.CrossEntropy,
            "CrossEntropy.backward: the loss every model here trains on",
            "Return dL/dz for each reduction (mean, sum, none), rows of ignore_index getting none.",
            OnTable(("cross_entropy",), model=True, extra=(_square_logits,), mistakes=mistakes.CROSS_ENTROPY),
        ),
        Exercise(
            "adam_update",
            None,
            "Adam's step",
            Piece(adam, "adam_step"),
            "Update the parameter's array p in place from its gradient g, at step t (1 at the first step): the "
            "running averages m and v in place too, and v_max, the largest v so far, when it is not None (AMSGrad).",
            behaviour.adam_update,
            (Adam,),
        ),
        Exercise(
            "clip_grad_norm",
            None,
            "clip_grad_norm: one bad batch cannot throw the weights far",
            Piece(grad_norm, "clip_grad_norm"),
            "Scale every gradient by the same factor when their joint norm exceeds max_norm; return the norm.",
            behaviour.clip_grad_norm,
            (grad_norm.grad_norm,),
        ),
        Exercise(
            "warmup_cosine",
            None,
            "the learning-rate schedule: warmup, then cosine",
            Piece(WarmupCosine, "__call__"),
            "Return the learning rate at `step` (0-based).",
            behaviour.warmup_cosine,
            (WarmupCosine,),
        ),
        Exercise(
            "get_batch",
            None,
            "get_batch: windows of text and the next token of each",
            Piece(batches, "get_batch"),
            "Return (x, y): batch_size random windows of block_size ids, and the same windows moved on by one.",
            behaviour.get_batch,
        ),
    ),
    *_track(
        "text",
        Exercise(
            "merge_pair",
            None,
            "a BPE merge: replace every occurrence of a pair",
            Piece(bpe, "merge_pair"),
            'Replace each occurrence of `pair` inside a chunk by new_id, left to right ("a a a" becomes '
            '"aa a"), with numpy, and return the new ids and the mask of positions kept.',
            behaviour.merge_pair,
            (bpe.BPETokenizer.train,),
        ),
        Exercise(
            "merge_chunk",
            None,
            "BPE encoding: the merges replayed on one chunk",
            Piece(bpe.BPETokenizer, "merge_chunk"),
            "Merge the chunk's byte ids as training learned to.",
            behaviour.merge_chunk,
        ),
    ),
    *_track(
        "sampling",
        Exercise(
            "filter_probs",
            None,
            "temperature, top-k and top-p",
            Piece(inspect.getmodule(filter_probs), "filter_probs"),
            "Return the distribution sampling draws from: softmax(logits / T), the top-k kept, then the "
            "nucleus of top-p, renormalised.",
            behaviour.filter_probs,
            (sample,),
        ),
        Exercise(
            "kv_cache_append",
            None,
            "the KV cache: append this step's keys and values",
            Piece(KVCache, "append"),
            "Add this step's keys and values to the cache and return all of them so far. With gradients wanted, "
            "join them with cat; without, you may fill buffers in place (or use cat there too).",
            behaviour.kv_cache_append,
            (KVCache,),
        ),
    ),
)

BY_NAME = {e.name: e for e in EXERCISES}


def find(name):
    """The exercise called `name`, or a ValueError naming every exercise there is."""
    if name not in BY_NAME:
        raise ValueError(f"no exercise named {name!r}; the exercises: {', '.join(BY_NAME)}")
    return BY_NAME[name]
