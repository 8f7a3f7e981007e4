"""gf.gradcheck and gf.numerical_grad."""

import numpy as np
import pytest

import gradflow as gf


def test_numerical_grad_matches_a_known_derivative():
    x = gf.tensor([0.5, 1.0, 2.0], dtype=np.float64, requires_grad=True)
    (g,) = gf.numerical_grad(lambda x: (x * x * x).sum(), x)
    np.testing.assert_allclose(g, 3 * x.data**2, rtol=1e-8)


def test_numerical_grad_skips_inputs_that_do_not_require_grad():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    c = gf.tensor([3.0, 4.0])
    gx, gc = gf.numerical_grad(lambda x, c: (x * c).sum(), x, c)
    np.testing.assert_allclose(gx, [3.0, 4.0], rtol=1e-6)
    assert gc is None


def test_numerical_grad_of_a_non_scalar_needs_grad_output():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="grad_output"):
        gf.numerical_grad(lambda x: x * 2, x)
    (g,) = gf.numerical_grad(lambda x: x * 2, x, grad_output=np.array([1.0, -1.0]))
    np.testing.assert_allclose(g, [2.0, -2.0], rtol=1e-8)


def test_gradcheck_works_in_float64_and_leaves_inputs_alone():
    x = gf.tensor([[0.3, -1.2], [2.0, 0.7]], requires_grad=True)  # float32
    before = x.data.copy()
    assert gf.gradcheck(lambda x: (x @ x).tanh(), x)
    assert x.data.dtype == np.float32 and (x.data == before).all() and x.grad is None


def test_gradcheck_error_names_input_element_and_values():
    wrong = gf.Function

    class LeakyWrong(wrong):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2 + (np.arange(grad.size).reshape(grad.shape) == 3)

    x = gf.randn(2, 3, dtype=np.float64, requires_grad=True)
    with pytest.raises(gf.GradcheckError) as info:
        gf.gradcheck(lambda c, x: c * LeakyWrong.apply(x), gf.tensor(1.0), x)
    message = str(info.value)
    assert "input 1 (shape (2, 3)), element (1, 0)" in message
    assert "analytic" in message and "numeric" in message


def test_gradcheck_tolerances_are_applied():
    x = gf.randn(3, dtype=np.float64, requires_grad=True)

    class SlightlyOff(gf.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, grad):
            return grad * (1 + 1e-3)

    with pytest.raises(gf.GradcheckError):
        gf.gradcheck(SlightlyOff.apply, x)
    assert gf.gradcheck(SlightlyOff.apply, x, atol=1e-2, rtol=1e-2)
