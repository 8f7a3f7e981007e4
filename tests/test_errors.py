"""Bad input gives a clear error: the right type, and a message naming the op and the shapes or values at fault.

Errors are ValueError, IndexError or TypeError (RuntimeError for backward misuse), never an
AssertionError and never numpy's own message without the op's name in front of it.
"""

import re

import numpy as np
import pytest

import gradflow as gf
from gradflow.nn import functional as F


def shapes(*parts):
    """A regex matching the parts in order, with anything before and between them (parts taken literally)."""
    return "".join(".*" + re.escape(f"{p}") for p in parts)  # f"{shape}": (2, 3), as messages write it


# --- matmul ---------------------------------------------------------------------------------------


def test_matmul_inner_sizes_differ():
    with pytest.raises(ValueError, match=r"^matmul: \(3, 4\) @ \(5, 2\): inner sizes 4 and 5 differ$"):
        gf.ones(3, 4) @ gf.ones(5, 2)


@pytest.mark.parametrize(
    "a_shape, b_shape, k_a, k_b",
    [((3,), (4,), 3, 4), ((3,), (4, 2), 3, 4), ((2, 3), (4,), 3, 4), ((2, 2, 3), (4, 5), 3, 4)],
)
def test_matmul_inner_sizes_differ_for_every_rank(a_shape, b_shape, k_a, k_b):
    with pytest.raises(ValueError, match="^matmul: " + shapes(a_shape, "@", b_shape, f"inner sizes {k_a} and {k_b}")):
        gf.ones(*a_shape) @ gf.ones(*b_shape)


def test_matmul_inner_sizes_differ_with_numpy_operand_on_the_left():
    with pytest.raises(ValueError, match="^matmul: " + shapes((2, 3), "@", (4, 2), "inner sizes 3 and 4")):
        np.ones((2, 3)) @ gf.ones(4, 2)


@pytest.mark.parametrize("a, b", [(gf.ones(3), gf.tensor(2.0)), (gf.tensor(2.0), gf.ones(3))])
def test_matmul_with_a_0d_operand(a, b):
    with pytest.raises(ValueError, match=r"^matmul: .*at least 1 dimension.*" + shapes(a.shape, b.shape)):
        a @ b


def test_matmul_batch_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match=re.escape("batch dimensions (2,) and (3,) cannot be broadcast")):
        gf.ones(2, 3, 4) @ gf.ones(3, 4, 5)


def test_matmul_batch_error_names_the_operand_shapes():
    with pytest.raises(ValueError, match=r"^matmul: " + shapes((2, 3, 4), (3, 4, 5))):
        gf.ones(2, 3, 4) @ gf.ones(3, 4, 5)


# --- elementwise broadcasting ---------------------------------------------------------------------

BINARY = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b),
    ("pow", lambda a, b: a**b),
    ("maximum", gf.maximum),
    ("minimum", gf.minimum),
]


@pytest.mark.parametrize("name, op", BINARY, ids=[n for n, _ in BINARY])
def test_elementwise_broadcast_failure_names_op_shapes_and_axis(name, op):
    with pytest.raises(ValueError, match=f"^{name}: " + shapes((2, 3), (4, 3), "axis -2", "2 and 4")):
        op(gf.ones(2, 3), gf.ones(4, 3))


@pytest.mark.parametrize("name, op", BINARY[:4], ids=[n for n, _ in BINARY[:4]])
def test_elementwise_broadcast_failure_with_a_numpy_array_on_either_side(name, op):
    with pytest.raises(ValueError, match=f"^{name}: " + shapes((2, 5), (2, 3), "axis -1", "3 and 5")):
        op(np.ones((2, 5)), gf.ones(2, 3))
    with pytest.raises(ValueError, match=f"^{name}: " + shapes((2, 3), (2, 5), "axis -1", "3 and 5")):
        op(gf.ones(2, 3), np.ones((2, 5)))


def test_broadcast_failure_in_a_leading_axis_names_that_axis():
    with pytest.raises(ValueError, match="^mul: " + shapes((2, 1, 3), (5, 4, 3), "axis -3", "2 and 5")):
        gf.ones(2, 1, 3) * gf.ones(5, 4, 3)


