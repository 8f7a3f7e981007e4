"""models/transformer.py: the encoder-decoder of "A Brief Introduction to (some of) the Math Behind the
Transformer", gradchecked end to end, trained to reverse digit strings, and its masks checked for leakage,
the causal and the padding mask separately, as "Transformer Architecture: Theory Notebook" asks: no output
may change with a future target token or a padded source position."""

import numpy as np

import gradflow as gf
from gradflow.models.transformer import Transformer, TransformerConfig

TINY = TransformerConfig(
    src_vocab=5, tgt_vocab=6, d_model=4, n_heads=2, d_ff=8, n_enc_layers=1, n_dec_layers=2, max_len=8, pad_id=0
)
SMALL = TransformerConfig(
    src_vocab=9, tgt_vocab=7, d_model=16, n_heads=4, d_ff=32, n_enc_layers=2, n_dec_layers=2, max_len=16, pad_id=0
)


def test_loss_gradcheck_wrt_every_parameter(float64):
    model = Transformer(TINY)
    src = np.array([[1, 2, 3, 4], [4, 3, 0, 0]])  # the second source is padded after 2 tokens
    tgt_in = np.array([[1, 5, 2], [1, 3, 0]])
    targets = np.array([[5, 2, 4], [3, 2, 0]])  # the last target of the second row is pad: ignored

    def loss(*params):  # gradcheck perturbs the Parameters in place, so the model sees each change
        return model(src, tgt_in, targets, src_lengths=np.array([4, 2]))[1]

    params = list(model.parameters())
    assert len(params) == len(list(model.named_parameters())) > 0
    assert gf.gradcheck(loss, *params)


def test_changing_a_future_target_token_never_changes_earlier_outputs():
    gf.manual_seed(0)
    model = Transformer(SMALL).eval()
    rng = np.random.default_rng(0)
    src = rng.integers(1, SMALL.src_vocab, (3, 6))
    tgt_in = rng.integers(1, SMALL.tgt_vocab, (3, 7))
    logits, _ = model(src, tgt_in)  # (B, T, V)
    for t in range(tgt_in.shape[1]):
        changed = tgt_in.copy()
        changed[:, t] = (changed[:, t] % (SMALL.tgt_vocab - 1)) + 1  # a different non-pad token
        new, _ = model(src, changed)
        np.testing.assert_array_equal(new.data[:, :t], logits.data[:, :t])
        assert not np.allclose(new.data[:, t], logits.data[:, t])  # position t itself does see it


def test_padded_source_positions_never_change_any_output():
    gf.manual_seed(0)
    model = Transformer(SMALL).eval()
    rng = np.random.default_rng(1)
    lengths = np.array([6, 4, 1])
    src = rng.integers(1, SMALL.src_vocab, (3, 6))
    tgt_in = rng.integers(1, SMALL.tgt_vocab, (3, 5))
    logits, _ = model(src, tgt_in, src_lengths=lengths)
    memory = model.encode(src, lengths)  # (B, S, d)
    padded = np.arange(6) >= lengths[:, None]  # (B, S)
    for _ in range(3):
        changed = np.where(padded, rng.integers(0, SMALL.src_vocab, src.shape), src)
        new, _ = model(src=changed, tgt_in=tgt_in, src_lengths=lengths)
        np.testing.assert_array_equal(new.data, logits.data)
        np.testing.assert_array_equal(model.encode(changed, lengths).data[~padded], memory.data[~padded])
    real = src.copy()
    real[2, 0] = real[2, 0] % (SMALL.src_vocab - 1) + 1  # a real token does reach the outputs
    assert not np.allclose(model(real, tgt_in, src_lengths=lengths)[0].data[2], logits.data[2])


def test_source_lengths_default_to_the_non_pad_tokens():
    gf.manual_seed(0)
    model = Transformer(SMALL).eval()
    src = np.array([[3, 1, 4, 1, 5], [2, 7, 0, 0, 0]])
    tgt_in = np.array([[1, 2, 3], [4, 5, 6]])
    by_pad, _ = model(src, tgt_in)
    by_lengths, _ = model(src, tgt_in, src_lengths=np.array([5, 2]))
    np.testing.assert_array_equal(by_pad.data, by_lengths.data)


# --- training: reverse a string of digits ------------------------------------------------------

PAD, BOS, EOS = 10, 11, 12  # tokens 0-9 are the digits
MAX_DIGITS = 6


def digit_strings(rng, n, exclude=frozenset()):
    """n random strings of 4 to 6 digits, none of them in `exclude`."""
    strings = []
    while len(strings) < n:
        s = tuple(int(c) for c in rng.integers(0, 10, rng.integers(4, MAX_DIGITS + 1)))
        if s not in exclude:
            strings.append(s)
    return strings


def reversal_batch(strings):
    """src: the digits; tgt_in: BOS + reversed digits; targets: reversed digits + EOS; all padded with PAD.

    src (B, 6), tgt_in and targets (B, 7), lengths (B,)
    """
    b = len(strings)
    src = np.full((b, MAX_DIGITS), PAD)
    tgt_in = np.full((b, MAX_DIGITS + 1), PAD)
    targets = np.full((b, MAX_DIGITS + 1), PAD)
    for i, s in enumerate(strings):
        n, reversed_s = len(s), s[::-1]
        src[i, :n] = s
        tgt_in[i, 0], tgt_in[i, 1 : n + 1] = BOS, reversed_s
        targets[i, :n], targets[i, n] = reversed_s, EOS
    return src, tgt_in, targets, np.array([len(s) for s in strings])


def test_learns_to_reverse_digit_strings():
    """Token accuracy >= 99% on 500 held-out strings (never in a training batch), by greedy decoding:
    every token after BOS is the model's own previous prediction, not the true one."""
    gf.manual_seed(0)
    rng = np.random.default_rng(0)
    held_out = digit_strings(rng, 500)
    unseen = frozenset(held_out)
    config = TransformerConfig(
        src_vocab=13,
        tgt_vocab=13,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_enc_layers=1,
        n_dec_layers=1,
        max_len=7,
        pad_id=PAD,
    )
    model = Transformer(config)
    opt = gf.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(400):
        src, tgt_in, targets, lengths = reversal_batch(digit_strings(rng, 64, exclude=unseen))
        _, loss = model(src, tgt_in, targets, src_lengths=lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05

    model.eval()
    src, _, targets, lengths = reversal_batch(held_out)
    predicted = model.greedy_decode(src, BOS, MAX_DIGITS + 1, src_lengths=lengths).numpy()  # (500, 7)
    counted = targets != PAD  # the digits and the EOS after them
    accuracy = (predicted == targets)[counted].mean()
    assert accuracy >= 0.99, f"held-out token accuracy {accuracy:.4f}"


def test_greedy_decode_records_no_graph():
    gf.manual_seed(0)
    model = Transformer(SMALL)
    out = model.greedy_decode(np.array([[1, 2, 3]]), bos_id=1, max_len=4)
    assert out.shape == (1, 4) and not out.requires_grad and out.grad_fn is None
