"""Every layer gradient-checked in float64 with respect to its input and all its parameters, plus the
properties the source documents state: RoPE's relative positions, permutation equivariance, masks."""

import numpy as np
import pytest

import gradflow as gf
from gradflow import nn


def check_layer(layer, *inputs, fn=None):
    """gradcheck of sum(u * layer(x)) w.r.t. the input x and every parameter, all in float64."""
    fn = fn or (lambda x: layer(x))
    params = list(layer.parameters())
    assert gf.gradcheck(lambda x, *ps: fn(x), *inputs, *params)


LAYERS = {
    "Linear": lambda: (nn.Linear(4, 3), (2, 5, 4)),
    "Linear no bias": lambda: (nn.Linear(4, 3, bias=False), (5, 4)),
    "LayerNorm": lambda: (nn.LayerNorm(6), (2, 3, 6)),
    "RMSNorm": lambda: (nn.RMSNorm(6), (2, 3, 6)),
    "MLP relu": lambda: (nn.MLP(4, 8, activation="relu"), (2, 3, 4)),
    "MLP gelu": lambda: (nn.MLP(4, 8, activation="gelu"), (2, 3, 4)),
    "SwiGLU": lambda: (nn.SwiGLU(4, 6), (2, 3, 4)),
    "LearnedPositionalEncoding": lambda: (nn.LearnedPositionalEncoding(8, 4), (2, 5, 4)),
    "SinusoidalPositionalEncoding": lambda: (nn.SinusoidalPositionalEncoding(4, 16), (2, 5, 4)),
    "RotaryEmbedding halves": lambda: (nn.RotaryEmbedding(4), (2, 2, 5, 4)),
    "RotaryEmbedding interleaved": lambda: (nn.RotaryEmbedding(4, interleaved=True), (2, 2, 5, 4)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_gradcheck(name, float64):
    layer, shape = LAYERS[name]()
    check_layer(layer, gf.randn(*shape, requires_grad=True))


ATTENTION = {
    "self": dict(),
    "causal": dict(causal=True),
    "padding lengths": dict(lengths=[5, 3]),
    "boolean mask": dict(mask=np.tri(5, dtype=bool)[None, None] | np.eye(5, dtype=bool)),
    "grouped-query": dict(causal=True, n_kv_heads=2),
    "multi-query": dict(causal=True, n_kv_heads=1),
    "rope": dict(causal=True, rope=True),
}


@pytest.mark.parametrize("name", ATTENTION)
def test_attention_gradcheck(name, float64):
    kwargs = dict(ATTENTION[name])
    n_kv = kwargs.pop("n_kv_heads", None)
    rope = nn.RotaryEmbedding(2) if kwargs.pop("rope", False) else None
    attn = nn.GeneralAttention(8, 4, n_kv_heads=n_kv, rope=rope)
    check_layer(attn, gf.randn(2, 5, 8, requires_grad=True), fn=lambda x: attn(x, **kwargs))


def test_causal_self_attention_gradcheck(float64):
    attn = nn.CausalSelfAttention(8, 4)
    check_layer(attn, gf.randn(2, 5, 8, requires_grad=True))


def copy_weights(to, source):
    for (name, p), (_, q) in zip(to.named_parameters(), source.named_parameters(), strict=True):
        assert p.shape == q.shape, name
        p.data = q.data.copy()


def test_causal_self_attention_is_the_general_layer_made_causal(float64):
    plain, general = nn.CausalSelfAttention(8, 2), nn.GeneralAttention(8, 2)
    copy_weights(general, plain)
    x = gf.randn(2, 5, 8)
    np.testing.assert_array_equal(plain(x).data, general(x, causal=True).data)


def test_causal_self_attention_decodes_with_a_cache_as_over_the_whole_sequence(float64):
    attn, cache, x = nn.CausalSelfAttention(8, 2), nn.KVCache(), gf.randn(2, 5, 8)
    with gf.no_grad():
        steps = [attn(x[:, :2], cache)] + [attn(x[:, t : t + 1], cache) for t in range(2, 5)]
    np.testing.assert_allclose(gf.cat(steps, axis=1).data, attn(x).data, atol=1e-12)
    assert cache.length == 5


def test_the_two_attention_layers_read_a_boolean_mask_each_its_own_way(float64):
    """gradflow's GeneralAttention: True = may attend; PyTorch's MultiheadAttention: True = masked out."""
    ours, theirs = nn.GeneralAttention(4, 2), nn.MultiheadAttention(4, 2, batch_first=True)
    for proj, w, b in zip(
        (ours.q_proj, ours.k_proj, ours.v_proj), theirs.in_proj_weight.chunk(3), theirs.in_proj_bias.chunk(3)
    ):
        proj.weight.data, proj.bias.data = w.data.copy(), b.data.copy()
    copy_weights(ours.o_proj, theirs.out_proj)
    may_attend = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], dtype=bool)
    x = gf.randn(2, 3, 4)
    np.testing.assert_allclose(
        ours(x, mask=may_attend).data, theirs(x, x, x, attn_mask=~may_attend)[0].data, atol=1e-12
    )
    assert not np.allclose(ours(x, mask=may_attend).data, theirs(x, x, x, attn_mask=may_attend)[0].data)