# --- shape ops ------------------------------------------------------------------------------------


def test_reshape_to_the_wrong_number_of_elements():
    with pytest.raises(ValueError, match="^reshape: " + shapes((2, 3), "6 elements", (4, 2))):
        gf.ones(2, 3).reshape(4, 2)


def test_reshape_with_two_free_sizes():
    with pytest.raises(ValueError, match="^reshape: " + shapes((2, 3), (-1, -1))):
        gf.ones(2, 3).reshape(-1, -1)


def test_reshape_with_a_free_size_that_does_not_divide():
    with pytest.raises(ValueError, match="^reshape: " + shapes((2, 3), (-1, 4))):
        gf.ones(2, 3).reshape(-1, 4)


def test_reshape_with_a_float_size():
    with pytest.raises(TypeError, match=re.escape("(2.0, 3)")):
        gf.ones(2, 3).reshape(2.0, 3)


def test_cat_with_mismatched_shapes():
    with pytest.raises(ValueError, match="^cat: tensor 1 " + shapes((2, 4), (2, 3), "axis 0")):
        gf.cat([gf.ones(2, 3), gf.ones(2, 4)])


def test_cat_with_a_different_number_of_dims():
    with pytest.raises(ValueError, match="^cat: tensor 1 " + shapes((2,), (2, 3))):
        gf.cat([gf.ones(2, 3), gf.ones(2)])


def test_cat_along_an_axis_out_of_range():
    with pytest.raises(ValueError, match="^cat: axis 2 " + shapes((2, 3))):
        gf.cat([gf.ones(2, 3), gf.ones(2, 3)], axis=2)


@pytest.mark.parametrize("fn", [gf.cat, gf.stack])
def test_joining_an_empty_list(fn):
    with pytest.raises(ValueError, match=f"^{fn.__name__}: .*at least one tensor"):
        fn([])


def test_stack_with_different_shapes():
    with pytest.raises(ValueError, match="^stack: tensor 1 " + shapes((3, 2), "tensor 0", (2, 3))):
        gf.stack([gf.ones(2, 3), gf.ones(3, 2)])


def test_split_sizes_that_do_not_add_up():
    with pytest.raises(ValueError, match="^split: " + shapes([2, 2], "add up to 5", (5,))):
        gf.split(gf.ones(5), [2, 2])


def test_split_sizes_that_overshoot_along_axis_1():
    with pytest.raises(ValueError, match="^split: " + shapes([3, 3], "add up to 4", "axis 1", (2, 4))):
        gf.split(gf.ones(2, 4), [3, 3], axis=1)


def test_split_with_a_non_positive_size():
    with pytest.raises(ValueError, match="^split: .*positive.*0"):
        gf.split(gf.ones(5), 0)


def test_transpose_with_an_axis_out_of_range():
    with pytest.raises(ValueError, match="^transpose: axis 2 " + shapes((2, 3))):
        gf.ones(2, 3).transpose(0, 2)


@pytest.mark.parametrize("axes", [(0, 0), (0, 2), (0,), (0, 1, 2)])
def test_permute_with_axes_that_are_not_a_permutation(axes):
    with pytest.raises(ValueError, match="^permute: " + shapes(axes, (2, 3))):
        gf.ones(2, 3).permute(*axes)


def test_squeeze_an_axis_whose_size_is_not_1():
    with pytest.raises(ValueError, match="^squeeze: axis 0 " + shapes((2, 1, 3), "size 2")):
        gf.ones(2, 1, 3).squeeze(0)


def test_squeeze_an_axis_out_of_range():
    with pytest.raises(ValueError, match="^squeeze: axis 3 " + shapes((2, 3))):
        gf.ones(2, 3).squeeze(3)


def test_unsqueeze_an_axis_out_of_range():
    with pytest.raises(ValueError, match="^unsqueeze: axis 4 "):
        gf.ones(2, 3).unsqueeze(4)


