"""Edits that would corrupt a recorded graph: in-place updates (version counters) and writes into saved arrays."""

import gc

import numpy as np
import pytest

import gradflow as gf
from gradflow import nn
from gradflow.engine.data_array import DataArray

STALE = (
    "backward: {op}'s saved input {i} ({what}) was modified in place after the forward pass (version {old}, "
    "now {new}); backward needs the values the forward pass used: run the forward pass again after changing "
    "them (optimizer.step() changes every parameter)"
)
HELD = (
    "tensor.data: {what} cannot be written in place: {op} saved it ({role}) for a backward pass that has not "
    "run; write after backward() (or once the graph is deleted), write into a copy, or assign a new array "
    "(x.data = ...)"
)


def linear_loss():
    gf.manual_seed(0)
    layer = nn.Linear(3, 4)
    x = gf.randn(2, 3, requires_grad=True)
    return layer, x, layer(x).sum()


# --- version counters ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", [gf.optim.SGD, gf.optim.Adam, gf.optim.AdamW])
def test_backward_after_a_step_on_a_retained_graph_is_refused(make):
    layer, x, loss = linear_loss()
    optimizer = make(layer.parameters(), lr=0.1)
    loss.backward(retain_graph=True)
    before = layer.weight.data.copy()
    optimizer.step()  # allowed, and it does update the weights
    assert not np.array_equal(layer.weight.data, before)
    assert layer.weight.version == 1
    with pytest.raises(RuntimeError) as e:
        loss.backward()
    assert str(e.value) == STALE.format(op="linear", i=1, what="weight of shape (4, 3)", old=0, new=1)


def test_each_step_counts_and_the_message_gives_both_versions():
    layer, x, loss = linear_loss()
    optimizer = gf.optim.SGD(layer.parameters(), lr=0.1)
    loss.backward(retain_graph=True)
    optimizer.step()
    optimizer.step()
    with pytest.raises(RuntimeError) as e:
        loss.backward()
    assert str(e.value) == STALE.format(op="linear", i=1, what="weight of shape (4, 3)", old=0, new=2)


def test_a_view_of_a_parameter_shares_its_version():
    w = nn.Parameter(np.ones((4, 3)))
    w.name = "w"
    x = gf.ones(2, 3)
    loss = (x @ w.T).sum()  # matmul saves the transposed view, whose memory is w's
    optimizer = gf.optim.SGD([w], lr=0.1)
    loss.backward(retain_graph=True)
    optimizer.step()
    with pytest.raises(RuntimeError) as e:
        loss.backward()
    what = "a tensor of shape (3, 4), a view of w of shape (4, 3)"
    assert str(e.value) == STALE.format(op="matmul", i=1, what=what, old=0, new=1)


def test_a_detached_tensor_shares_the_version_of_its_source():
    w = nn.Parameter(np.ones(3))
    x = gf.ones(3, requires_grad=True)
    loss = (x * w.detach()).sum()
    w.in_place()[...] = 5.0
    with pytest.raises(RuntimeError) as e:
        loss.backward()
    what = "a tensor of shape (3,), a view of a tensor of shape (3,)"
    assert str(e.value) == STALE.format(op="mul", i=1, what=what, old=0, new=1)


def test_retained_graph_used_correctly_and_accumulation_still_work():
    layer, x, loss = linear_loss()
    loss.backward(retain_graph=True)
    once = layer.weight.grad.clone()
    loss.backward()  # nothing changed between the two: the gradients add up
    np.testing.assert_allclose(layer.weight.grad, 2 * once)
    # gradient accumulation: two graphs, two backward passes, then one step
    optimizer = gf.optim.AdamW(layer.parameters(), lr=0.1)
    optimizer.zero_grad()
    for _ in range(2):
        layer(x).sum().backward()
    np.testing.assert_allclose(layer.weight.grad, 2 * once)
    optimizer.step()
    layer(x).sum().backward()  # a new forward pass after the step is fine
    assert layer.weight.version == 1


def test_an_op_that_saved_nothing_of_the_parameter_does_not_mind_the_step():
    w = nn.Parameter(np.ones(3))
    loss = (w + 1.0).sum()  # add saves nothing: its backward does not read w
    loss.backward(retain_graph=True)
    gf.optim.SGD([w], lr=0.1).step()
    loss.backward()
    np.testing.assert_allclose(w.grad, [2.0, 2.0, 2.0])


# --- writes into saved arrays -------------------------------------------------------------------