def test_the_spelling_one_capital_letter_from_pytorchs_layer_is_refused_naming_both():
    with pytest.raises(AttributeError, match=r"^gradflow.nn has no MultiHeadAttention: .*nn.MultiheadAttention .*"
                       r"True = masked out.*nn.GeneralAttention \(True = may attend\)$"):  # fmt: skip
        nn.MultiHeadAttention  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'MultiHeadAttentio'"):
        nn.MultiHeadAttentio  # noqa: B018


def test_cross_attention_gradcheck_wrt_queries_context_and_weights(float64):
    attn = nn.GeneralAttention(8, 2)
    x, ctx = gf.randn(2, 3, 8, requires_grad=True), gf.randn(2, 6, 8, requires_grad=True)
    fn = lambda x, c, *ps: attn(x, context=c, lengths=[6, 4])  # noqa: E731
    assert gf.gradcheck(fn, x, ctx, *attn.parameters())


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
@pytest.mark.parametrize("ffn,norm", [("gelu", "layer"), ("relu", "layer"), ("swiglu", "rms")])
def test_block_gradcheck(norm_first, ffn, norm, float64):
    block = nn.TransformerBlock(8, 2, 12, ffn=ffn, norm=norm, norm_first=norm_first)
    check_layer(block, gf.randn(2, 4, 8, requires_grad=True), fn=lambda x: block(x, causal=True))


def test_decoder_block_with_cross_attention_gradcheck(float64):
    block = nn.TransformerBlock(8, 2, 12, ffn="relu", norm_first=False, cross_attention=True)
    memory = gf.randn(2, 5, 8, requires_grad=True)
    fn = lambda x, m, *ps: block(x, context=m, causal=True, context_lengths=[5, 2])  # noqa: E731
    assert gf.gradcheck(fn, gf.randn(2, 3, 8, requires_grad=True), memory, *block.parameters())


def test_cross_attention_context_mask_equals_context_lengths(float64):
    block = nn.TransformerBlock(8, 2, 12, cross_attention=True)
    x, memory = gf.randn(2, 3, 8), gf.randn(2, 5, 8)
    keys = np.arange(5) < np.array([5, 2])[:, None]  # (B, S): True = a real source token
    by_mask = block(x, context=memory, context_mask=keys[:, None, None, :])
    np.testing.assert_array_equal(by_mask.data, block(x, context=memory, context_lengths=[5, 2]).data)


def test_post_norm_and_pre_norm_compute_what_they_say(float64):
    block = nn.TransformerBlock(8, 2, 12, norm_first=False)
    x = gf.randn(1, 3, 8)
    h = block.attn_norm(x + block.attn(x))
    np.testing.assert_allclose(block(x).data, block.ffn_norm(h + block.ffn(h)).data)
    block.norm_first = True
    h = x + block.attn(block.attn_norm(x))
    np.testing.assert_allclose(block(x).data, (h + block.ffn(block.ffn_norm(h))).data)


# --- properties from the documents ----------------------------------------------------------------


@pytest.mark.parametrize("interleaved", [False, True], ids=["halves", "interleaved"])
def test_rope_dot_product_depends_only_on_the_position_difference(interleaved, float64):
    rope = nn.RotaryEmbedding(8, interleaved=interleaved)
    q, k = gf.randn(1, 1, 1, 8), gf.randn(1, 1, 1, 8)

    def score(m, n):
        return float((rope(q, offset=m) * rope(k, offset=n)).sum())

    assert score(2, 5) == pytest.approx(score(10, 13), abs=1e-12) == pytest.approx(score(0, 3), abs=1e-12)
    assert score(0, 0) == pytest.approx(float((q * k).sum()), abs=1e-12)  # position 0 is no rotation
    assert abs(score(2, 5) - score(2, 6)) > 1e-6


def test_rope_layouts_are_the_same_rotation_on_permuted_features(float64):
    x = gf.randn(1, 1, 4, 8)
    to_halves = np.r_[0:8:2, 1:8:2]  # (x0, x2, x4, x6, x1, x3, x5, x7): adjacent pairs become halves
    halves = nn.RotaryEmbedding(8)(x[..., to_halves], offset=3)
    interleaved = nn.RotaryEmbedding(8, interleaved=True)(x, offset=3)
    np.testing.assert_allclose(halves.data, interleaved.data[..., to_halves], atol=1e-12)


def test_rope_rotates_a_pair_by_position_times_theta(float64):
    rope = nn.RotaryEmbedding(2, base=10000.0)  # one pair, theta = 1
    y = rope(gf.tensor([[[[1.0, 0.0]]]]), offset=3)
    np.testing.assert_allclose(y.data.ravel(), [np.cos(3), np.sin(3)], atol=1e-12)


def test_self_attention_without_positions_is_permutation_equivariant(float64):
    attn = nn.GeneralAttention(8, 2)
    x = gf.randn(1, 6, 8)
    perm = np.array([3, 0, 5, 1, 4, 2])
    np.testing.assert_allclose(attn(x[:, perm]).data, attn(x).data[:, perm], atol=1e-12)


