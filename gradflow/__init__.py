"""gradflow: a reverse-mode autograd engine on numpy, small enough to read, checked by finite differences.

import gradflow as gf
x = gf.tensor([[1.0, 2.0]], requires_grad=True)
y = (x @ gf.randn(2, 3)).relu().sum()
y.backward()
x.grad
"""

from . import functional, nn, ops, optim
from .anomaly import AnomalyError, detect_anomaly
from .autograd import Function, enable_grad, is_grad_enabled, no_grad
from .creation import (
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
from .dtype import get_default_dtype, set_default_dtype
from .functions import cat, maximum, minimum, split, stack, tril, triu, where
from .gradcheck import GradcheckError, gradcheck, numerical_grad
from .graph import draw_graph
from .kernels import kernels_in_use, use_kernels
from .profile import profile
from .rng import get_rng_state, manual_seed, set_rng_state
from .tensor import Tensor, matmul

__version__ = "0.1.0"

__all__ = [
    "AnomalyError", "Function", "GradcheckError", "Tensor", "arange", "cat", "detect_anomaly", "draw_graph",
    "enable_grad", "full", "full_like", "functional", "get_default_dtype", "get_rng_state",
    "gradcheck", "is_grad_enabled", "kernels_in_use", "manual_seed", "matmul", "maximum", "minimum", "nn", "no_grad",
    "numerical_grad", "ones", "ones_like", "ops", "optim", "profile", "rand", "rand_like", "randn", "randn_like",
    "set_default_dtype", "set_rng_state", "split", "stack", "tensor", "tril", "triu",
    "use_kernels", "where", "zeros", "zeros_like",
]  # fmt: skip