WRITES = {
    "x.data[...] = v": lambda a: a.__setitem__(Ellipsis, 0.0),
    "x.data *= 2": lambda a: a.__imul__(2.0),
    "ufunc out=": lambda a: np.multiply(a, 2.0, out=a),
    "ufunc.at": lambda a: np.add.at(a, (0, 0), 1.0),
    "np.copyto": lambda a: np.copyto(a, 0.0),
    "fill": lambda a: a.fill(0.0),
    "sort": lambda a: a.sort(),
    "a slice of it": lambda a: a[0].__setitem__(Ellipsis, 0.0),
    "its transpose": lambda a: a.T.__iadd__(1.0),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_writing_into_a_saved_weight_before_backward_is_refused(write):
    layer, x, loss = linear_loss()
    before = layer.weight.data.copy()
    with pytest.raises(RuntimeError) as e:
        write(layer.weight.data)
    assert str(e.value) == HELD.format(what="weight of shape (4, 3)", op="linear", role="its input 1")
    np.testing.assert_array_equal(layer.weight.data, before)  # nothing was written


def test_the_augmented_assignment_on_the_tensor_is_refused_too():
    layer, x, loss = linear_loss()
    with pytest.raises(RuntimeError) as e:
        x.data *= 2
    assert str(e.value) == HELD.format(what="a tensor of shape (2, 3)", op="linear", role="its input 0")


def test_a_saved_output_is_guarded():
    x = gf.tensor([0.0, 1.0], requires_grad=True)
    y = x.exp()  # exp's backward reads its output
    with pytest.raises(RuntimeError) as e:
        y.data[0] = 5.0
    assert str(e.value) == HELD.format(what="a tensor of shape (2,)", op="exp", role="its output")


def test_writes_are_allowed_again_once_the_graph_is_backwarded_or_deleted():
    layer, x, loss = linear_loss()
    early = layer.weight.data  # taken while the graph holds it
    loss.backward()
    layer.weight.data[0, 0] = 1.0  # backward freed what the graph saved
    assert type(layer.weight.data) is DataArray  # no longer guarded
    early[0, 1] = 3.0  # the view taken before lets go too
    assert layer.weight.data[0, 1] == 3.0
    loss = layer(x).sum()
    del loss
    gc.collect()
    layer.weight.data *= 2  # the graph is gone
    assert layer.weight.data[0, 0] == 2.0


def test_memory_held_by_two_graphs_stays_guarded_until_both_are_done():
    layer, x, first = linear_loss()
    second = layer(x).sum()
    second.backward()
    with pytest.raises(RuntimeError, match="weight of shape \\(4, 3\\) cannot be written in place: linear"):
        layer.weight.data[0, 0] = 1.0
    first.backward()
    layer.weight.data[0, 0] = 1.0


def test_a_weight_used_at_every_step_of_a_loop_stays_guarded_by_every_use():
    """One graph saves w a hundred times (the list of the nodes that saved it is pruned at 8, 16, 32, ...
    entries, dropping only finished graphs); finished graphs are forgotten, so the list stays short."""
    w = gf.tensor([0.9, 1.1], requires_grad=True)
    y = x = gf.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(100):
        y = y * w
    assert len(w._saved_by) == 100
    with pytest.raises(RuntimeError, match="a tensor of shape \\(2,\\) cannot be written in place: mul saved it"):
        w.data[0] = 1.0
    y.sum().backward()
    np.testing.assert_allclose(w.grad.data, 100 * np.array([0.9, 1.1]) ** 99 * [1.0, 2.0], rtol=1e-4)
    np.testing.assert_allclose(x.grad.data, np.array([0.9, 1.1]) ** 100, rtol=1e-4)
    w.data[0] = 0.9  # every use has run its backward
    for _ in range(100):
        (x * w).sum().backward()
    assert len(w._saved_by) <= 8


def test_a_retained_graph_keeps_its_arrays_guarded_until_it_is_freed():
    layer, x, loss = linear_loss()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError):
        layer.weight.data[0, 0] = 1.0
    loss.backward()
    layer.weight.data[0, 0] = 1.0


def test_reading_copying_and_replacing_a_guarded_array_work():
    layer, x, loss = linear_loss()
    w = layer.weight.data
    total = w + 1.0
    assert type(total) is np.ndarray and total.flags.writeable
    copy = w.copy()
    copy[0, 0] = 7.0  # a copy is the user's own
    assert type(copy) is np.ndarray
    old = w.copy()
    layer.weight.data = np.zeros((4, 3))  # replacing is allowed: the graph keeps the old array
    loss.backward()
    np.testing.assert_allclose(x.grad, np.ones((2, 4)) @ old)


def test_a_tensor_method_asked_of_a_guarded_array_names_the_difference():
    layer, x, loss = linear_loss()
    copy = layer.weight.data.clone()  # PyTorch's x.data.clone(): a tensor of the numbers (reading is allowed)
    assert type(copy) is gf.Tensor and np.array_equal(copy.data, layer.weight.data) and copy.grad_fn is None
    with pytest.raises(AttributeError, match=r"x.data is the tensor's numpy array in gradflow .* x.detach\(\).softmax"):
        layer.weight.data.softmax(0)
    assert not hasattr(layer.weight.data, "_no_such_thing") and np.array_equal(layer.weight.data.T.T, layer.weight.data)


def test_nothing_is_guarded_under_no_grad():
    layer, x = nn.Linear(3, 4), gf.randn(2, 3, requires_grad=True)
    with gf.no_grad():
        out = layer(x)
    layer.weight.data[0, 0] = 1.0
    assert out.grad_fn is None


def test_a_copied_or_pickled_tensor_is_free_of_the_graph_and_gradcheck_restores_what_it_perturbs():
    import copy
    import pickle

    layer, x, loss = linear_loss()
    for twin in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        twin.weight.data[0, 0] = 1.0  # its own memory: no graph holds it
    w = nn.Parameter(np.arange(3.0))  # float64: numerical_grad perturbs it in place, not a copy
    loss = (w * w).sum()  # mul saves w, and this graph is kept for backward below
    (dw,) = gf.numerical_grad(lambda w: (w * w * w).sum(), w)
    np.testing.assert_allclose(dw, 3 * np.arange(3.0) ** 2, atol=1e-6)
    np.testing.assert_array_equal(w.data, np.arange(3.0))  # every value put back
    loss.backward()  # so the graph saw no change
    np.testing.assert_array_equal(w.grad, 2 * np.arange(3.0))
