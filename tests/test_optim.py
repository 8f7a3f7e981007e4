"""Optimizer steps against numbers computed by hand from PyTorch's formulas."""

import numpy as np
import pytest

import gradflow as gf
from gradflow.nn import Parameter


def run(opt_cls, grads, start=(1.0, -2.0), **kwargs):
    p = Parameter(np.array(start))
    opt = opt_cls([p], **kwargs)
    for g in grads:
        p.grad = np.array(g)
        opt.step()
    return p.data


def test_sgd_plain_and_with_weight_decay():
    np.testing.assert_allclose(run(gf.optim.SGD, [[0.5, -1.0]], lr=0.1), [0.95, -1.9])
    # g = grad + 0.1 p = [0.6, -1.2]
    np.testing.assert_allclose(run(gf.optim.SGD, [[0.5, -1.0]], lr=0.1, weight_decay=0.1), [0.94, -1.88])


def test_sgd_momentum_buffer_starts_at_the_first_gradient():
    # b1 = g1 = [0.5, -1];  p = [0.95, -1.9];  b2 = 0.9 b1 + g2 = [0.7, 1.1];  p = [0.88, -2.01]
    np.testing.assert_allclose(run(gf.optim.SGD, [[0.5, -1.0], [0.25, 2.0]], lr=0.1, momentum=0.9), [0.88, -2.01])


def test_adam_two_steps_by_hand():
    # step 1: m_hat = g, v_hat = g^2, so p moves lr |g| / (|g| + eps):  [0.900000002, -1.900000001]
    # step 2: m = [0.07, 0.11], v = [0.00031225, 0.004999]
    #         m_hat = m / 0.19 = [0.36842105, 0.57894737],  v_hat = v / 0.001999 = [0.15620310, 2.50075038]
    #         p -= 0.1 m_hat / (sqrt(v_hat) + 1e-8) = [0.09321796, 0.03661035]
    p = run(gf.optim.Adam, [[0.5, -1.0], [0.25, 2.0]], lr=0.1)
    np.testing.assert_allclose(p, [0.900000002 - 0.09321796, -1.900000001 - 0.03661035], rtol=1e-8)


def test_adam_l2_versus_adamw_decoupled_decay():
    # Adam: g = [0.5, -1] + 0.1 [1, -2] = [0.6, -1.2]; first step moves lr * sign(g)
    np.testing.assert_allclose(run(gf.optim.Adam, [[0.5, -1.0]], lr=0.1, weight_decay=0.1), [0.9, -1.9])
    # AdamW: p = p (1 - 0.1 * 0.1) = [0.99, -1.98], then the same Adam step
    np.testing.assert_allclose(run(gf.optim.AdamW, [[0.5, -1.0]], lr=0.1, weight_decay=0.1), [0.89, -1.88])


def test_parameter_groups_take_their_own_options():
    w, b = Parameter(np.array([1.0])), Parameter(np.array([1.0]))
    opt = gf.optim.AdamW([{"params": [w]}, {"params": [b], "weight_decay": 0.0}], lr=0.1, weight_decay=0.5)
    w.grad = b.grad = np.array([1.0])
    opt.step()
    np.testing.assert_allclose(w.data, [1.0 * (1 - 0.05) - 0.1])
    np.testing.assert_allclose(b.data, [0.9])


def test_float32_parameters_stay_float32():
    p = Parameter(np.array([1.0, 2.0], dtype=np.float32))
    opt = gf.optim.Adam([p])
    p.grad = np.array([0.1, 0.2], dtype=np.float32)
    opt.step()
    assert p.data.dtype == np.float32


def test_parameters_without_grad_are_skipped_and_zero_grad_clears():
    a, b = Parameter(np.array([1.0])), Parameter(np.array([1.0]))
    opt = gf.optim.SGD([a, b], lr=1.0)
    a.grad = np.array([1.0])
    opt.step()
    assert a.data[0] == 0.0 and b.data[0] == 1.0
    opt.zero_grad()
    assert a.grad is None


def test_bad_options_are_clear_errors():
    p = Parameter(np.array([1.0]))
    with pytest.raises(ValueError, match="Adam: betas must lie in"):
        gf.optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="SGD: lr must be a non-negative number"):
        gf.optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="empty parameter list"):
        gf.optim.SGD([])
    with pytest.raises(ValueError, match="unknown options \\['momentum'\\]"):
        gf.optim.Adam([{"params": [p], "momentum": 0.9}])


