"""Elementwise ops. Binary ops broadcast; the engine sums each gradient back to its input's shape.

Read after engine/autograd.py and before engine/ops/norm.py (README.md gives the reading order).
"""

import math

import numpy as np

from gradflow.engine.autograd import Function


class Add(Function):
    """z = a + b;  dL/da = g,  dL/db = g"""

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class Sub(Function):
    """z = a - b;  dL/da = g,  dL/db = -g"""

    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, grad):
        return grad, -grad


class Mul(Function):
    """z = a * b;  dL/da = g * b,  dL/db = g * a"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        da = grad * b if ctx.needs_input_grad[0] else None
        db = grad * a if ctx.needs_input_grad[1] else None
        return da, db


class Div(Function):
    """z = a / b;  dL/da = g / b,  dL/db = -g * a / b^2 = -g * z / b"""

    @staticmethod
    def forward(ctx, a, b):
        z = a / b
        ctx.save_for_backward(b, z)
        return z

    @staticmethod
    def backward(ctx, grad):
        b, z = ctx.saved_tensors
        da = grad / b if ctx.needs_input_grad[0] else None
        db = -grad * z / b if ctx.needs_input_grad[1] else None
        return da, db


class Pow(Function):
    """z = a ** b;  dL/da = g * b * a^(b-1),  dL/db = g * z * log(a)  (needs a > 0)"""

    @staticmethod
    def forward(ctx, a, b):
        z = a**b
        ctx.save_for_backward(a, b, z)
        return z

    @staticmethod
    def backward(ctx, grad):
        a, b, z = ctx.saved_tensors
        da = grad * b * a ** (b - 1) if ctx.needs_input_grad[0] else None
        db = grad * z * np.log(a) if ctx.needs_input_grad[1] else None
        return da, db


class Neg(Function):
    """y = -x;  dL/dx = -g"""

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        return -grad


class Exp(Function):
    """y = exp(x);  dL/dx = g * exp(x) = g * y"""

    @staticmethod
    def forward(ctx, x):
        y = np.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


class Log(Function):
    """y = log(x);  dL/dx = g / x"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with np.errstate(divide="ignore"):  # log(0) = -inf, without numpy's warning, as PyTorch gives it
            return np.log(x)  # (a mask written as log(tril(ones(T, T))) holds 0 and -inf)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x


