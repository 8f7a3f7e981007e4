"""gf.nn: Module registration, names, state dicts, modes, and the basic layers (gradchecked)."""

import numpy as np
import pytest

import gradflow as gf
from gradflow import nn


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(7, 4)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 4, bias=False)) for _ in range(2)])
        self.ln = nn.LayerNorm(4)
        self.head = nn.Linear(4, 7, bias=False)
        self.head.weight = self.wte.weight  # weight tying: one Parameter, two names

    def forward(self, ids):
        x = self.wte(ids)
        for block in self.blocks:
            x = x + block(x).gelu()
        return self.head(self.ln(x))


def test_dotted_names_in_assignment_order():
    names = [n for n, _ in Tied().named_parameters()]
    assert names == [
        "wte.weight",
        "blocks.0.0.weight",
        "blocks.0.0.bias",
        "blocks.0.1.weight",
        "blocks.1.0.weight",
        "blocks.1.0.bias",
        "blocks.1.1.weight",
        "ln.weight",
        "ln.bias",
    ]


def test_tied_weight_counts_once_but_is_saved_under_both_names():
    m = Tied()
    assert m.num_parameters() == 7 * 4 + 2 * (4 * 6 + 6 + 6 * 4) + 4 + 4
    sd = m.state_dict()
    assert "head.weight" in sd and "wte.weight" in sd
    np.testing.assert_array_equal(sd["head.weight"], sd["wte.weight"])


def test_state_dict_round_trip_and_copy_semantics():
    gf.manual_seed(0)
    a = Tied()
    gf.manual_seed(1)
    b = Tied()
    sd = a.state_dict()
    sd["ln.bias"][:] = 5.0  # a state dict is a copy: changing it leaves the model alone
    assert (a.ln.bias.data == 0).all()
    b.load_state_dict(a.state_dict())
    ids = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(a(ids).data, b(ids).data)


def test_load_state_dict_errors_list_names_and_shapes():
    m = Tied()
    sd = m.state_dict()
    del sd["ln.bias"]
    sd["extra.weight"] = np.zeros(3)
    sd["ln.weight"] = np.zeros(5)
    with pytest.raises(ValueError) as e:
        m.load_state_dict(sd)
    message = str(e.value)
    assert "ln.weight: checkpoint (5,), model (4,)" in message
    assert "missing: ln.bias" in message and "unexpected: extra.weight" in message


def test_load_state_dict_not_strict_reports_what_it_skipped():
    m = Tied()
    sd = m.state_dict()
    del sd["ln.bias"]
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert missing == ["ln.bias"] and unexpected == []


def test_train_eval_reach_every_module_and_dropout_obeys():
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    m.eval()
    assert not any(x.training for x in m.modules())
    x = gf.ones(4, 3)
    np.testing.assert_array_equal(m(x).data, m(x).data)
    m.train()
    assert all(x.training for x in m.modules())


def test_zero_grad():
    m = Tied()
    m(np.array([[1, 2]])).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_repr_shows_the_tree():
    text = repr(Tied())
    assert "(wte): Embedding(7, 4)" in text and "(0): Linear(4, 6, bias=True)" in text


def test_forgetting_super_init_is_a_clear_error():
    class Bad(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(RuntimeError, match="super\\(\\).__init__\\(\\)"):
        Bad()


def test_linear_layout_and_value():
    lin = nn.Linear(3, 2)
    assert lin.weight.shape == (2, 3) and lin.bias.shape == (2,)
    x = gf.randn(5, 3)
    np.testing.assert_allclose(lin(x).data, x.data @ lin.weight.data.T + lin.bias.data, rtol=1e-6)
    with pytest.raises(ValueError, match="Linear\\(3, 2\\): input has last size 4"):
        lin(gf.randn(5, 4))


def test_embedding_rejects_ids_outside_the_vocabulary():
    with pytest.raises(IndexError, match="id 9 is out of range for a vocabulary of 7"):
        nn.Embedding(7, 4)(np.array([1, 9]))


def test_whole_model_gradcheck_in_float64():
    gf.set_default_dtype(np.float64)
    try:
        gf.manual_seed(0)
        m = Tied()
        ids = np.array([[1, 2, 2], [0, 6, 3]])

        def loss(*params):  # the parameters are perturbed in place, so the model sees them
            return gf.functional.cross_entropy(m(ids).reshape(-1, 7), ids.reshape(-1))

        before = m.state_dict()
        m.ln.bias.grad = np.full(4, 7.0)
        assert gf.gradcheck(loss, *m.parameters())
        for name, value in m.state_dict().items():  # every weight restored exactly
            np.testing.assert_array_equal(value, before[name])
        np.testing.assert_array_equal(m.ln.bias.grad, np.full(4, 7.0))  # and the caller's gradient
    finally:
        gf.set_default_dtype(np.float32)


def test_recorded_ops_know_the_modules_they_ran_in():
    m = Tied()
    y = m(np.array([[1, 2]]))
    assert y.grad_fn.scope == (m, m.head)  # the head's matmul
    inner = y.grad_fn.inputs[0].grad_fn  # the final LayerNorm
    assert inner.scope == (m, m.ln)
    assert (gf.randn(2, requires_grad=True) * 2).grad_fn.scope == ()
