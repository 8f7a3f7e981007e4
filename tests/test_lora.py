"""LoRA adapters: gradients, the exact start from the base model, merging, saving, and training only the adapters."""

import numpy as np
import pytest

import gradflow as gf
from gradflow import nn
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.llama import Llama, LlamaConfig
from gradflow.nn import lora

LLAMA = LlamaConfig(vocab_size=13, n_layer=2, d_model=8, n_heads=2, n_kv_heads=1, d_ff=12)
IDS = np.array([[1, 4, 2, 7, 3], [5, 0, 9, 12, 6]])
TARGETS = np.array([[4, 2, 7, 3, 8], [0, 9, 12, 6, 1]])


def tiny_llama(dtype=np.float64, seed=0):
    gf.manual_seed(seed)
    return Llama(LLAMA, dtype=dtype).eval()


def randomize_adapters(model, seed=1):
    """B starts at zero, which hides A from every gradient and every output: give both values."""
    rng = np.random.default_rng(seed)
    for _, m in lora.adapters(model):
        m.A.data = rng.standard_normal(m.A.shape).astype(m.A.dtype)
        m.B.data = rng.standard_normal(m.B.shape).astype(m.B.dtype) * 0.1


def test_lora_linear_formula_and_gradcheck():
    gf.manual_seed(0)
    layer = nn.LoRALinear(nn.Linear(5, 4, dtype=np.float64), r=3, alpha=6)
    assert np.array_equal(layer.B.data, np.zeros((4, 3))) and layer.A.shape == (3, 5)
    layer.B.data = np.random.default_rng(0).standard_normal((4, 3))
    x = gf.tensor(np.random.default_rng(1).standard_normal((2, 3, 5)), requires_grad=True)
    W, b, A, B = layer.weight.data, layer.bias.data, layer.A.data, layer.B.data
    assert np.allclose(layer(x).data, x.data @ W.T + b + 2.0 * x.data @ A.T @ B.T)
    assert gf.gradcheck(lambda x, A, B: layer(x), x, layer.A, layer.B)
    layer(x).sum().backward()
    assert layer.weight.grad is None and layer.bias.grad is None
    assert layer.A.grad is not None and layer.B.grad is not None


def test_lora_linear_dropout_only_on_the_adapter_path():
    gf.manual_seed(0)
    layer = nn.LoRALinear(nn.Linear(6, 4, dtype=np.float64), r=2, dropout=0.5)
    x = gf.tensor(np.ones((3, 6)))
    base = x.data @ layer.weight.data.T + layer.bias.data
    assert np.allclose(layer(x).data, base)  # B = 0: no adapter path to drop from
    layer.B.data = np.ones((4, 2))
    assert not np.allclose(layer(x).data, layer.eval()(x).data)  # training draws a mask, eval does not


def test_lora_linear_rejects_bad_arguments():
    with pytest.raises(ValueError, match="LoRALinear: r must be a positive int, got 0"):
        nn.LoRALinear(nn.Linear(4, 4), r=0)
    with pytest.raises(TypeError, match="LoRALinear: base must be an nn.Linear, got Embedding"):
        nn.LoRALinear(nn.Embedding(4, 4))


@pytest.mark.parametrize("make", [tiny_llama, lambda: GPT(GPTConfig(13, 8, n_layer=2, n_head=2, n_embd=8)).eval()])
def test_adapted_model_starts_equal_to_the_base(make):
    model = make()
    before = model(IDS)[0].data
    adapted = lora.apply(model, targets=("q_proj", "v_proj"))
    layers = model.layers if hasattr(model, "layers") else model.blocks
    assert adapted == [f"{'layers' if hasattr(model, 'layers') else 'blocks'}.{i}.attn.{p}"
                       for i in range(2) for p in ("q_proj", "v_proj")]  # fmt: skip
    assert isinstance(layers[0].attn.q_proj, nn.LoRALinear) and isinstance(layers[0].attn.k_proj, nn.Linear)
    assert np.array_equal(model(IDS)[0].data, before)
    learned = [n for n, p in model.named_parameters() if p.requires_grad]
    assert learned == [f"{a}.{p}" for a in adapted for p in ("A", "B")]


def test_weights_keep_their_names():
    model = tiny_llama()
    names = set(model.state_dict())
    lora.apply(model)
    adapters = {n for n in model.state_dict() if n.endswith((".A", ".B"))}
    assert set(model.state_dict()) - adapters == names and len(adapters) == 8