def test_unsqueeze_out_of_range_names_the_tensor_shape():
    with pytest.raises(ValueError, match="^unsqueeze: axis 4 .*" + re.escape("(2, 3)")):
        gf.ones(2, 3).unsqueeze(4)


def test_expand_to_an_incompatible_shape():
    with pytest.raises(ValueError, match="^expand: " + shapes((2, 3), (2, 4), "axis 1", "size 3")):
        gf.ones(2, 3).expand(2, 4)


def test_expand_to_fewer_axes():
    with pytest.raises(ValueError, match="^expand: " + shapes((2, 3), (3,))):
        gf.ones(2, 3).expand(3)


# --- reductions -----------------------------------------------------------------------------------

REDUCTIONS = [
    ("sum", lambda x, axis: x.sum(axis=axis)),
    ("mean", lambda x, axis: x.mean(axis=axis)),
    ("max", lambda x, axis: x.max(axis=axis)),
    ("min", lambda x, axis: x.min(axis=axis)),
    ("var", lambda x, axis: x.var(axis=axis)),
    ("softmax", lambda x, axis: x.softmax(axis=axis)),
    ("log_softmax", lambda x, axis: x.log_softmax(axis=axis)),
    ("softmax", lambda x, axis: F.softmax(x, axis=axis)),
]


@pytest.mark.parametrize("name, op", REDUCTIONS, ids=[f"{n}{i}" for i, (n, _) in enumerate(REDUCTIONS)])
@pytest.mark.parametrize("axis", [2, -3])
def test_reduction_axis_out_of_range(name, op, axis):
    with pytest.raises(ValueError, match=f"^{name}: axis {axis} is out of range.*" + re.escape("(2, 3)")):
        op(gf.ones(2, 3), axis)


def test_logsumexp_axis_out_of_range_names_the_op():
    with pytest.raises(ValueError, match=r"^log_?sum_?exp: axis 5 .*" + re.escape("(2, 3)")):
        gf.ones(2, 3).logsumexp(axis=5)


def test_reduction_axis_out_of_range_for_a_0d_tensor():
    with pytest.raises(ValueError, match=r"^sum: axis 1 .*" + re.escape("()")):
        gf.tensor(1.0).sum(axis=1)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "var"])
def test_reduction_with_repeated_axes(name):
    with pytest.raises(ValueError, match=f"^{name}: axis " + shapes((0, -2), "repeats")):
        getattr(gf.ones(2, 3), name)(axis=(0, -2))


def test_reduction_axis_of_the_wrong_type():
    with pytest.raises(TypeError, match="^sum: axis must be an int.*'a'"):
        gf.ones(2, 3).sum(axis="a")
    with pytest.raises(TypeError, match=r"^softmax: axis must be an int.*\(0,\)"):
        gf.ones(2, 3).softmax(axis=(0,))


def test_reduction_with_a_float_axis_names_the_op():
    with pytest.raises(TypeError, match=r"^sum: axis must be an int.*1\.0"):
        gf.ones(2, 3).sum(axis=1.0)


def test_max_of_an_empty_axis_names_the_op():
    with pytest.raises(ValueError, match=r"^max: .*" + re.escape("(0, 3)")) as info:
        gf.zeros(0, 3).max(axis=0)
    assert info.value.__suppress_context__


# --- indexing, masked_fill, where -----------------------------------------------------------------


@pytest.mark.parametrize(
    "index, bad",
    [(5, 5), ((0, 7), 7), ([0, 5], 5), (np.array([1, -3]), -3), (gf.tensor([0, 2]), 2)],
    ids=["int", "tuple", "list", "negative-array", "tensor"],
)
def test_index_out_of_range(index, bad):
    x = gf.ones(2, 3)
    with pytest.raises(IndexError, match=f"^index: .*index {bad}.*" + re.escape("(2, 3)")):
        x[index]


def test_index_with_too_many_indices():
    with pytest.raises(IndexError, match=r"^index: .*too many indices.*" + re.escape("(2, 3)")):
        gf.ones(2, 3)[0, 0, 0]


