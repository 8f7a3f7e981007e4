"""Sampling rules as "The Mathematics Behind LLM Thinking" and "A Worked Walk-Through" define them, and KV-cached
generation."""

import numpy as np
import pytest

import gradflow as gf
from gradflow.inference.generate import filter_probs, generate, sample
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.toy import ToyModel

VOCAB = ["the", "cat", "sat", "on", "mat"]


@pytest.fixture
def toy_logits():
    model = ToyModel(dtype=np.float64)
    return model.walkthrough(model.encode("the cat sat"))["logits"].data


def kept(p):
    return {VOCAB[i] for i in np.flatnonzero(p)}


def test_top_k_keeps_the_k_most_probable(toy_logits):
    p = filter_probs(toy_logits, top_k=3)
    assert kept(p) == {"mat", "cat", "sat"}  # the walk-through: "we would sample only from {mat, cat, sat}"
    np.testing.assert_allclose(p.sum(), 1.0)


def test_top_p_nucleus_of_the_worked_example(toy_logits):
    # P = [.1250 .2271 .2271 .1746 .2463]; sorted cumulative .2463 .4734 .7005 .8750 1: the first
    # prefix to reach 0.75 has four tokens. "A Worked Walk-Through" prints the nucleus {mat, cat, sat}, but its
    # own cumulative sums (0.7004 after three tokens) show three tokens do not reach 0.75.
    p = filter_probs(toy_logits, top_p=0.75)
    assert kept(p) == {"mat", "cat", "sat", "on"}
    assert kept(filter_probs(toy_logits, top_p=0.70)) == {"mat", "cat", "sat"}
    assert kept(filter_probs(toy_logits, top_p=0.2)) == {"mat"}
    full = filter_probs(toy_logits)
    np.testing.assert_allclose(p[p > 0], full[p > 0] / full[p > 0].sum())  # renormalised, same ratios


def test_temperature_sharpens_and_flattens(toy_logits):
    # T = 0.5 (the walk-through's table, corrected): [.0744 .2457 .2457 .1452 .2890]; T = 2 keeps the order but flattens
    corrected = [0.0744, 0.2457, 0.2457, 0.1452, 0.2890]
    np.testing.assert_allclose(filter_probs(toy_logits, temperature=0.5), corrected, atol=5e-5)
    flat = filter_probs(toy_logits, temperature=2.0)
    assert flat.max() - flat.min() < filter_probs(toy_logits).max() - filter_probs(toy_logits).min()
    np.testing.assert_array_equal(filter_probs(toy_logits, temperature=0), [0, 0, 0, 0, 1])


def test_sampling_is_seedable_and_follows_the_distribution():
    logits = np.log(np.array([0.1, 0.6, 0.3]))
    draws = [sample(logits, np.random.default_rng(s)) for s in range(3000)]
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / 3000, [0.1, 0.6, 0.3], atol=0.03)
    rng1, rng2 = np.random.default_rng(7), np.random.default_rng(7)
    assert [sample(logits, rng1) for _ in range(20)] == [sample(logits, rng2) for _ in range(20)]


def test_bad_sampling_options():
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        filter_probs(np.zeros(3), temperature=-1)
    with pytest.raises(ValueError, match="top_p must be in \\(0, 1\\]"):
        filter_probs(np.zeros(3), top_p=1.5)
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        filter_probs(np.zeros(3), top_k=0)


def test_cached_greedy_generation_equals_recomputing_everything():
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16))
    prompt = [3, 1, 4]
    out = generate(model, prompt, max_new_tokens=10, temperature=0, context=8)
    ids = list(prompt)
    for _ in range(10):  # no cache: run the whole (cropped) context each step
        logits, _ = model(np.array([ids[-8:]]))
        ids.append(int(np.argmax(logits.data[0, -1])))
    assert out == ids


def test_generation_streams_tokens_and_is_reproducible():
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=13, block_size=16, n_layer=1, n_head=2, n_embd=8))
    seen = []
    a = generate(model, [1], max_new_tokens=6, seed=3, top_k=5, on_token=seen.append)
    assert seen == a[1:] and len(a) == 7
    assert generate(model, [1], max_new_tokens=6, seed=3, top_k=5) == a


def test_an_empty_prompt_is_a_clear_error():
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8))
    with pytest.raises(ValueError, match="generate: the prompt must hold at least one token"):
        generate(model, [], max_new_tokens=2)