def test_whole_adapted_llama_gradcheck():
    model = tiny_llama()
    lora.apply(model, targets=("q_proj", "v_proj", "down_proj"), r=2)
    randomize_adapters(model)
    params = [p for p in model.parameters() if p.requires_grad]
    assert len(params) == 12 and all(p.dtype == np.float64 for p in params)
    assert gf.gradcheck(lambda *ps: model(IDS, TARGETS)[1], *params)
    model.zero_grad()
    model(IDS, TARGETS)[1].backward()
    assert all((p.grad is not None) == p.requires_grad for p in model.parameters())


def test_merge_then_unmerge():
    model = tiny_llama(dtype=np.float32)
    lora.apply(model, targets=("q_proj", "v_proj", "o_proj"))
    randomize_adapters(model)
    adapted = model(IDS)[0].data
    weights = {n: m.weight.data.copy() for n, m in lora.adapters(model)}
    deltas = {n: m.delta() for n, m in lora.adapters(model)}
    lora.merge(model)
    assert all(m.merged for _, m in lora.adapters(model))
    assert np.allclose(model(IDS)[0].data, adapted, atol=1e-5)
    with pytest.raises(ValueError, match=r"lora.merge: layers.0.attn.q_proj is already merged"):
        lora.merge(model)
    lora.unmerge(model)
    for name, m in lora.adapters(model):
        # two roundings, each at most half a unit in the last place of a number no larger than |W| + |dW|
        bound = np.finfo(np.float32).eps * (np.abs(weights[name]) + np.abs(deltas[name]))
        error = np.abs(m.weight.data - weights[name])
        assert (error <= bound).all() and error.max() > 0  # not exact: the rounding is real, and bounded
    assert np.allclose(model(IDS)[0].data, adapted, atol=1e-5)


def test_lora_state_dict_round_trip():
    model = tiny_llama()
    lora.apply(model)
    randomize_adapters(model)
    state = lora.lora_state_dict(model)
    assert sorted(state) == sorted(f"layers.{i}.attn.{p}.{ab}" for i in range(2) for p in ("q_proj", "v_proj")
                                   for ab in "AB")  # fmt: skip
    assert sum(a.size for a in state.values()) == 2 * (8 * (8 + 8) + 8 * (8 + 4))  # r (in + out) per adapter
    fresh = tiny_llama()
    lora.apply(fresh)
    assert not np.array_equal(fresh(IDS)[0].data, model(IDS)[0].data)
    lora.load_lora_state_dict(fresh, state)
    assert np.array_equal(fresh(IDS)[0].data, model(IDS)[0].data)
    with pytest.raises(ValueError, match=r"load_lora_state_dict: missing \['layers.0.attn.q_proj.A'\]"):
        lora.load_lora_state_dict(fresh, {k: v for k, v in state.items() if k != "layers.0.attn.q_proj.A"})


def test_bad_target_names_the_linears():
    model = tiny_llama()
    message = (
        "lora.apply: target 'qproj' matches no Linear; the Linear names are "
        "down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj"
    )
    with pytest.raises(ValueError, match=f"^{message}$"):
        lora.apply(model, targets=("q_proj", "qproj"))
    assert not any(isinstance(m, nn.LoRALinear) for m in model.modules())  # nothing half-done


@pytest.mark.parametrize("make_optimizer", [
    lambda ps: gf.optim.AdamW(ps, lr=0.1, weight_decay=0.1),
    lambda ps: gf.optim.SGD(ps, lr=0.1, momentum=0.9),
])  # fmt: skip
def test_one_step_changes_only_the_adapters(make_optimizer):
    model = tiny_llama(dtype=np.float32)
    lora.apply(model)
    before = {n: p.data.copy() for n, p in model.named_parameters()}
    optimizer = make_optimizer(model.parameters())  # frozen ones included: the optimizer skips them
    model(IDS, TARGETS)[1].backward()
    optimizer.step()
    changed = {n for n, p in model.named_parameters() if not np.array_equal(p.data, before[n])}
    assert changed >= {n for n in before if n.endswith(".B")}  # A waits for B: its gradient is B^T G x
    assert all(n.endswith((".A", ".B")) for n in changed)
    adapter_ids = {id(p) for n, p in model.named_parameters() if n.endswith((".A", ".B"))}
    assert set(optimizer.state) <= adapter_ids and len(optimizer.state) > 0


def test_a_tied_head_is_refused_since_merging_would_change_the_embedding_too():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
    assert model.lm_head.weight is model.wte.weight
    tied = r"^lora\.apply: lm_head's weight is tied to another layer's .* leave 'lm_head' out of targets$"
    with pytest.raises(ValueError, match=tied):
        lora.apply(model, targets=("q_proj", "lm_head"))
    assert not any(isinstance(m, nn.LoRALinear) for m in model.modules())  # nothing was changed
