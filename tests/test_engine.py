"""The engine's rules: graph walk, accumulation, freeing, grad mode, detach, custom Functions."""

import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import gradflow as gf
from gradflow.engine.autograd import Function


def test_long_chain_backpropagates_without_recursion():
    x = gf.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y + 1.0
    y.backward()
    assert x.grad == pytest.approx(1.0)


def test_reused_tensor_gradients_accumulate():
    x = gf.tensor([1.0, -2.0, 3.0], dtype=np.float64, requires_grad=True)
    y = (x * x + x * 3 + x).sum()  # dy/dx = 2x + 4
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * x.data + 4)


def test_diamond_graph():
    x = gf.tensor(2.0, dtype=np.float64, requires_grad=True)
    a = x * 3  # a = 3x
    b = a.exp()  # b = e^(3x)
    c = a * b  # c = 3x e^(3x),  dc/dx = 3 e^(3x) + 9x e^(3x)
    c.backward()
    assert x.grad == pytest.approx(3 * np.exp(6) + 18 * np.exp(6))


def test_leaf_gradients_accumulate_across_backward_calls_until_reset():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [5.0, 5.0])
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_gradient_is_not_shared_between_leaves():
    a = gf.tensor([1.0, 2.0], requires_grad=True)
    b = gf.tensor([1.0, 2.0], requires_grad=True)
    (a + b).sum().backward()  # add hands the same upstream array to both inputs
    a.grad *= 10
    np.testing.assert_array_equal(b.grad, [1.0, 1.0])


def test_second_backward_through_freed_graph_raises():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        y.backward()


def test_saved_arrays_are_released_after_backward():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()
    y = (h * h).sum()
    y.backward()
    for node in (h.grad_fn, y.grad_fn.inputs[0].grad_fn):
        assert "_saved" not in node.__dict__
        with pytest.raises(RuntimeError, match="freed"):
            _ = node.saved_tensors
    assert h.grad_fn.inputs == (x,)  # the graph's structure stays, for drawing


def test_retain_graph_allows_a_second_backward():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad, 4 * x.data)


