"""gradflow: a reverse-mode autograd engine on numpy, small enough to read, checked by finite differences.

import gradflow as gf
x = gf.tensor([[1.0, 2.0]], requires_grad=True)
y = (x @ gf.randn(2, 3)).relu().sum()
y.backward()
x.grad

The package is layered; each folder may import only the ones listed before it:
engine (Tensor, Function, the backward walk, engine/ops: the plain tier) -> fast (tuned kernels)
-> nn -> optim -> text -> pretrained -> training, inference -> tools -> cli (the only one that
imports gradflow.models). Start reading at engine/autograd.py.
"""

from gradflow import fast, nn, optim
from gradflow.engine import autograd, kernels, ops
from gradflow.engine.anomaly import AnomalyError, detect_anomaly
from gradflow.engine.autograd import Function, enable_grad, is_grad_enabled, no_grad
from gradflow.engine.creation import (
    arange,
    full,
    full_like,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from gradflow.engine.dtype import get_default_dtype, set_default_dtype
from gradflow.engine.functions import cat, maximum, minimum, split, stack, tril, triu, where
from gradflow.engine.gradcheck import GradcheckError, gradcheck, numerical_grad
from gradflow.engine.kernels import kernels_in_use, use_kernels
from gradflow.engine.rng import get_rng_state, manual_seed, set_rng_state
from gradflow.engine.tensor import Tensor, matmul
from gradflow.nn import functional
from gradflow.tools.graph import draw_graph
from gradflow.tools.profile import profile
from gradflow.version import __version__

kernels.offer(fast.REPLACES)  # the engine runs on its own; the fast tier plugs its kernels in

__all__ = [
    "__version__", "AnomalyError", "arange", "autograd", "cat", "detect_anomaly", "draw_graph", "enable_grad",
    "full", "full_like", "Function", "functional", "get_default_dtype", "get_rng_state", "gradcheck",
    "GradcheckError", "is_grad_enabled", "kernels_in_use", "manual_seed", "matmul", "maximum", "minimum", "nn",
    "no_grad", "numerical_grad", "ones", "ones_like", "ops", "optim", "profile", "rand", "rand_like", "randn",
    "randn_like", "set_default_dtype", "set_rng_state", "split", "stack", "Tensor", "tensor", "tril", "triu",
    "use_kernels", "where", "zeros", "zeros_like",
]  # fmt: skip
