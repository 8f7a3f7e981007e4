"""detect_anomaly(): the first op that makes a NaN or an inf is named, forward and backward."""

import contextlib
import inspect
import os

import numpy as np
import pytest

import gradflow as gf
from gradflow import nn
from gradflow.engine import anomaly
from gradflow.engine.anomaly import AnomalyError, detect_anomaly
from gradflow.engine.hooks import watchers
from gradflow.models.gpt import GPT, GPTConfig

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's overflow warnings: meant here

LEAF = "which no checked op made (a parameter, a tensor made by hand, or one made before detect_anomaly was on)"


def next_line():
    """file:line of the line after the caller's: the call the error should point at (the innermost
    line outside gradflow and models/, so in this file's modules, their line that made the op)."""
    # the path as user_line writes it: relative to the folder the test runs in, when the file is inside it
    here = os.path.relpath(__file__) if __file__.startswith(os.getcwd() + os.sep) else __file__
    return f"{here}:{inspect.currentframe().f_back.f_lineno + 1}"


def gpt():
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=4, n_head=2, n_embd=16, bias=False))
    ids = np.random.default_rng(0).integers(16, size=(2, 8))
    return model, ids


class Wrapped(nn.Module):
    """A module run after `inner`, calling `fn` on its output: how a bad op is put into block 2."""

    def __init__(self, inner, fn):
        super().__init__()
        self.inner, self.fn = inner, fn

    def forward(self, x):
        self.line = next_line()
        return self.fn(self.inner(x))


class Gate(nn.Module):
    """y = x * exp(s): a gate whose weight s is set too large for exp in float32 (exp(100) = inf)."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.s = inner, nn.Parameter(np.array([100.0], dtype=np.float32))

    def forward(self, x):
        self.line = next_line()
        return self.inner(x) * self.s.exp()


class Poison(gf.Function):
    """Finite in, NaN out: a bug in a custom op's forward."""

    @staticmethod
    def forward(ctx, x):
        y = x.copy()
        y[..., 0] = np.nan
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad


class NanGrad(gf.Function):
    """The identity forward, with a backward that returns NaN: a bug in a custom op's backward."""

    name = "nan_grad"

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, grad):
        return grad * np.nan


# --- forward ------------------------------------------------------------------------------------


def test_an_exp_overflowing_in_block_2_is_named_with_its_module_and_line():
    model, ids = gpt()
    model.blocks[2].ffn = gate = Gate(model.blocks[2].ffn)
    with detect_anomaly(), pytest.raises(AnomalyError) as e:
        model(ids, ids)
    assert str(e.value) == (
        f"detect_anomaly: forward: exp in blocks.2.ffn produced inf from finite inputs; input shapes (1,); "
        f"called at {gate.line}"
    )


def test_a_custom_op_making_nan_in_block_2_is_named_not_a_later_op():
    model, ids = gpt()
    model.blocks[2].ffn = wrapped = Wrapped(model.blocks[2].ffn, Poison.apply)
    with detect_anomaly(), pytest.raises(AnomalyError) as e:
        model(ids, ids)
    assert str(e.value) == (
        f"detect_anomaly: forward: poison in blocks.2.ffn produced NaN from finite inputs; input shapes (2, 8, 16); "
        f"called at {wrapped.line}"
    )
    with detect_anomaly(), gf.no_grad(), pytest.raises(AnomalyError) as e:
        model(ids, ids)  # evaluation is checked too, without module names: no_grad does not track them
    assert str(e.value) == (
        "detect_anomaly: forward: poison in a module not known (no_grad does not track modules) produced NaN from "
        f"finite inputs; input shapes (2, 8, 16); called at {wrapped.line}"
    )


def test_a_parameter_already_holding_nan_is_named_as_the_origin():
    model, ids = gpt()
    model.blocks[2].ffn.fc1.weight.data[3, 1] = np.nan
    with detect_anomaly(), pytest.raises(AnomalyError) as e:
        where = next_line()
        model(ids, ids)
    assert str(e.value) == (
        f"detect_anomaly: forward: linear in blocks.2.ffn.fc1 got NaN in its input 1 (blocks.2.ffn.fc1.weight of "
        f"shape (64, 16)), {LEAF}; input shapes (2, 8, 16), (64, 16), None; called at {where}"
    )


def test_a_nan_made_before_the_check_is_traced_to_its_op():
    x = gf.tensor([1.0, -1.0], requires_grad=True)
    y = x.log()  # log(-1) = NaN, unchecked: anomaly mode is off
    with detect_anomaly(), pytest.raises(AnomalyError) as e:
        where = next_line()
        y * 2.0
    assert str(e.value) == (
        "detect_anomaly: forward: mul outside any module got NaN in its input 0 (a tensor of shape (2,)), made by "
        f"log before detect_anomaly was on; input shapes (2,), (); called at {where}"
    )