def test_index_with_a_float_array_is_reraised_naming_the_op():
    x = gf.ones(4, 3, requires_grad=True)
    with pytest.raises(IndexError, match=r"^index: .*integer.*" + re.escape("(4, 3)")) as info:
        x[np.array([0.5])]
    assert info.value.__suppress_context__
    assert info.value.__cause__ is None


def test_index_with_a_float_tensor_is_reraised_naming_the_op():
    with pytest.raises(IndexError, match=r"^index: .*" + re.escape("(4,)")) as info:
        gf.ones(4)[gf.tensor([1.0, 2.0])]
    assert info.value.__suppress_context__


def test_masked_fill_with_a_non_boolean_mask():
    with pytest.raises(TypeError, match="^masked_fill: mask must be boolean, got float64"):
        gf.ones(2, 3).masked_fill(np.ones((2, 3)), 0.0)
    with pytest.raises(TypeError, match="^masked_fill: mask must be boolean, got int64"):
        gf.ones(2, 3).masked_fill(gf.tensor([1, 0, 1]), 0.0)


def test_masked_fill_with_a_mask_that_does_not_broadcast():
    with pytest.raises(ValueError, match="^masked_fill: " + shapes((4, 3), (2, 3))):
        gf.ones(2, 3).masked_fill(np.ones((4, 3), dtype=bool), 0.0)


def test_masked_fill_with_a_mask_bigger_than_the_tensor():
    with pytest.raises(ValueError, match="^masked_fill: mask of shape " + shapes((2, 2, 3), (2, 3))):
        gf.ones(2, 3).masked_fill(np.ones((2, 2, 3), dtype=bool), 0.0)


def test_masked_fill_with_a_non_scalar_value():
    with pytest.raises(TypeError, match="^masked_fill: value must be a number"):
        gf.ones(2, 3).masked_fill(np.ones((2, 3), dtype=bool), [1.0])


def test_where_with_a_non_boolean_cond():
    with pytest.raises(TypeError, match="^where: cond must be boolean, got float64"):
        gf.where(np.ones(3), gf.ones(3), gf.zeros(3))


def test_where_with_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match="^where: " + shapes((3,), (2,), (3,), "2 and 3")):
        gf.where(np.ones(3, dtype=bool), gf.ones(2), gf.zeros(3))


# --- backward -------------------------------------------------------------------------------------


def test_backward_on_a_non_scalar_without_grad():
    y = gf.ones(2, 3, requires_grad=True) * 2
    with pytest.raises(ValueError, match=r"^backward: .*one-element.*" + re.escape("(2, 3)")):
        y.backward()


@pytest.mark.parametrize("grad", [np.ones(3), gf.ones(3, 2)], ids=["array", "tensor"])
def test_backward_with_a_grad_of_the_wrong_shape(grad):
    y = gf.ones(2, 3, requires_grad=True) * 2
    with pytest.raises(ValueError, match="^backward: grad has shape " + shapes(grad.shape, (2, 3))):
        y.backward(grad)


def test_backward_on_a_tensor_that_does_not_require_grad():
    with pytest.raises(RuntimeError, match="^backward: .*does not require grad"):
        gf.ones(2).sum().backward()


def test_backward_of_a_result_made_under_no_grad():
    x = gf.ones(2, requires_grad=True)
    with gf.no_grad():
        y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="^backward: .*does not require grad"):
        y.backward()


def test_second_backward_through_a_freed_graph():
    x = gf.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="^backward: .*second time.*retain_graph=True"):
        y.backward()


def test_assigning_a_grad_of_the_wrong_shape():
    x = gf.ones(2, 3)
    with pytest.raises(ValueError, match="^grad: shape " + shapes((3,), (2, 3))):
        x.grad = np.ones(3)


def test_switching_off_requires_grad_on_a_non_leaf():
    y = gf.ones(2, requires_grad=True) * 2
    with pytest.raises(ValueError, match="^tensor: requires_grad.*leaf.*detach"):
        y.requires_grad = False


