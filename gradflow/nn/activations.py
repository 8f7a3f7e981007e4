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


class Softplus(Module):
    """y = log(1 + e^(beta x)) / beta (x above threshold / beta), see F.softplus."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)


class LogSigmoid(Module):
    """y = log(sigmoid(x)), see F.logsigmoid."""

    def forward(self, x):
        return F.logsigmoid(x)


class ELU(Module):
    """y = x for x > 0, alpha (e^x - 1) elsewhere, see F.elu."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha)


class Mish(Module):
    """y = x tanh(softplus(x)), see F.mish."""

    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, x):
        return F.mish(x)


class Hardtanh(Module):
    """y = x clipped to [min_val, max_val], see F.hardtanh."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x):
        return F.hardtanh(x, self.min_val, self.max_val)


class ReLU6(Hardtanh):
    """y = min(max(x, 0), 6)"""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0)


class GLU(Module):
    """y = a sigmoid(b), a and b the halves of x along dim, see F.glu."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.glu(x, self.dim)
