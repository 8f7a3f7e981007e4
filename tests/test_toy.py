"""The toy model of "The Math Behind Large Language Models: A Worked Walk-Through" (HumindLabs AI):
every printed number, then its gradients.

Each `printed` array is typed in from the document as it stands. Where the document is wrong, the
test names the place and the right value in `wrong=` with a comment saying what went wrong, and
`check` first confirms that the printed number really is off by more than its rounding. Most slips
come from the document rounding an intermediate and carrying the rounded number on; a few are
plain arithmetic errors.
"""

import math

import numpy as np
import pytest

import gradflow as gf
from gradflow.models.toy import ToyConfig, ToyModel
from gradflow.nn import functional as F

THE, CAT, SAT, ON, MAT = range(5)


def check(value, printed, decimals, wrong=None):
    """value agrees with the printed numbers to `decimals` places, except at the places in `wrong`.

    wrong: {index: right value}. At those places the printed number must be off by more than its
    rounding (so nothing is "corrected" that rounding explains); there the right value is asserted.
    """
    value = np.asarray(getattr(value, "data", value), dtype=np.float64)
    expected = np.array(printed, dtype=np.float64)
    tol = 0.5 * 10.0**-decimals
    for index, right in (wrong or {}).items():
        assert abs(expected[index] - value[index]) > tol, f"the printed {expected[index]} at {index} is right after all"
        expected[index] = right
    np.testing.assert_allclose(value, expected, rtol=0, atol=tol)


@pytest.fixture
def model():
    return ToyModel(dtype=np.float64)


@pytest.fixture
def ids(model):
    return model.encode("the cat sat")


@pytest.fixture
def out(model, ids):
    return model.walkthrough(ids, target=ON)


# --- 1. tokens and embeddings -----------------------------------------------------------------


def test_vocabulary_and_token_ids(model, ids):
    assert model.config.vocab == ("the", "cat", "sat", "on", "mat")
    assert ids.tolist() == [0, 1, 2]
    assert model.decode(ids) == "the cat sat"
    assert model.config == ToyConfig()


def test_input_matrix_X(out):
    printed = [[0.2, 0.4, -0.1, 0.3], [0.5, -0.2, 0.6, 0.1], [-0.3, 0.7, 0.2, -0.4]]
    check(out["X"], printed, 1)


def test_parameter_count(model):
    # The document says "roughly 200 parameters"; the weights it prints hold 95 numbers, 103 with
    # LayerNorm's gamma and beta: E 20, W_Q W_K W_V 3 x 8, W_1 12, b_1 3, W_2 12, b_2 4, W_out 20.
    assert model.num_parameters() == 103
    assert [n for n, _ in model.named_parameters()] == [
        "E", "W_Q", "W_K", "W_V", "W_1", "b_1", "W_2", "b_2", "gamma", "beta", "W_out",
    ]  # fmt: skip


# --- 2. self-attention --------------------------------------------------------------------------


def test_Q(out):
    check(out["Q"], [[0.34, 0.35], [0.23, -0.09], [-0.52, 0.78]], 2)


def test_K(out):
    check(out["K"], [[-0.06, 0.49], [0.74, -0.08], [-0.26, 0.32]], 2)


def test_V(out):
    check(out["V"], [[0.34, 0.36], [0.02, -0.07], [-0.13, 0.15]], 2)


def test_scores_S(out):
    printed = [[0.1511, 0.2236, 0.0236], [-0.0579, 0.1774, -0.0886], [0.4134, -0.4472, 0.3848]]
    check(out["S"], printed, 4)


def test_scaled_scores(model, out):
    check(math.sqrt(model.config.d_k), 1.4142, 4)
    printed = [[0.1068, 0.1581, 0.0167], [-0.0409, 0.1254, -0.0626], [0.2923, -0.3162, 0.2720]]
    # 0.3848 / 1.41421 = 0.272095, which rounds to 0.2721, not 0.2720.
    check(out["S_scaled"], printed, 4, wrong={(2, 2): 0.2721})