# --- making tensors, dtypes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: gf.tensor([1, 2], requires_grad=True),
        lambda: gf.Tensor(np.array([1, 2]), requires_grad=True),
        lambda: gf.arange(3, requires_grad=True),
        lambda: setattr(gf.tensor([1, 2]), "requires_grad", True),
    ],
    ids=["tensor", "Tensor", "arange", "setter"],
)
def test_integer_tensor_asked_for_requires_grad(make):
    with pytest.raises(TypeError, match=r"^tensor: requires_grad.*int64.*token ids"):
        make()


def test_bool_tensor_asked_for_requires_grad():
    with pytest.raises(TypeError, match=r"^tensor: requires_grad.*bool"):
        gf.tensor([True, False], requires_grad=True)


@pytest.mark.parametrize("data, kind", [(["a"], "<U1"), ([object()], "object"), (None, "object"), ([1j], "complex128")])
def test_tensor_of_data_that_is_not_numbers(data, kind):
    with pytest.raises(TypeError, match="^tensor: cannot make a tensor of " + re.escape(kind)):
        gf.tensor(data)


def test_tensor_of_a_ragged_list_names_the_op():
    with pytest.raises(ValueError, match="^tensor: "):
        gf.tensor([[1.0], [1.0, 2.0]])


def test_item_on_a_multi_element_tensor():
    with pytest.raises(ValueError, match=r"^item: .*one-element.*" + re.escape("(2,)")):
        gf.ones(2).item()


def test_len_of_a_0d_tensor():
    with pytest.raises(TypeError, match="0-d"):
        len(gf.tensor(1.0))


@pytest.mark.parametrize("dtype, name", [(np.int32, "int32"), (np.float16, "float16")])
def test_set_default_dtype_rejects_non_float32_64(dtype, name):
    before = gf.get_default_dtype()
    with pytest.raises(ValueError, match=f"^set_default_dtype: .*float32 or float64.*{name}"):
        gf.set_default_dtype(dtype)
    assert gf.get_default_dtype() == before


def test_negative_size_in_a_factory():
    with pytest.raises(ValueError, match=re.escape("(2, -1)") + ".*negative"):
        gf.zeros(2, -1)


def test_manual_seed_rejects_a_negative_or_float_seed():
    with pytest.raises(ValueError, match="^manual_seed: .*-1"):
        gf.manual_seed(-1)
    with pytest.raises(ValueError, match="^manual_seed: .*1.5"):
        gf.manual_seed(1.5)


# --- clip -----------------------------------------------------------------------------------------


def test_clip_with_no_bounds():
    with pytest.raises(ValueError, match="^clip: give min, max or both"):
        gf.ones(2).clip()


def test_clip_with_min_greater_than_max():
    with pytest.raises(ValueError, match="^clip: min 2.0 is greater than max 1.0"):
        gf.ones(2).clip(2.0, 1.0)


# --- cross_entropy, embedding, norms, dropout, attention -----------------------------------------

LOGITS = np.zeros((4, 3), dtype=np.float32)


@pytest.mark.parametrize("shape", [(2, 4, 3), (3,)])
def test_cross_entropy_logits_not_2d(shape):
    targets = np.zeros(shape[:-1], dtype=np.int64)
    with pytest.raises(
        ValueError, match=r"^cross_entropy: logits must be \(N, C\), got shape " + re.escape(str(shape))
    ):
        F.cross_entropy(gf.zeros(*shape), targets)


@pytest.mark.parametrize("targets", [np.zeros(4), gf.tensor([0.0, 1.0, 2.0, 0.0])], ids=["array", "tensor"])
def test_cross_entropy_targets_not_integer(targets):
    with pytest.raises(TypeError, match="^cross_entropy: targets must be integer class ids, got float"):
        F.cross_entropy(gf.tensor(LOGITS), targets)


@pytest.mark.parametrize("shape", [(3,), (4, 1)])
def test_cross_entropy_targets_of_the_wrong_shape(shape):
    with pytest.raises(ValueError, match="^cross_entropy: targets of shape " + shapes(shape, (4, 3))):
        F.cross_entropy(gf.tensor(LOGITS), np.zeros(shape, dtype=np.int64))