def test_a_mask_of_minus_inf_is_allowed_but_a_nan_constant_is_not():
    x = gf.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    mask = np.array([[False, True, False]])
    with detect_anomaly():
        p = x.masked_fill(mask, -np.inf).softmax()  # -inf, then exp(-inf) = 0: meant, not an anomaly
        p.sum().backward()
        assert p.data[0, 1] == 0
        with pytest.raises(AnomalyError) as e:
            where = next_line()
            x.masked_fill(mask, np.nan)
    assert str(e.value) == (
        f"detect_anomaly: forward: masked_fill outside any module was given NaN as its argument value; input shapes "
        f"(1, 3); called at {where}"
    )


# --- backward -----------------------------------------------------------------------------------


def test_a_custom_backward_returning_nan_in_block_2_is_named_with_its_forward_line():
    model, ids = gpt()
    model.blocks[2].ffn = wrapped = Wrapped(model.blocks[2].ffn, NanGrad.apply)
    with detect_anomaly():
        _, loss = model(ids, ids)
        with pytest.raises(AnomalyError) as e:
            loss.backward()
    assert str(e.value) == (
        "detect_anomaly: backward: nan_grad in blocks.2.ffn returned NaN in the gradient of its input 0 (a tensor "
        f"of shape (2, 8, 16)) from a finite gradient of its output; input shapes (2, 8, 16); the op was called "
        f"at {wrapped.line}"
    )


def test_a_backward_outside_modules_and_a_forward_run_without_the_check():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    y = NanGrad.apply(x).sum()  # recorded with anomaly mode off: no line was noted
    with detect_anomaly(), pytest.raises(AnomalyError) as e:
        y.backward()
    assert str(e.value) == (
        "detect_anomaly: backward: nan_grad outside any module returned NaN in the gradient of its input 0 (a tensor "
        "of shape (2,)) from a finite gradient of its output; input shapes (2,); the op was called at a line not "
        "recorded (its forward ran without detect_anomaly)"
    )


def test_the_gradient_given_to_backward_is_checked():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    with detect_anomaly(), pytest.raises(AnomalyError) as e:
        (x * 2.0).backward(np.array([1.0, np.inf]))
    assert str(e.value) == "detect_anomaly: backward: the gradient given to backward() holds inf"


def test_finite_gradients_that_overflow_when_summed_are_named():
    x = gf.tensor([1e-30], dtype=np.float32, requires_grad=True)
    c = np.float32(3e38)  # each use's gradient, c, is finite; their sum is not (float32 ends at 3.4e38)
    with detect_anomaly():
        where = next_line()
        a = x * 1.0
        loss = (a * c).sum() + (a * c).sum()
        with pytest.raises(AnomalyError) as e:
            loss.backward()
    assert str(e.value) == (
        "detect_anomaly: backward: the gradients reaching the output of mul outside any module from its several "
        f"uses add up to inf (each was finite); the op was called at {where}"
    )


# --- on, off ------------------------------------------------------------------------------------


def test_a_finite_training_step_gives_the_same_numbers_with_and_without_the_check():
    losses, grads = [], []
    for on in (False, True):
        model, ids = gpt()
        with detect_anomaly() if on else contextlib.nullcontext():
            _, loss = model(ids, ids)
            loss.backward()
        losses.append(loss.item())
        grads.append([p.grad for p in model.parameters()])
    assert losses[0] == losses[1]
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


def anomaly_mode():
    """True while detect_anomaly's checks are among the engine's watchers."""
    return anomaly._CHECKS in watchers


def test_off_by_default_and_restored_after_an_error_nested_or_as_a_decorator():
    assert anomaly_mode() is False
    assert np.isnan((gf.tensor([0.0]) / 0.0).data[0])  # off: nothing is checked
    with pytest.raises(AnomalyError), detect_anomaly():
        gf.tensor([0.0]) / 0.0
    assert anomaly_mode() is False
    with detect_anomaly():
        with detect_anomaly():
            pass
        assert anomaly_mode() is True  # the inner block restores the outer's state
    assert anomaly_mode() is False

    @detect_anomaly()
    def divide(x):
        assert anomaly_mode() is True
        return x / 0.0

    with pytest.raises(AnomalyError, match="detect_anomaly: forward: div outside any module produced NaN"):
        divide(gf.tensor([0.0]))
    assert anomaly_mode() is False
    assert gf.detect_anomaly is detect_anomaly and issubclass(gf.AnomalyError, FloatingPointError)