def test_sinusoidal_table_values():
    table = nn.sinusoidal_table(3, 4)
    # PE(pos, 2i) = sin(pos / 10000^(2i/4)),  PE(pos, 2i+1) = cos(...): pos 1 -> sin 1, cos 1, sin 0.01, cos 0.01
    np.testing.assert_allclose(table[1], [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)])
    np.testing.assert_allclose(table[0], [0, 1, 0, 1])


def test_causal_mask_has_no_leakage(float64):
    attn = nn.GeneralAttention(8, 2)
    x = gf.randn(1, 6, 8)
    y = attn(x, causal=True).data
    changed = x.data.copy()
    changed[0, 4] += 10.0  # change a future token
    y2 = attn(gf.tensor(changed), causal=True).data
    np.testing.assert_array_equal(y2[0, :4], y[0, :4])
    assert np.abs(y2[0, 4:] - y[0, 4:]).max() > 1e-3


def test_padding_positions_never_change_the_others(float64):
    attn = nn.GeneralAttention(8, 2)
    x = gf.randn(2, 5, 8)
    y = attn(x, lengths=[5, 3]).data
    changed = x.data.copy()
    changed[1, 3:] = 100.0  # the padding of sequence 1
    y2 = attn(gf.tensor(changed), lengths=[5, 3]).data
    np.testing.assert_array_equal(y2[1, :3], y[1, :3])
    np.testing.assert_array_equal(y2[0], y[0])


def test_grouped_query_equals_attention_with_repeated_kv_heads(float64):
    gqa = nn.GeneralAttention(8, 4, n_kv_heads=2, bias=False)
    full = nn.GeneralAttention(8, 4, bias=False)
    full.q_proj.weight.data = gqa.q_proj.weight.data
    full.o_proj.weight.data = gqa.o_proj.weight.data
    hs = 2  # kv head j serves query heads 2j and 2j+1: repeat its rows in the projection
    rows = np.concatenate([np.arange(j * hs, (j + 1) * hs) for j in (0, 0, 1, 1)])
    full.k_proj.weight.data = gqa.k_proj.weight.data[rows]
    full.v_proj.weight.data = gqa.v_proj.weight.data[rows]
    x = gf.randn(2, 5, 8)
    np.testing.assert_allclose(gqa(x, causal=True).data, full(x, causal=True).data, atol=1e-12)


def test_attention_weights_are_kept_for_pictures(float64):
    attn = nn.GeneralAttention(8, 2)
    attn(gf.randn(1, 4, 8), causal=True, need_weights=True)
    w = attn.weights.data
    assert w.shape == (1, 2, 4, 4)
    np.testing.assert_allclose(w.sum(-1), 1.0)
    assert (np.triu(w[0, 0], 1) == 0).all()
    plain = nn.CausalSelfAttention(8, 2)
    copy_weights(plain, attn)
    plain(gf.randn(1, 4, 8), need_weights=True)
    assert plain.weights.shape == (1, 2, 4, 4) and (np.triu(plain.weights.data[0, 0], 1) == 0).all()


def test_kv_cache_memory_formula(float64):
    attn, cache = nn.GeneralAttention(8, 4, n_kv_heads=2), nn.KVCache()
    with gf.no_grad():
        attn(gf.randn(3, 7, 8), causal=True, cache=cache)
    assert cache.length == 7
    assert cache.nbytes() == 2 * 3 * 2 * 7 * 2 * 8  # k and v x B x n_kv x T x head_dim x 8 bytes


def test_layer_errors():
    with pytest.raises(ValueError, match="d_model 10 is not divisible by n_heads 4"):
        nn.GeneralAttention(10, 4)
    with pytest.raises(ValueError, match="CausalSelfAttention: d_model 10 is not divisible by n_heads 4"):
        nn.CausalSelfAttention(10, 4)
    with pytest.raises(ValueError, match="n_heads 4 is not divisible by n_kv_heads 3"):
        nn.GeneralAttention(8, 4, n_kv_heads=3)
    with pytest.raises(ValueError, match="positions 6..9 do not fit in max_len 8"):
        nn.LearnedPositionalEncoding(8, 4)(gf.zeros(1, 4, 4), offset=6)
    with pytest.raises(ValueError, match="lengths \\[6\\] must lie in \\[0, 5\\]"):
        nn.GeneralAttention(8, 2)(gf.zeros(1, 5, 8), lengths=[6])
    with pytest.raises(ValueError, match="activation must be one of"):
        nn.MLP(4, 8, activation="tanh")
    with pytest.raises(ValueError, match="needs a context"):
        nn.TransformerBlock(8, 2, 8, cross_attention=True)(gf.zeros(1, 2, 8))


def test_more_layer_errors():
    with pytest.raises(ValueError, match="RotaryEmbedding: head_dim must be even, got 5"):
        nn.RotaryEmbedding(5)
    with pytest.raises(ValueError, match="d_model must be even, got 7"):
        nn.sinusoidal_table(4, 7)
    with pytest.raises(ValueError, match="Dropout: p must be in \\[0, 1\\), got 1"):
        nn.Dropout(1)