@pytest.mark.parametrize("bad", [3, -1, 7])
def test_cross_entropy_target_out_of_range(bad):
    with pytest.raises(IndexError, match=f"^cross_entropy: target {bad} is out of range for 3 classes"):
        F.cross_entropy(gf.tensor(LOGITS), np.array([0, 1, bad, 0]))


def test_cross_entropy_target_out_of_range_is_still_caught_next_to_ignored_rows():
    with pytest.raises(IndexError, match="^cross_entropy: target 5 is out of range for 3 classes"):
        F.cross_entropy(gf.tensor(LOGITS), np.array([-100, 5, 0, -100]), ignore_index=-100)


def test_cross_entropy_bad_reduction():
    with pytest.raises(ValueError, match="^cross_entropy: reduction must be .*'avg'"):
        F.cross_entropy(gf.tensor(LOGITS), np.array([0, 1, 2, 0]), reduction="avg")


@pytest.mark.parametrize("bad", [5, -1])
def test_embedding_id_out_of_range(bad):
    weight = gf.zeros(5, 3)
    with pytest.raises(IndexError, match=f"^embedding: id {bad} is out of range for a vocabulary of 5"):
        F.embedding(np.array([[0, 1], [bad, 2]]), weight)


def test_embedding_float_ids():
    with pytest.raises(TypeError, match="^embedding: ids must be integers, got float64"):
        F.embedding(np.array([0.0, 1.0]), gf.zeros(5, 3))


@pytest.mark.parametrize(
    "fn, name, param, shape",
    [
        (lambda x, p: F.layer_norm(x, (4,), p), "layer_norm", "weight", (3,)),
        (lambda x, p: F.layer_norm(x, (4,), gf.ones(4), p), "layer_norm", "bias", (2, 4)),
        (lambda x, p: F.rms_norm(x, (4,), p), "rms_norm", "weight", (5,)),
    ],
    ids=["layer_norm-weight", "layer_norm-bias", "rms_norm-weight"],
)
def test_norm_parameter_of_the_wrong_shape(fn, name, param, shape):
    x = gf.zeros(2, 4)
    with pytest.raises(ValueError, match=f"^{name}: {param} has shape " + shapes(shape, "expected", (4,), (2, 4))):
        fn(x, gf.ones(*shape))


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5])
def test_dropout_p_outside_0_1(p):
    with pytest.raises(ValueError, match=rf"^dropout: p must be in \[0, 1\), got {p}"):
        F.dropout(gf.ones(3), p)


def test_attention_with_mismatched_d():
    q, k, v = gf.zeros(2, 3, 4), gf.zeros(2, 5, 3), gf.zeros(2, 5, 6)
    with pytest.raises(ValueError, match="^attention: q " + shapes((2, 3, 4), "k", (2, 5, 3), "last size d")):
        F.scaled_dot_product_attention(q, k, v)


def test_attention_with_mismatched_key_counts():
    q, k, v = gf.zeros(2, 3, 4), gf.zeros(2, 5, 4), gf.zeros(2, 4, 6)
    with pytest.raises(ValueError, match="^attention: k " + shapes((2, 5, 4), "v", (2, 4, 6), "number of keys")):
        F.scaled_dot_product_attention(q, k, v)


def test_attention_with_a_non_boolean_mask():
    q, k, v = gf.zeros(3, 4), gf.zeros(5, 4), gf.zeros(5, 6)
    with pytest.raises(TypeError, match="^attention: mask must be boolean.*float64"):
        F.scaled_dot_product_attention(q, k, v, mask=np.ones((3, 5)))


def test_attention_with_a_mask_that_does_not_broadcast():
    q, k, v = gf.zeros(3, 4), gf.zeros(5, 4), gf.zeros(5, 6)
    with pytest.raises(ValueError, match="^attention: mask of shape " + shapes((3, 4), (3, 5))):
        F.scaled_dot_product_attention(q, k, v, mask=np.ones((3, 4), dtype=bool))


def test_attention_with_a_1d_query():
    with pytest.raises(ValueError, match=r"^attention: q must be \(\.\.\., T, d\), got shape \(4,\)"):
        F.scaled_dot_product_attention(gf.zeros(4), gf.zeros(5, 4), gf.zeros(5, 6))