def test_attention_softmax_exponentials_and_sums(out):
    e = out["S_scaled"].exp()
    printed = [[1.1127, 1.1712, 1.0168], [0.9599, 1.1336, 0.9393], [1.3393, 0.7288, 1.3126]]
    wrong = {
        (0, 0): 1.1128,  # exp(0.106844) = 1.112760; the document took exp of the rounded 0.1068
        (0, 1): 1.1713,  # exp(0.158109) = 1.171294; even exp(0.1581) = 1.171283
        (2, 0): 1.3395,  # exp(0.292318) = 1.339529; even exp(0.2923) = 1.339505
        (2, 1): 0.7289,  # exp(-0.316218) = 0.728900; even exp(-0.3162) = 0.728914
        (2, 2): 1.3127,  # exp(0.272095) = 1.312711; the document took exp of its wrong 0.2720
    }
    check(e, printed, 4, wrong)
    # the row sums carry the slips above: 3.300882 and 3.381141
    check(e.sum(axis=-1), [3.3007, 3.0328, 3.3807], 4, wrong={0: 3.3009, 2: 3.3811})


def test_attention_weights_A(out):
    printed = [[0.3371, 0.3549, 0.3081], [0.3165, 0.3738, 0.3097], [0.3963, 0.2156, 0.3882]]
    wrong = {
        (0, 1): 0.3548,  # 0.354843; from its own 1.1712 / 3.3007 = 0.354834 the document should also say 0.3548
        (0, 2): 0.3080,  # 0.308047; the document's 1.0168 / 3.3007 = 0.308056 carries its short row sum
        (2, 0): 0.3962,  # 0.396177; from its own 1.3393 / 3.3807 = 0.396161 too
    }
    check(out["A"], printed, 4, wrong)
    # "Each row sums to 1.0": exactly so here; the document's rows 0 and 2 add up to 1.0001.
    np.testing.assert_allclose(out["A"].sum(axis=-1).data, 1.0, rtol=0, atol=1e-15)


def test_attention_output_Z(out):
    printed = [[0.0816, 0.1428], [0.0748, 0.1343], [0.0885, 0.1858]]
    wrong = {
        (0, 0): 0.0817,  # 0.081668; the document adds products rounded to 4 places (0.1146 + 0.0071 - 0.0401)
        (0, 1): 0.1427,  # 0.142728; likewise 0.1214 - 0.0248 + 0.0462
        (1, 1): 0.1342,  # 0.134230; and the document's own sum 0.1139 - 0.0262 + 0.0465 is 0.1342, not 0.1343
    }
    check(out["Z"], printed, 4, wrong)


def test_Z_equals_the_fused_attention(out):
    Z = F.scaled_dot_product_attention(out["Q"], out["K"], out["V"])
    np.testing.assert_allclose(Z.data, out["Z"].data, rtol=0, atol=1e-15)


# --- 4. feed-forward network, residual, LayerNorm (on x_2, the embedding of "sat") -------------


def test_ffn_input_is_the_embedding_of_sat(model, out):
    # The document feeds x_2 itself, not Z (which has only d_k = 2 columns), to the FFN.
    check(out["x"], [-0.3, 0.7, 0.2, -0.4], 1)
    np.testing.assert_array_equal(out["x"].data, model.E.data[SAT])


def test_ffn_pre_activation_h(out):
    check(out["h"], [-0.26, 0.26, 0.32], 2)


def test_relu_h(out):
    check(out["relu_h"], [0.00, 0.26, 0.32], 2)


def test_ffn_output(out):
    check(out["ffn"], [0.082, 0.092, 0.200, -0.020], 3)


def test_residual(out):
    check(out["residual"], [-0.218, 0.792, 0.400, -0.420], 3)


def test_layer_norm_statistics(out):
    y, mu = out["residual"], out["mu"]
    check(y.sum(), 0.554, 3)
    check(mu, 0.1385, 4)
    check(y - mu, [-0.3565, 0.6535, 0.2615, -0.5585], 4)
    check((y - mu) ** 2, [0.1271, 0.4271, 0.0684, 0.3119], 4)
    check(((y - mu) ** 2).sum(), 0.9345, 4)
    check(out["var"], 0.2336, 4)
    check(out["sigma"], 0.4833, 4)