def test_backward_with_explicit_grad():
    x = gf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.backward(np.array([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(x.grad, [2.0, 0.0, -2.0])


def test_no_grad_records_and_saves_nothing():
    seen = []

    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            seen.append(ctx)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = gf.tensor([1.0, 2.0], requires_grad=True)
    with gf.no_grad():
        y = Square.apply(x)
        assert not gf.is_grad_enabled()
    assert gf.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert seen[-1].saved_tensors == ()
    z = Square.apply(x)
    assert z.grad_fn is seen[-1] and len(seen[-1].saved_tensors) == 1


def test_no_grad_as_decorator_and_enable_grad_inside():
    @gf.no_grad()
    def evaluate(x):
        return x * 2

    x = gf.tensor([1.0], requires_grad=True)
    assert not evaluate(x).requires_grad
    with gf.no_grad(), gf.enable_grad():
        assert (x * 2).requires_grad


def test_detach_cuts_the_graph():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    d = (x * 3).detach()
    assert d.is_leaf and not d.requires_grad
    y = (x * d).sum()  # d is a constant: dy/dx = d
    y.backward()
    np.testing.assert_array_equal(x.grad, [3.0, 6.0])


def test_requires_grad_propagates_only_from_inputs_that_need_it():
    a = gf.tensor([1.0])
    b = gf.tensor([1.0], requires_grad=True)
    assert not (a * 2).requires_grad
    assert (a * b).requires_grad
    assert (a * b).grad_fn.needs_input_grad == (False, True)


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    k = h * 2
    (k * h).sum().backward()
    np.testing.assert_allclose(h.grad, 4 * h.data)  # d(2h^2)/dh
    assert k.grad is None
    assert x.is_leaf and not h.is_leaf


def test_grad_is_a_tensor_as_in_pytorch_and_numpy_reads_it_as_an_array():
    w = gf.tensor([1.0, -2.0], requires_grad=True)
    assert w.grad is None
    (w * w).sum().backward()
    g = w.grad
    assert isinstance(g, gf.Tensor) and g.grad_fn is None and not g.requires_grad and g.dtype == np.float32
    assert_array_equal(np.asarray(g), [2.0, -4.0]) and assert_array_equal(g.data, [2.0, -4.0])
    assert g.norm().item() == pytest.approx(math.sqrt(20.0))
    assert isinstance(np.sqrt(np.abs(g)), np.ndarray)  # numpy's functions give arrays
    assert_array_equal((np.ones(2) * g).data, [2.0, -4.0])  # array * grad is a tensor op
    (w * w).sum().backward()
    assert w.grad is g  # a second backward adds into the same tensor
    assert_array_equal(g.data, [4.0, -8.0])
    w.grad.zero_()
    assert w.grad is g
    assert_array_equal(g.data, [0.0, 0.0])
    (3 * w).sum().backward()
    with gf.no_grad():
        w -= 0.5 * w.grad  # PyTorch's hand-written update, in place
    assert_array_equal(w.data, [-0.5, -3.5])
    w.data += -0.5 * w.grad  # makemore's lectures' form: p.data is the array, updated in place
    assert_array_equal(w.data, [-2.0, -5.0])
    w.grad = None
    assert w.grad is None
    w.grad = np.array([1.0, 1.0])  # an array is accepted, in w's dtype
    assert isinstance(w.grad, gf.Tensor) and w.grad.dtype == np.float32
    with pytest.raises(ValueError, match="grad: shape"):
        w.grad = np.zeros(3)


def test_broadcasting_is_undone_for_custom_functions_too():
    class Add(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad):
            return grad, grad  # full broadcast shape: the engine reduces it

    a = gf.randn(3, 1, requires_grad=True)
    b = gf.randn(4, requires_grad=True)
    Add.apply(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad, np.full((3, 1), 4.0))
    np.testing.assert_array_equal(b.grad, np.full(4, 3.0))


def test_custom_function_is_checked_by_gradcheck():
    class Cube(Function):
        """y = x^3;  dy/dx = 3 x^2"""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x**2

    class WrongCube(Cube):
        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x**2

    x = gf.randn(2, 3, dtype=np.float64, requires_grad=True)
    assert gf.gradcheck(Cube.apply, x)
    with pytest.raises(gf.GradcheckError, match=r"input 0 \(shape \(2, 3\)\), element \(\d, \d\): analytic"):
        gf.gradcheck(WrongCube.apply, x)


def test_numpy_array_on_the_left_gives_a_tensor():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    y = np.array([3.0, 4.0], dtype=np.float32) * x
    assert isinstance(y, gf.Tensor) and y.requires_grad


def test_integer_tensors_compute_but_never_require_grad():
    ids = gf.tensor([1, 2, 3])
    assert ids.dtype == np.int64
    assert (ids + 1).dtype == np.int64 and not (ids + 1).requires_grad


def test_topological_order_is_deterministic():
    def build():
        x = gf.tensor([1.0, 2.0], requires_grad=True)
        a, b = x.exp(), x.tanh()
        return ((a * b).sum() + a.sum()).grad_fn

    from gradflow.engine.autograd import topological_order

    assert [n.name for n in topological_order(build())] == [n.name for n in topological_order(build())]


def test_repr_is_readable():
    x = gf.tensor([[1.0, 2.0]], requires_grad=True)
    assert repr(x) == "tensor([[1., 2.]], requires_grad=True)"
    assert repr(x * 2) == "tensor([[2., 4.]], grad_fn=<mul>)"
    assert repr(gf.tensor([1, 2])) == "tensor([1, 2])"  # int64, PyTorch's default integer: not named


def test_tensor_attributes():
    x = gf.tensor(np.arange(6.0).reshape(2, 3))
    assert x.shape == (2, 3) and x.ndim == 2 and x.numel() == 6 and x.dtype == np.float64
    assert x.size() == (2, 3) and x.size(-1) == 3 and x.dim() == 2  # PyTorch's size: the shape
    assert x.T.shape == (3, 2) and np.shares_memory(x.numpy(), x.data) and x[1, 2].item() == 5.0
    assert len(x) == 2


def test_astype_casts_floats_in_the_graph_and_integers_outside_it():
    x = gf.tensor(np.array([1.7, -1.2], dtype=np.float32), requires_grad=True)
    y = x.astype(gf.float64)
    assert y.dtype == np.float64 and y.grad_fn.name == "cast" and x.astype(gf.float32) is x
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32 and np.allclose(x.grad, 2 * x.data)
    ids = x.astype(gf.int64)
    assert ids.tolist() == [1, -1] and ids.grad_fn is None and not ids.requires_grad
    with pytest.raises(TypeError, match=r"^astype: gradflow's tensors hold float32, float64, integers or bool, not"):
        x.astype(np.float16)


# Every op a Tensor method or a gradflow function records, beside a call that records it: x, y of shape
# (2, 3), m a mask of x's shape
RECORDS = [
    ("x + y", "Add"), ("1 - x", "Sub"), ("x * y", "Mul"), ("x / 2", "Div"), ("x ** 2", "Pow"),
    ("x @ y.T", "Matmul"), ("-x", "Neg"), ("x.exp()", "Exp"), ("x.abs().log()", "Log"),
    ("x.abs().sqrt()", "Sqrt"), ("x.abs().rsqrt()", "Rsqrt"), ("x.abs()", "Abs"), ("x.tanh()", "Tanh"),
    ("x.sigmoid()", "Sigmoid"), ("x.relu()", "Relu"), ("x.gelu()", "Gelu"), ("x.silu()", "Silu"),
    ("x.maximum(y)", "Maximum"), ("x.minimum(y)", "Minimum"), ("x.clip(0, 1)", "Clip"),
    ("x.sum(1)", "Sum"), ("x.mean()", "Mean"), ("x.var(dim=1)", "Var"), ("x.max()", "Max"),
    ("x.min(axis=0)", "Min"), ("x.logsumexp(1)", "LogSumExp"), ("x.softmax()", "Softmax"),
    ("x.log_softmax(dim=0)", "LogSoftmax"), ("x.view(-1)", "Reshape"), ("x.clone()", "Copy"),
    ("x.permute(1, 0)", "Permute"), ("x[:1].expand(2, 3)", "Expand"), ("x[0]", "Index"),
    ("x.masked_fill(m, 0.0)", "MaskedFill"), ("x.double()", "Cast"), ("gf.where(m, x, y)", "Where"),
    ("gf.cat([x, y])", "Cat"), ("gf.stack([x, y])", "Stack"),
]  # fmt: skip


@pytest.mark.parametrize("call, op", RECORDS)
def test_every_op_a_tensor_method_records_runs_the_kernel_of_the_tier_in_use(call, op):
    """A kernel the fast tier offers for any op serves the Tensor methods and gradflow's functions
    too (kernels.kernel), as it serves nn.functional."""
    from gradflow import fast
    from gradflow.engine import kernels, ops
    from gradflow.engine.ops import shape

    plain = getattr(ops, op, None) or getattr(shape, op)
    ran = []

    class Spy(plain):
        name = plain.name

        @staticmethod
        def forward(ctx, *arrays, **params):
            ran.append(plain)
            return plain.forward(ctx, *arrays, **params)

    x, y = gf.randn(2, 3, requires_grad=True), gf.randn(2, 3)
    kernels.offer({**fast.REPLACES, plain: Spy})
    try:
        with gf.use_kernels("fast"):
            out = eval(call, {"gf": gf}, {"x": x, "y": y, "m": x.data > 0})
    finally:
        kernels.offer(fast.REPLACES)
    assert ran == [plain] and type(out.grad_fn) is Spy