class Log1p(Function):
    """y = log(1 + x), exact where x is tiny (numpy's log1p: 1 + x would round to 1);  dL/dx = g / (1 + x)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.log1p(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (1 + x)


class Sqrt(Function):
    """y = sqrt(x);  dL/dx = g / (2 sqrt(x)) = g / (2 y)"""

    @staticmethod
    def forward(ctx, x):
        y = np.sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad / (2 * y)


class Rsqrt(Function):
    """y = 1 / sqrt(x) = x^(-1/2);  dL/dx = g * (-1/2) x^(-3/2) = -g * y^3 / 2"""

    @staticmethod
    def forward(ctx, x):
        y = 1 / np.sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return -0.5 * grad * y**3


class Abs(Function):
    """y = |x|;  dL/dx = g * sign(x)  (0 at x = 0)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.abs(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * np.sign(x)


class Tanh(Function):
    """y = tanh(x);  dL/dx = g * (1 - y^2)"""

    @staticmethod
    def forward(ctx, x):
        y = np.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


def sigmoid(x):
    """1 / (1 + e^-x), written so that e^|x| never overflows: e^-|x| / (1 + e^-|x|) for x < 0."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


class Sin(Function):
    """y = sin(x);  dL/dx = g * cos(x)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.sin(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * np.cos(x)


class Cos(Function):
    """y = cos(x);  dL/dx = -g * sin(x)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.cos(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return -grad * np.sin(x)


class Sigmoid(Function):
    """y = 1 / (1 + e^-x);  dL/dx = g * y * (1 - y)"""

    @staticmethod
    def forward(ctx, x):
        y = sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y * (1 - y)


class Relu(Function):
    """y = max(x, 0);  dL/dx = g * [x > 0]"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.maximum(x, 0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x > 0)


GELU_C = math.sqrt(2 / math.pi)  # a Python float, so float32 inputs stay float32
GELU_A = 0.044715


class Gelu(Function):
    """GELU, tanh approximation (GPT-2):  y = x h,  h = (1 + tanh(u)) / 2,  u = c (x + a x^3),
    with c = sqrt(2/pi), a = 0.044715.

    By the product rule dy/dx = h + x dh/dx, and since tanh' = 1 - tanh^2:
      dh/dx = (1 - tanh(u)^2) / 2 * du/dx,   du/dx = c (1 + 3 a x^2)
    so  dL/dx = g * (h + x (1 - tanh(u)^2) / 2 * c (1 + 3 a x^2)).

    Written with primitive ops: composed.gelu.
    """

    @staticmethod
    def forward(ctx, x):
        t = np.tanh(GELU_C * (x + GELU_A * x * x * x))  # tanh(u)
        ctx.save_for_backward(x, t)
        return x * (1 + t) / 2

    @staticmethod
    def backward(ctx, grad):
        x, t = ctx.saved_tensors
        h = (1 + t) / 2
        dh_dx = (1 - t * t) / 2 * GELU_C * (1 + 3 * GELU_A * x * x)
        return grad * (h + x * dh_dx)


def erf(x):
    """erf(x) = 2/sqrt(pi) * integral from 0 to x of e^(-t^2) dt, elementwise, to float64 accuracy.

    numpy has no erf; math.erf (the C library's) is correct to the last bit of a float64, one
    Python call per element: about 6 times as slow as GELU's tanh form on a (12, 64, 512) array.
    """
    return np.fromiter(map(math.erf, x.ravel().tolist()), np.float64, x.size).reshape(x.shape)


SQRT_2PI = math.sqrt(2 * math.pi)


class GeluErf(Function):
    """GELU, exact (PyTorch's default, approximate="none"):  y = x Phi(x),
    Phi(x) = (1 + erf(x / sqrt(2))) / 2, the standard normal's cumulative distribution.

    Phi' = phi, the normal density phi(x) = exp(-x^2 / 2) / sqrt(2 pi), so by the product rule
      dL/dx = g * (Phi(x) + x phi(x)).
    """

    @staticmethod
    def forward(ctx, x):
        cdf = ((1 + erf(x.astype(np.float64) / math.sqrt(2))) / 2).astype(x.dtype)  # Phi(x), rounded once
        ctx.save_for_backward(x, cdf)
        return x * cdf

    @staticmethod
    def backward(ctx, grad):
        x, cdf = ctx.saved_tensors
        pdf = np.exp(-x * x / 2) / SQRT_2PI  # phi(x)
        return grad * (cdf + x * pdf)


class Silu(Function):
    """SiLU (Swish with beta = 1):  y = x sigmoid(x);  dy/dx = s (1 + x (1 - s)),  s = sigmoid(x)

    Written with primitive ops: composed.silu.
    """

    @staticmethod
    def forward(ctx, x):
        s = sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        x, s = ctx.saved_tensors
        return grad * s * (1 + x * (1 - s))


class Maximum(Function):
    """z = max(a, b) elementwise;  g goes to the larger input, split in half on a tie (as PyTorch)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.maximum(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        share = (a > b) + 0.5 * (a == b)
        return grad * share, grad * (1 - share)


class Minimum(Function):
    """z = min(a, b) elementwise;  g goes to the smaller input, split in half on a tie (as PyTorch)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.minimum(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        share = (a < b) + 0.5 * (a == b)
        return grad * share, grad * (1 - share)


class Clip(Function):
    """y = min(max(x, lo), hi);  dL/dx = g where lo <= x <= hi, else 0 (either bound may be None)"""

    @staticmethod
    def forward(ctx, x, lo=None, hi=None):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        return np.clip(x, lo, hi)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        inside = np.ones(x.shape, dtype=bool)
        if ctx.lo is not None:
            inside &= x >= ctx.lo
        if ctx.hi is not None:
            inside &= x <= ctx.hi
        return grad * inside
