"""GPT and Llama end to end: exact parameter counts, gradcheck, KV-cache decoding, leakage, checkpoints."""

import numpy as np
import pytest

import gradflow as gf
from gradflow.models.gpt import GPT, GPTConfig, gpt2_small
from gradflow.models.llama import Llama, LlamaConfig, qwen2_0_5b, smollm2_135m

TINY = {
    "gpt": lambda: GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8)),
    "gpt untied no bias": lambda: GPT(
        GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, bias=False, tie_weights=False)
    ),
    "llama": lambda: Llama(LlamaConfig(vocab_size=11, n_layer=2, d_model=8, n_heads=4, n_kv_heads=2, d_ff=12)),
    "qwen-style": lambda: Llama(
        LlamaConfig(vocab_size=11, n_layer=1, d_model=8, n_heads=2, n_kv_heads=1, d_ff=12, qkv_bias=True)
    ),
}
IDS = np.array([[1, 5, 2, 9, 9, 0], [3, 3, 7, 10, 4, 6]])


def test_gpt2_small_parameter_count():
    assert GPT.count_parameters(gpt2_small()) == 124_439_808


def test_qwen2_0_5b_parameter_count():
    assert Llama.count_parameters(qwen2_0_5b()) == 494_032_768


def test_smollm2_135m_parameter_count():
    assert Llama.count_parameters(smollm2_135m()) == 134_515_008


@pytest.mark.parametrize("name", TINY)
def test_counting_a_built_model_agrees_with_counting_its_config(name):
    model = TINY[name]()
    assert type(model).count_parameters(model.config) == model.num_parameters()
    assert model.num_parameters() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", TINY)
def test_end_to_end_gradcheck_wrt_every_parameter(name, float64):
    model = TINY[name]()
    targets = np.roll(IDS, -1, axis=1)
    assert gf.gradcheck(lambda *ps: model(IDS, targets)[1], *model.parameters())


@pytest.mark.parametrize("name", ["llama", "qwen-style"])
def test_llama_training_loss_is_the_loss_of_its_logits(name, float64):
    """With fused_loss, in training mode the head and the loss are one op (no logits); in eval mode the logits
    are formed and their cross-entropy taken: the same loss and the same gradient of every parameter. Without
    it (a model as built), training mode forms the logits as eval mode does."""
    model = TINY[name]()
    targets = np.roll(IDS, -1, axis=1)
    logits, loss = model.train()(IDS, targets)
    assert logits.shape == (*IDS.shape, model.config.vocab_size) and loss.grad_fn.name == "cross_entropy"
    model.fused_loss = True
    targets[1, 4:] = -100  # padding: counts for nothing in both
    runs = []
    for training in (True, False):
        model.train(training)
        model.zero_grad()
        logits, loss = model(IDS, targets)
        assert (logits is None) == training
        assert loss.grad_fn.name == ("linear_cross_entropy" if training else "cross_entropy")
        loss.backward()
        runs.append((loss.item(), [p.grad.numpy().copy() for p in model.parameters()]))
    (trained, g1), (evaluated, g2) = runs
    assert trained == pytest.approx(evaluated, rel=1e-13)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("name", TINY)
def test_kv_cached_decoding_gives_the_full_forward_logits(name, float64):
    model = TINY[name]()
    full, _ = model(IDS)
    cache = model.new_cache()
    with gf.no_grad():
        first, _ = model(IDS[:, :2], cache=cache)  # a prompt, then one token at a time
        steps = [model(IDS[:, t : t + 1], cache=cache)[0] for t in range(2, IDS.shape[1])]
    np.testing.assert_allclose(gf.cat([first, *steps], axis=1).data, full.data, atol=1e-12)


@pytest.mark.parametrize("name", TINY)
def test_changing_a_future_token_never_changes_earlier_logits(name, float64):
    model = TINY[name]()
    logits, _ = model(IDS)
    changed = IDS.copy()
    changed[:, 3] = (changed[:, 3] + 1) % 11
    logits2, _ = model(changed)
    np.testing.assert_array_equal(logits2.data[:, :3], logits.data[:, :3])
    assert np.abs(logits2.data[:, 3:] - logits.data[:, 3:]).max() > 1e-6


def test_weight_tying_shares_one_parameter():
    model = TINY["gpt"]()
    assert model.lm_head.weight is model.wte.weight
    untied = TINY["gpt untied no bias"]()
    assert untied.lm_head.weight is not untied.wte.weight


def test_names_follow_the_layer_structure():
    names = dict(TINY["llama"]().named_parameters())
    assert "layers.0.attn.q_proj.weight" in names and "layers.1.ffn.gate_proj.weight" in names
    assert names["layers.0.attn.k_proj.weight"].shape == (4, 8)  # 2 kv heads of 2
    assert "layers.0.attn.q_proj.bias" not in names
    assert "layers.0.attn.q_proj.bias" in dict(TINY["qwen-style"]().named_parameters())
    assert "layers.0.attn.o_proj.bias" not in dict(TINY["qwen-style"]().named_parameters())


def test_gpt_residual_projections_use_the_scaled_init():
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=8, n_head=4, n_embd=64))
    assert model.blocks[0].attn.o_proj.weight.data.std() == pytest.approx(0.02 / 4, rel=0.1)
    assert model.blocks[0].attn.q_proj.weight.data.std() == pytest.approx(0.02, rel=0.1)
    assert (model.blocks[0].attn.q_proj.bias.data == 0).all()


def test_state_dict_round_trip_and_errors():
    gf.manual_seed(0)
    a = TINY["gpt"]()
    gf.manual_seed(1)
    b = TINY["gpt"]()
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a(IDS)[0].data, b(IDS)[0].data)
    llama_state = TINY["llama"]().state_dict()
    with pytest.raises(ValueError, match="missing: .*wte.weight"):
        a.load_state_dict(llama_state)


@pytest.mark.parametrize("name", TINY)
def test_ids_that_are_not_a_batch_are_a_clear_error(name):
    with pytest.raises(ValueError, match=r"ids must be \(batch, time\), got shape \(6,\)"):
        TINY[name]()(IDS[0])


@pytest.mark.parametrize("name", TINY)
def test_one_cache_per_block(name):
    model = TINY[name]()
    assert len(model.new_cache()) == model.config.n_layer


def test_context_longer_than_block_size_is_a_clear_error():
    with pytest.raises(ValueError, match=r"GPT: positions 0..8 do not fit in block_size 8"):
        TINY["gpt"]()(np.zeros((1, 9), dtype=np.int64))


@pytest.mark.parametrize("name", ["gpt", "llama"])
def test_attention_maps_of_a_whole_model(name):
    model = TINY[name]()
    model(IDS, need_weights=True)
    blocks = model.blocks if name == "gpt" else model.layers
    for block in blocks:
        w = block.attn.weights.data
        assert w.shape == (2, block.attn.n_heads, 6, 6)
        np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
        assert (np.triu(w, 1) == 0).all()