def test_layer_norm(out):
    # to 4 places (the document's y-hat lines); its ratios use the rounded sigma = 0.4833
    wrong = {
        1: 1.3521,  # 1.352058; and the document's own 0.6535 / 0.4833 = 1.352162 is 1.3522, not 1.3520
        2: 0.5410,  # 0.541030; 0.2615 / 0.4833 = 0.541072 is the rounded sigma's value
        3: -1.1555,  # -1.155508; and the document's own -0.5585 / 0.4833 = -1.155597 is -1.1556, not -1.1557
    }
    check(out["ln"], [-0.7376, 1.3520, 0.5411, -1.1557], 4, wrong)
    # to 3 places, the vector the document carries on as h_last: right
    check(out["ln"], [-0.738, 1.352, 0.541, -1.156], 3)
    # "Verify: mean ~ 0, variance ~ 1": exactly so, because epsilon is 0 as in the document
    np.testing.assert_allclose(out["ln"].mean().item(), 0.0, atol=1e-15)
    np.testing.assert_allclose(out["ln"].var(ddof=0).item(), 1.0, rtol=1e-14)


# --- 5. output projection and softmax over the vocabulary --------------------------------------


def test_logits(out):
    # Every logit is off in the third place: the document rounds h_last to 3 places and then each of
    # the four products to 3 places before adding, e.g. logit("on") = -0.148 + 0.676 + 0.162 - 0.694
    # = -0.004, where the exact value is -0.002483 (and the rounded h_last alone gives -0.0029).
    # "cat" and "sat" also swap order: in fact 0.260481 < 0.260584.
    printed = [-0.336, 0.261, 0.260, -0.004, 0.341]
    wrong = {THE: -0.337, CAT: 0.260, SAT: 0.261, ON: -0.002, MAT: 0.342}
    check(out["logits"], printed, 3, wrong)


def test_vocabulary_softmax_exponentials_and_sum(out):
    # These inherit the logits' errors (the document's exp(0.341) = 1.4063 is also 1.4064).
    e = out["logits"].exp()
    printed = [0.7146, 1.2982, 1.2969, 0.9960, 1.4063]
    check(e, printed, 4, wrong={THE: 0.7141, CAT: 1.2976, SAT: 1.2977, ON: 0.9975, MAT: 1.4075})
    check(e.sum(), 5.7120, 4, wrong={(): 5.7143})


def test_next_token_distribution_P(out):
    # Inherited from the logits; the document's 0.2272 for "cat" is also 1.2982 / 5.7120 = 0.22728 -> 0.2273.
    printed = [0.1251, 0.2272, 0.2270, 0.1744, 0.2462]
    check(out["P"], printed, 4, wrong={THE: 0.1250, CAT: 0.2271, SAT: 0.2271, ON: 0.1746, MAT: 0.2463})
    P = out["P"].data
    assert P.argmax() == MAT  # "Highest probability: mat" holds
    assert P[SAT] > P[CAT]  # the document has "cat" ahead of "sat"; it is the other way round, by 2e-5
    np.testing.assert_allclose(P.sum(), 1.0, atol=1e-15)


# --- 6. sampling: temperature, top-k, top-p ----------------------------------------------------


def test_temperature_half(out):
    logits = out["logits"]
    # l / 0.5 is right for the document's logits, wrong in the third place for the true ones
    check(
        logits / 0.5,
        [-0.672, 0.522, 0.520, -0.008, 0.682],
        3,
        wrong={0: -0.673, 1: 0.521, 2: 0.521, 3: -0.005, 4: 0.684},
    )
    # The document's P_0.5 does not even sum to 1 (0.8725): the exponentials of its l/0.5 add up to
    # 6.848, but it divides them by about 7.85, one too many. The true P_0.5 is more peaked still.
    printed = [0.0651, 0.2147, 0.2143, 0.1264, 0.2520]
    wrong = {THE: 0.0744, CAT: 0.2457, SAT: 0.2457, ON: 0.1452, MAT: 0.2890}
    check(F.softmax(logits / 0.5), printed, 4, wrong)


