"""gradflow: a reverse-mode autograd engine on numpy, small enough to read, checked by finite differences.

import gradflow as gf
x = gf.tensor([[1.0, 2.0]], requires_grad=True)
y = (x @ gf.randn(2, 3)).relu().sum()
y.backward()
x.grad

The package is layered; each folder may import only the ones listed before it:
engine (Tensor, Function, the backward walk, engine/ops: the plain tier) -> optim -> fast (tuned
kernels, for the ops and the optimizer's step) -> nn -> text, cuda, backends, utils -> pretrained
-> training, inference -> tools -> exercises -> cli (the only one that imports gradflow.models).
Start reading at engine/autograd.py.
"""

import sys
from math import e, inf, nan, pi  # PyTorch's constants: torch.pi, torch.inf, ...

from gradflow import amp, backends, cuda, distributed, fast, nn, onnx, optim, serialization, utils
from gradflow.amp import autocast
from gradflow.backends import compile, get_float32_matmul_precision, set_float32_matmul_precision
from gradflow.engine import autograd, kernels, ops
from gradflow.engine.anomaly import AnomalyError, detect_anomaly
from gradflow.engine.autograd import Function, enable_grad, is_grad_enabled, no_grad
from gradflow.engine.creation import (
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    arange,
    as_tensor,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    linspace,
    multinomial,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from gradflow.engine.device import device
from gradflow.engine.dtype import (
    bfloat16,
    bool_,
    finfo,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
)
from gradflow.engine.functions import (
    abs,
    all,
    allclose,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    bernoulli,
    bmm,
    broadcast_to,
    cat,
    ceil,
    chunk,
    clamp,
    clip,
    clone,
    cos,
    cumsum,
    dot,
    einsum,
    equal,
    exp,
    eye,
    flatten,
    flip,
    floor,
    gather,
    get_num_threads,
    histogram,
    index_select,
    inference_mode,
    is_tensor,
    isclose,
    log,
    log1p,
    log2,
    log10,
    log_softmax,
    logsumexp,
    masked_fill,
    masked_select,
    max,
    maximum,
    mean,
    min,
    minimum,
    mm,
    narrow,
    neg,
    nonzero,
    norm,
    normal,
    numel,
    outer,
    permute,
    pow,
    prod,
    reciprocal,
    relu,
    reshape,
    roll,
    round,
    rsqrt,
    scatter_add,
    set_grad_enabled,
    set_num_threads,
    sigmoid,
    sign,
    sin,
    softmax,
    sort,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    sum,
    t,
    tanh,
    tile,
    topk,
    transpose,
    tril,
    triu,
    unbind,
    unique,
    unsqueeze,
    var,
    where,
)
from gradflow.engine.gradcheck import GradcheckError, gradcheck, numerical_grad
from gradflow.engine.kernels import kernels_in_use, use_kernels
from gradflow.engine.rng import Generator, get_rng_state, initial_seed, manual_seed, set_rng_state
from gradflow.engine.serialize import load, save
from gradflow.engine.tensor import Tensor, matmul
from gradflow.nn import functional
from gradflow.tools.accumulation import warn_grad_accumulation
from gradflow.tools.explore import explore
from gradflow.tools.graph import draw_graph
from gradflow.tools.profile import profile
from gradflow.version import __version__

# gf.functional is gradflow.nn.functional, importable by that name too (`import gradflow.functional as F`),
# as os.path is importable as a module of os
sys.modules[f"{__name__}.functional"] = functional

kernels.offer(fast.REPLACES)  # the engine runs on its own; the fast tier plugs its kernels in

# PyTorch's names of the dtypes, so that `dtype=torch.long` reads the same here (numpy's names above)
float = float32
double = float64
long = int64
int = int32
bool = bool_

__all__ = [
    "__version__", "AnomalyError", "arange", "argmax", "argmin", "autograd", "bool", "cat", "detect_anomaly",
    "double", "draw_graph", "enable_grad", "explore", "float", "float32", "float64", "from_numpy", "full", "full_like",
    "Function", "functional", "get_default_dtype", "get_rng_state", "gradcheck", "GradcheckError", "int",
    "int32", "int64", "is_grad_enabled", "kernels_in_use", "load", "long", "manual_seed", "matmul", "maximum",
    "minimum", "multinomial", "nn", "no_grad", "numel", "numerical_grad", "ones", "ones_like", "ops", "optim",
    "profile", "rand", "rand_like", "randint", "randn", "randn_like", "save", "set_default_dtype",
    "set_rng_state", "split", "stack", "Tensor", "tensor", "topk", "tril", "triu", "use_kernels",
    "warn_grad_accumulation", "where", "zeros", "zeros_like",
    # PyTorch's functions of tensors (torch.tanh(x) is x.tanh()), factories and constants
    "abs", "allclose", "bmm", "chunk", "clamp", "clip", "clone", "cos", "cumsum", "e", "einsum", "exp", "flatten",
    "flip", "gather", "inf", "inference_mode", "linspace", "log", "log_softmax", "logsumexp", "masked_fill", "max",
    "mean", "min", "nan", "neg", "norm", "unique",
    "outer", "permute", "pi", "pow", "randperm", "relu", "reshape", "roll", "rsqrt", "scatter_add", "sigmoid",
    "sin", "softmax", "sort", "sqrt", "squeeze", "std", "sum", "tanh", "transpose", "unsqueeze", "var",
    # the CPU-only device surface: devices, GPU questions answered, mixed precision off, data loading
    "amp", "autocast", "backends", "bfloat16", "cuda", "device", "distributed", "empty", "empty_like", "float16",
    "Generator", "get_float32_matmul_precision", "half", "set_float32_matmul_precision", "utils", "compile",
    "as_tensor",
    # the rest of PyTorch's tensor surface: math, matrices, picking, draws, grad modes, threads
    "all", "amax", "amin", "any", "argsort", "bernoulli", "broadcast_to", "ceil", "dot", "equal", "eye", "floor",
    "get_num_threads", "index_select", "is_tensor", "isclose", "log10", "log1p", "log2", "masked_select", "mm",
    "normal", "prod", "reciprocal", "round", "set_grad_enabled", "set_num_threads", "sign", "square", "t", "tile",
    "unbind", "finfo", "iinfo", "int8", "int16", "uint8", "nonzero", "narrow",
    # PyTorch's typed constructors: torch.LongTensor([[1, 2]]), torch.FloatTensor(2, 3)
    "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor", "IntTensor", "LongTensor",
    "ShortTensor",
    # what real programs import beside the model code: torch.onnx (refusing), torch.histogram
    "onnx", "histogram",
    # torch.initial_seed: the seed gradflow's generator was last started from
    "initial_seed",
    # torch.serialization: what a weights-only load allows (torch.serialization.safe_globals([...]))
    "serialization",
]  # fmt: skip