# --- gradcheck and user-defined Functions ---------------------------------------------------------


def test_gradcheck_with_no_input_requiring_grad():
    with pytest.raises(ValueError, match="^gradcheck: no input requires grad"):
        gf.gradcheck(lambda a: a.sum(), gf.ones(2, dtype=np.float64))


class Double(gf.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2


class WrongShapeGrad(Double):
    @staticmethod
    def backward(ctx, grad):
        return np.ones(5)


class TooManyGrads(Double):
    @staticmethod
    def backward(ctx, grad):
        return grad * 2, grad * 2


class ListOfTwoGrads(Double):
    @staticmethod
    def backward(ctx, grad):
        return [grad * 2, grad * 2]


class Plus(gf.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b


class TooFewGrads(Plus):
    @staticmethod
    def backward(ctx, grad):
        return (grad,)


class OneArrayForTwoInputs(Plus):
    @staticmethod
    def backward(ctx, grad):
        return np.stack([grad, grad])  # shape (2, 3): one array, not one gradient per input


class FailingForward(gf.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x @ np.ones((7, 7))

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_function_backward_returning_a_wrongly_shaped_gradient():
    x = gf.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="^wrong_shape_grad.backward .*" + shapes((5,), "input 0", (3,))):
        WrongShapeGrad.apply(x).sum().backward()


def test_function_backward_returning_too_many_gradients():
    x = gf.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="^too_many_grads.backward returned 2 gradients for 1 input"):
        TooManyGrads.apply(x).sum().backward()


def test_function_backward_returning_too_few_gradients():
    a, b = gf.ones(3, requires_grad=True), gf.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="^too_few_grads.backward returned 1 gradients? for 2 inputs"):
        TooFewGrads.apply(a, b).sum().backward()


def test_function_backward_returning_a_list_of_two_gradients_for_one_input():
    x = gf.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="^list_of_two_grads.backward returned 2 gradients for 1 input"):
        ListOfTwoGrads.apply(x).sum().backward()


def test_function_backward_returning_one_array_for_two_inputs():
    a, b = gf.ones(3, requires_grad=True), gf.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match=r"^one_array_for_two_inputs.backward .*2 inputs?"):
        OneArrayForTwoInputs.apply(a, b).sum().backward()


def test_error_in_a_function_forward_is_reraised_naming_the_op():
    x = gf.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match=r"^failing_forward: .*" + re.escape("(3,)")) as info:
        FailingForward.apply(x)
    assert info.value.__suppress_context__
    assert info.value.__cause__ is None


# --- linear and rope (the fused ops behind Linear and RotaryEmbedding) ----------------------------


@pytest.mark.parametrize(
    "x, w, b, message",
    [
        ((2, 3), (4, 5), None, "linear: input " + shapes((2, 3), "(out, (3,))", (4, 5))),
        ((2, 3), (3,), None, "linear: input " + shapes((2, 3), (3,))),
        ((2, 3), (4, 3), (3,), "linear: bias has shape " + shapes((3,), "expected", (4,))),
    ],
)
def test_linear_with_mismatched_shapes(x, w, b, message):
    with pytest.raises(ValueError, match="^" + message):
        F.linear(gf.ones(*x), gf.ones(*w), None if b is None else gf.ones(*b))


@pytest.mark.parametrize(
    "x, cos, sin, message",
    [
        ((2, 5), (2, 2), (2, 2), "rope: x " + shapes((2, 5), "even last axis")),
        ((2, 4), (2, 2), (2, 3), "rope: x " + shapes((2, 4), (2, 2), (2, 3))),
        ((3, 4), (2, 2), (2, 2), "rope: cos and sin " + shapes((2, 2), "do not broadcast", (3, 4))),
    ],
)
def test_rope_with_mismatched_shapes(x, cos, sin, message):
    with pytest.raises(ValueError, match="^" + message):
        F.rope(gf.ones(*x), np.ones(cos), np.ones(sin))
