"""gf.warn_grad_accumulation: backward adding into a gradient left by an earlier pass is named, once per tensor."""

import warnings

import numpy as np
import pytest

import gradflow as gf


def model_and_optimizer():
    gf.manual_seed(0)
    model = gf.nn.Linear(3, 2)
    return model, gf.optim.SGD(model.parameters(), lr=0.1), gf.randn(4, 3)


def caught(loop):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loop()
    return [str(w.message) for w in seen]


def test_a_loop_without_zero_grad_is_named_once_per_parameter_at_the_users_line():
    model, optimizer, x = model_and_optimizer()
    with pytest.warns(UserWarning) as seen, gf.warn_grad_accumulation():
        for _ in range(3):
            model(x).sum().backward()
            optimizer.step()
    messages = [str(w.message) for w in seen]
    assert len(messages) == 2  # weight and bias, each once, though three passes summed
    assert messages[0] == (
        "backward adds to the gradient of weight of shape (2, 3) left by an earlier backward pass, and it was "
        "updated since, so the sum mixes gradients taken at different weights: call optimizer.zero_grad() "
        "before each backward pass, unless you sum gradients on purpose"
    )
    assert "bias of shape (2,)" in messages[1]
    assert all(w.filename == __file__ for w in seen)  # the user's loss.backward(), not gradflow's insides


def test_two_passes_without_an_update_say_so():
    model, _, x = model_and_optimizer()
    with gf.warn_grad_accumulation():
        model(x).sum().backward()
        messages = caught(lambda: model(x).sum().backward())
    assert len(messages) == 2 and all("no update came between them" in m for m in messages)


def test_no_warning_when_gradients_are_cleared_or_the_check_is_off():
    model, optimizer, x = model_and_optimizer()

    def cleared(set_to_none):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=set_to_none)
            model(x).sum().backward()
            optimizer.step()

    with gf.warn_grad_accumulation():
        assert caught(lambda: cleared(True)) == []
        assert caught(lambda: cleared(False)) == []  # zeroed in place: nothing left to add to
    optimizer.zero_grad()
    assert caught(lambda: [model(x).sum().backward() for _ in range(2)]) == []  # off outside the block
    once = model.weight.grad / 2
    with gf.warn_grad_accumulation():
        caught(lambda: model(x).sum().backward())
    np.testing.assert_allclose(model.weight.grad, 3 * once, rtol=1e-6)  # it warns; the sum is what backward computes


def test_a_parameter_used_twice_in_one_pass_is_not_an_accumulation():
    model, optimizer, x = model_and_optimizer()
    with gf.warn_grad_accumulation():
        messages = caught(lambda: (model(x) + model(2 * x)).sum().backward())
    assert messages == []