def test_a_parameter_given_twice_is_refused():
    w, b = Parameter(np.ones((4, 3))), Parameter(np.ones(4))
    message = "AdamW: a parameter of shape (4, 3) appears twice in the parameter list"
    with pytest.raises(ValueError) as e:  # in one group: it would take two steps per step
        gf.optim.AdamW([w, b, w])
    assert str(e.value) == message
    with pytest.raises(ValueError) as e:  # across groups: which group's options would apply?
        gf.optim.AdamW([{"params": [w, b]}, {"params": [w], "weight_decay": 0.0}])
    assert str(e.value) == message
    with pytest.raises(ValueError) as e:
        gf.optim.SGD([b, b])
    assert str(e.value) == "SGD: a parameter of shape (4,) appears twice in the parameter list"
    gf.optim.AdamW([w, Parameter(np.ones((4, 3)))])  # equal values, two parameters: fine


def test_a_step_counts_as_an_in_place_update():
    p = Parameter(np.array([1.0, 2.0]))
    opt = gf.optim.Adam([p])
    p.grad = np.array([0.1, 0.2])
    opt.step()
    opt.step()
    assert p.version == 2


def test_warmup_cosine_schedule_by_hand():
    s = gf.optim.WarmupCosine(max_lr=1.0, warmup=4, decay=12, min_lr=0.1)
    assert [s(t) for t in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert s(8) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway through the decay: cos(pi/2) = 0
    assert s(12) == s(100) == 0.1
    assert gf.optim.Constant(0.3)(999) == 0.3
    with pytest.raises(ValueError, match="warmup <= decay"):
        gf.optim.WarmupCosine(1.0, warmup=5, decay=2)


def test_clip_grad_norm_scales_the_joint_norm():
    a, b = Parameter(np.zeros(2)), Parameter(np.zeros(1))
    a.grad, b.grad = np.array([3.0, 0.0]), np.array([4.0])  # joint norm 5
    assert gf.optim.clip_grad_norm([a, b], max_norm=1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(np.r_[a.grad, b.grad], np.array([3.0, 0.0, 4.0]) / (5 + 1e-6))
    a.grad = np.array([0.3, 0.0])
    b.grad = np.array([0.4])
    assert gf.optim.clip_grad_norm([a, b], max_norm=1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(a.grad, [0.3, 0.0])  # under the limit: untouched


OPTIMIZERS = [lambda ps: gf.optim.AdamW(ps, lr=0.1), lambda ps: gf.optim.SGD(ps, lr=0.1, momentum=0.9)]


@pytest.mark.parametrize("make", OPTIMIZERS, ids=["AdamW", "SGD momentum"])
def test_optimizer_state_round_trip_continues_exactly(make):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(3) for _ in range(6)]

    def steps(p, opt, gs):
        for g in gs:
            p.grad = g.copy()
            opt.step()

    p1 = Parameter(np.ones(3))
    opt1 = make([p1])
    steps(p1, opt1, grads)

    p2 = Parameter(np.ones(3))
    opt2 = make([p2])
    steps(p2, opt2, grads[:3])
    p3 = Parameter(p2.data.copy())
    opt3 = make([p3])
    opt3.load_state_dict(opt2.state_dict())
    steps(p3, opt3, grads[3:])
    np.testing.assert_array_equal(p3.data, p1.data)


def test_optimizer_state_of_other_parameters_is_a_clear_error():
    opt = gf.optim.Adam([Parameter(np.ones(3))])
    opt.param_groups[0]["params"][0].grad = np.ones(3)
    opt.step()
    other = gf.optim.Adam([Parameter(np.ones(4))])
    with pytest.raises(ValueError, match=r"state 'm' of parameter 0 has shape \(3,\), the parameter has shape \(4,\)"):
        other.load_state_dict(opt.state_dict())


def test_schedule_and_clipping_errors():
    with pytest.raises(ValueError, match="need 0 <= min_lr <= max_lr"):
        gf.optim.WarmupCosine(1e-3, warmup=10, decay=100, min_lr=1e-2)
    with pytest.raises(ValueError, match="clip_grad_norm: max_norm must be positive, got 0"):
        gf.optim.clip_grad_norm([Parameter(np.zeros(2))], 0)
