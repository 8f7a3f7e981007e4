"""Activation functions as Modules, for nn.Sequential and PyTorch-style model code: each is one call to F.

They hold no parameters; `nn.GELU()` is GPT-2's tanh form, as F.gelu (approximate="none" gives
PyTorch's default, the exact erf form).
"""

from gradflow.engine.checks import spelling
from gradflow.nn import functional as F
from gradflow.nn.module import Module


class Identity(Module):
    """y = x (arguments to the constructor are accepted and ignored, as PyTorch's)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class ReLU(Module):
    """y = max(x, 0). inplace is accepted for PyTorch's sake and changes nothing: the result is the
    same, and x is left as it was because backward may need it (see F.relu)."""

    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return F.relu(x)


class LeakyReLU(Module):
    """y = x for x > 0, negative_slope x elsewhere (see F.leaky_relu); inplace changes nothing."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class GELU(Module):
    """y = x Phi(x): approximate="none" (exact, the default, as PyTorch's) or "tanh" (GPT-2's); see F.gelu."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in F.GELU_OPS:
            raise ValueError(f'GELU: approximate must be "tanh" or "none", got {approximate!r}')
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """y = x sigmoid(x). inplace is accepted for PyTorch's sake and changes nothing (see ReLU)."""

    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


class Tanh(Module):
    """y = tanh(x)"""

    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    """y = 1 / (1 + e^-x)"""

    def forward(self, x):
        return F.sigmoid(x)


class Softmax(Module):
    """y = softmax(x) along dim (PyTorch's name) or axis (numpy's), by default the last axis."""

    def __init__(self, dim=None, *, axis=None):
        super().__init__()
        self.dim = spelling("Softmax", "axis", axis, "dim", dim, -1)

    def forward(self, x):
        return F.softmax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """y = log softmax(x) along dim (or axis), by default the last axis."""

    def forward(self, x):
        return F.log_softmax(x, self.dim)