def test_temperature_two(out):
    logits = out["logits"]
    # the document rounds 0.1305 up to 0.131; here l/2 = 0.130240 (the logits' slips again)
    check(logits / 2.0, [-0.168, 0.131, 0.130, -0.002, 0.171], 3, wrong={1: 0.130, 3: -0.001})
    printed = [0.1593, 0.2148, 0.2146, 0.1880, 0.2235]
    check(F.softmax(logits / 2.0), printed, 4, wrong={THE: 0.1592, CAT: 0.2146, ON: 0.1881})


def test_temperature_summary_table(out):
    rows = {
        0.5: ([0.065, 0.215, 0.214, 0.126, 0.252], {THE: 0.074, CAT: 0.246, SAT: 0.246, ON: 0.145, MAT: 0.289}),
        1.0: ([0.125, 0.227, 0.227, 0.174, 0.246], {ON: 0.175}),  # 0.174565
        2.0: ([0.159, 0.215, 0.215, 0.188, 0.224], {MAT: 0.223}),  # 0.223487
    }
    for T, (printed, wrong) in rows.items():
        check(F.softmax(out["logits"] / T), printed, 3, wrong)
    # T = 1 is the plain softmax
    np.testing.assert_array_equal(F.softmax(out["logits"] / 1.0).data, out["P"].data)


def test_top_k(out):
    # k = 3 keeps {"mat", "cat", "sat"} and discards "the" and "on": right.
    top3 = np.argsort(-out["P"].data)[:3]
    assert set(top3.tolist()) == {MAT, CAT, SAT}


def test_top_p(out):
    order = np.argsort(-out["P"].data)
    assert order.tolist() == [MAT, SAT, CAT, ON, THE]  # the document sorts "cat" before "sat"
    sorted_P = out["P"][order]
    check(
        sorted_P,
        [0.2462, 0.2272, 0.2270, 0.1744, 0.1251],
        4,
        wrong={0: 0.2463, 1: 0.2271, 2: 0.2271, 3: 0.1746, 4: 0.1250},
    )
    cumulative = np.cumsum(sorted_P.data)
    check(cumulative, [0.2462, 0.4734, 0.7004, 0.8748, 1.0000], 4, wrong={0: 0.2463, 2: 0.7005, 3: 0.8750})
    # The document says the nucleus at p = 0.75 is {mat, cat, sat}, "the first three tokens bring
    # cumulative probability past 0.75", but its own cumulative sum after three is 0.7004 < 0.75:
    # the smallest set reaching 0.75 takes four tokens and leaves out only "the".
    p = 0.75
    n = int(np.argmax(cumulative >= p)) + 1
    assert n == 4
    assert set(order[:n].tolist()) == {MAT, SAT, CAT, ON}


# --- 7. cross-entropy --------------------------------------------------------------------------


def test_cross_entropy_loss_for_on(out):
    # The document writes -log(0.1744) ~ 1.7454, but -log(0.1744) = 1.746404; the model's
    # P("on") = 0.174565 gives 1.745461, so the printed 1.7454 is wrong either way.
    check(out["loss"], 1.7454, 4, wrong={(): 1.7455})
    np.testing.assert_allclose(out["loss"].item(), -np.log(out["P"].data[ON]), rtol=1e-14)
    # the same loss from the fused cross_entropy on a batch of one row
    ce = F.cross_entropy(out["logits"].reshape(1, -1), np.array([ON]))
    np.testing.assert_allclose(ce.item(), out["loss"].item(), rtol=1e-14)


def test_cross_entropy_extremes():
    check(-gf.tensor(np.float64(0.99)).log(), 0.0101, 4)
    check(-gf.tensor(np.float64(0.01)).log(), 4.6052, 4)


def test_perplexity(out):
    # The document defines perplexity as exp(L) but prints no number for it; here it is 1 / P("on").
    perplexity = out["loss"].exp()
    np.testing.assert_allclose(perplexity.item(), 1 / out["P"].data[ON], rtol=1e-14)
    check(perplexity, 5.7285, 4)


# --- the model as a language model -------------------------------------------------------------


