"""Checking gradients against finite differences.

For an input x and a scalar L(x), the central difference
    dL/dx_i  ~  (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)
has error O(eps^2), and in float64 with eps = 1e-6 the rounding error is about 1e-10, so an
analytic gradient that disagrees by more than atol + rtol |numeric| is wrong, not imprecise.

A non-scalar output y is checked through L = sum(u * y) for a random u: the gradient of that L is
the vector-Jacobian product u^T J, which is exactly what backward(u) computes, and a wrong entry of
J changes it for almost every u.
"""

import numpy as np

from gradflow.engine.autograd import no_grad
from gradflow.engine.dtype import is_float
from gradflow.engine.tensor import Tensor


class GradcheckError(AssertionError):
    """An analytic gradient differs from the finite-difference one."""


def _float64(inputs):
    """float64 tensors are used as they are (so a model's own Parameters can be checked: each is
    perturbed in place and restored exactly); other float tensors become float64 copies."""
    out = []
    for x in inputs:
        if isinstance(x, Tensor) and is_float(x.dtype) and x.dtype != np.float64:
            out.append(Tensor(x.data.astype(np.float64), requires_grad=x.requires_grad))
        else:
            out.append(x)
    return out


def _output(fn, xs):
    y = fn(*xs)
    if not isinstance(y, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(y).__name__}")
    return y


def numerical_grad(fn, *inputs, eps=1e-6, grad_output=None):
    """Central-difference gradients of sum(grad_output * fn(*inputs)), in float64.

    Returns one array per input: the gradient for each Tensor that requires grad, None for the
    others. grad_output may be omitted when fn returns a single element.
    """
    xs = _float64(inputs)
    with no_grad():
        if grad_output is None:
            y = _output(fn, xs)
            if y.numel() != 1:
                raise ValueError(f"numerical_grad: fn returns shape {y.shape}: pass grad_output= of that shape")
            grad_output = np.ones(y.shape)
        u = np.asarray(grad_output, dtype=np.float64)

        def objective():
            return float((_output(fn, xs).data * u).sum())

        grads = []
        for x in xs:
            if not (isinstance(x, Tensor) and x.requires_grad):
                grads.append(None)
                continue
            g = np.zeros(x.shape)
            values = x._data  # the array itself, even while a graph saved it: each change is undone exactly
            for i in np.ndindex(x.shape):  # element by element, in place, whatever x's memory layout
                old = values[i]
                values[i] = old + eps
                up = objective()
                values[i] = old - eps
                down = objective()
                values[i] = old
                g[i] = (up - down) / (2 * eps)
            grads.append(g)
    return grads


def analytic_and_numerical(fn, *inputs, eps=1e-6, seed=0):
    """(index, analytic, numeric) for every input that requires grad, both in float64."""
    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        raise ValueError("gradcheck: no input requires grad; create the inputs with requires_grad=True")
    xs = _float64(inputs)
    checked = [(i, x) for i, x in enumerate(xs) if isinstance(x, Tensor) and x.requires_grad]
    previous = [x.grad for _, x in checked]  # the caller's gradients, put back afterwards
    for _, x in checked:
        x.grad = None
    y = _output(fn, xs)
    u = np.random.default_rng(seed).standard_normal(y.shape)
    if y.requires_grad:
        y.backward(u)
    analytic = [np.zeros(x.shape) if x.grad is None else x.grad.data for _, x in checked]
    for (_, x), g in zip(checked, previous):
        x.grad = g
    numeric = numerical_grad(fn, *xs, eps=eps, grad_output=u)
    return [(i, a, numeric[i]) for (i, _), a in zip(checked, analytic)]


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-4, seed=0):
    """True if backward's gradients match central differences for every input that requires grad.

    Raises GradcheckError naming the input, the worst element and both values otherwise.
    """
    for i, a, n in analytic_and_numerical(fn, *inputs, eps=eps, seed=seed):
        excess = np.abs(a - n) - (atol + rtol * np.abs(n))
        if (excess > 0).any() or not np.isfinite(a).all():
            worst = np.unravel_index(np.nanargmax(np.where(np.isfinite(a), excess, np.inf)), a.shape)
            raise GradcheckError(
                f"gradcheck: input {i} (shape {a.shape}), element {tuple(int(j) for j in worst)}: "
                f"analytic {a[worst]:.8g} vs numeric {n[worst]:.8g} "
                f"(abs error {abs(a[worst] - n[worst]):.3g}, allowed {atol + rtol * abs(n[worst]):.3g})"
            )
    return True