def test_forward_applies_the_walkthrough_at_every_position(model, ids, out):
    logits, loss = model(ids)
    assert logits.shape == (3, 5) and loss is None
    np.testing.assert_allclose(logits.data[-1], out["logits"].data, rtol=0, atol=1e-15)
    # with no attention on the path, a position's logits depend only on its own token
    alone, _ = model(np.array([SAT]))
    np.testing.assert_allclose(alone.data[0], out["logits"].data, rtol=0, atol=1e-15)
    _, loss = model(np.array([SAT]), np.array([ON]))
    np.testing.assert_allclose(loss.item(), out["loss"].item(), rtol=1e-14)


def test_forward_on_a_batch(model):
    ids = np.array([[0, 1, 2], [2, 3, 0]])
    logits, loss = model(ids, np.array([[1, 2, 3], [3, 0, 4]]))
    assert logits.shape == (2, 3, 5)
    assert loss.shape == () and np.isfinite(loss.item())


def test_float32_model_agrees_with_float64(out, ids):
    model32 = ToyModel(dtype=np.float32)
    assert all(p.dtype == np.float32 for p in model32.parameters())
    out32 = model32.walkthrough(ids, target=ON)
    for name, value in out.items():
        assert out32[name].dtype == np.float32, name
        np.testing.assert_allclose(out32[name].data, value.data, rtol=1e-5, atol=1e-6, err_msg=name)


# --- backward ----------------------------------------------------------------------------------


def test_backward_reaches_every_weight_on_the_path_to_the_loss(model, out):
    out["loss"].backward()
    on_path = ["E", "W_1", "b_1", "W_2", "b_2", "gamma", "beta", "W_out"]
    for name, p in model.named_parameters():
        if name in on_path:
            assert p.grad is not None, name
            assert p.grad.shape == p.shape and p.grad.dtype == p.dtype, name
            assert np.isfinite(p.grad).all(), name
        else:
            # The document never feeds Z onward, so the loss does not depend on W_Q, W_K, W_V:
            # backward never reaches them, as in PyTorch, and their true gradient is zero.
            assert name in ("W_Q", "W_K", "W_V")
            assert p.grad is None, name
    # only "sat" (the row the FFN reads) gets an embedding gradient
    assert np.abs(model.E.grad[SAT]).sum() > 0
    np.testing.assert_array_equal(np.delete(model.E.grad, SAT, axis=0), 0.0)
    # ReLU passes nothing back where h < 0 (h_1 = -0.26): W_1's first row, b_1[0], W_2's first column
    np.testing.assert_array_equal(model.W_1.grad[0], 0.0)
    assert model.b_1.grad[0] == 0.0
    np.testing.assert_array_equal(model.W_2.grad[:, 0], 0.0)


def test_head_gradients_by_hand(model, out):
    """dL/dlogits = P - onehot(on);  logits = W_out h_last  =>  dL/dW_out = (P - onehot) h_last^T,
    dL/dh_last = W_out^T (P - onehot) = dL/dbeta,  dL/dgamma = dL/dh_last * y_hat (= h_last here)."""
    out["loss"].backward()
    g = out["P"].data - np.eye(5)[ON]
    h_last = out["ln"].data
    np.testing.assert_allclose(model.W_out.grad, np.outer(g, h_last), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(model.beta.grad, model.W_out.data.T @ g, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(model.gamma.grad, (model.W_out.data.T @ g) * h_last, rtol=1e-12, atol=1e-15)


def test_gradcheck_loss_wrt_every_parameter(model, ids):
    assert gf.gradcheck(lambda *ps: model.walkthrough(ids, ON)["loss"], *model.parameters())


def test_attention_weights_have_zero_gradient_numerically(model, ids):
    grads = gf.numerical_grad(lambda *ps: model.walkthrough(ids, ON)["loss"], model.W_Q, model.W_K, model.W_V)
    for g in grads:
        np.testing.assert_array_equal(g, 0.0)


def test_gradcheck_attention_output(model, ids):
    # The attention half has gradients of its own, checked through Z (a random projection of it).
    assert gf.gradcheck(lambda *ps: model.walkthrough(ids)["Z"], *model.parameters())


def test_gradcheck_language_model_loss(model):
    ids, targets = np.array([[0, 1, 2], [2, 3, 4]]), np.array([[1, 2, 3], [3, 4, 0]])
    assert gf.gradcheck(lambda *ps: model(ids, targets)[1], *model.parameters())
