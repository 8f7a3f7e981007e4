"""gradflow.text: tokenizers round-trip, BPE learns the merges worked by hand, corpora and batches fail clearly."""

import json
import re

import numpy as np
import pytest

import gradflow as gf
from gradflow.text import (
    BPETokenizer,
    CharTokenizer,
    default_corpus,
    get_batch,
    load_text,
    load_tokenizer,
    split,
)

# text a byte-level tokenizer must survive although the corpus has none of it: emoji (with a
# zero-width joiner and a flag), CJK, combining marks, right-to-left script, control characters
# and NUL, the highest code point, and Windows line ends
UNUSUAL = "👩\u200d👩\u200d👧 🇫🇷 漢字かな 한국어 e\u0301 n\u0303 ﷽ مرحبا Ελληνικά\x00\x07\x1b\x7f \U0010ffff\r\n\ttab"


@pytest.fixture(scope="module")
def corpus():
    return default_corpus()


@pytest.fixture(scope="module")
def bpe(corpus):
    return BPETokenizer.train(corpus, vocab_size=512)


# --- default corpus -------------------------------------------------------------------------------


def test_default_corpus_is_the_python_docs_and_the_same_every_time(corpus):
    # the exact size follows the Python version (3.11: 464,970 characters, 103 distinct)
    assert 300_000 < len(corpus) < 1_000_000
    assert 80 < len(set(corpus)) < 200
    assert "Python" in corpus and "lambda" in corpus
    assert default_corpus() == corpus


# --- character tokenizer --------------------------------------------------------------------------


def test_char_round_trip_on_the_corpus(corpus):
    tok = CharTokenizer.from_text(corpus)
    ids = tok.encode(corpus)
    assert tok.vocab_size == len(set(corpus))
    assert ids.dtype == np.int64 and ids.shape == (len(corpus),)
    assert ids.min() == 0 and ids.max() == tok.vocab_size - 1
    assert tok.decode(ids) == corpus
    assert CharTokenizer(corpus) == tok


def test_char_ids_follow_sorted_characters():
    tok = CharTokenizer("hello world")
    assert tok.chars == [" ", "d", "e", "h", "l", "o", "r", "w"]
    assert tok.encode("hold").tolist() == [3, 5, 4, 1]
    assert tok.decode([3, 2, 4, 4, 5]) == "hello"
    assert tok.encode("").tolist() == [] and tok.decode([]) == ""


def test_char_unknown_characters_are_named():
    tok = CharTokenizer("abc")
    message = "CharTokenizer.encode: characters not in the vocabulary: 'é', '€' (vocabulary of 3 characters)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        tok.encode("aébé€c")


def test_char_many_unknown_characters_are_counted():
    with pytest.raises(ValueError, match=r"'j' and 3 more \(vocabulary of 1 characters\)$"):
        CharTokenizer("z").encode("abcdefghijklm")


def test_char_decode_rejects_ids_outside_the_vocabulary():
    with pytest.raises(
        ValueError, match=r"CharTokenizer.decode: id 3 at position 1 is outside the vocabulary \[0, 3\)"
    ):
        CharTokenizer("abc").decode([0, 3])
    with pytest.raises(TypeError, match="ids must be integers"):
        CharTokenizer("abc").decode([0.0, 1.0])


def test_char_of_empty_text_is_an_error():
    with pytest.raises(ValueError, match="CharTokenizer: the corpus is empty"):
        CharTokenizer("")


# --- BPE: the hand-worked example -----------------------------------------------------------------


def test_bpe_merges_of_the_classic_example():
    # aaabdaaabac: (a, a) occurs 4 times (overlapping) -> 256 = "aa":  [aa] a b d [aa] a b a c
    # then (256, a) and (a, b) both occur twice; the tie goes to the lower ids, (a, b) -> 257:
    #   [aa] [ab] d [aa] [ab] a c;  then (256, 257) occurs twice -> 258 = "aaab":  258 d 258 a c
    tok = BPETokenizer.train("aaabdaaabac", vocab_size=259, pattern=None)
    a, b = ord("a"), ord("b")
    assert tok.merges == [(a, a), (a, b), (256, 257)]
    assert tok.token_bytes[256:] == [b"aa", b"ab", b"aaab"]
    assert tok.encode("aaabdaaabac").tolist() == [258, ord("d"), 258, a, ord("c")]
    assert tok.decode([258, ord("d"), 258, a, ord("c")]) == "aaabdaaabac"


def test_bpe_stops_when_no_pair_occurs_twice():
    # after the three merges every pair of 258 d 258 a c occurs once: a fourth merge would memorise
    tok = BPETokenizer.train("aaabdaaabac", vocab_size=1000, pattern=None)
    assert tok.vocab_size == 259
    assert BPETokenizer.train("aaabdaaabac", vocab_size=1000) == BPETokenizer(tok.merges)


def test_bpe_ties_go_to_the_lowest_ids():
    # (c, d) is met first, but (a, b) has the lower ids: both occur twice
    tok = BPETokenizer.train("cdabcdab", vocab_size=257, pattern=None)
    assert tok.merges == [(ord("a"), ord("b"))]


def test_bpe_merges_a_run_of_one_byte_left_to_right():
    tok = BPETokenizer([(ord("a"), ord("a"))], pattern=None)
    assert tok.encode("aaaaa").tolist() == [256, 256, ord("a")]
    assert tok.encode("baaab").tolist() == [ord("b"), 256, ord("a"), ord("b")]


def test_bpe_merges_stay_inside_the_split_chunks():
    # chunks "ab", " ab", " ab", " ab": the pair (b, space) crosses chunks and is never merged
    split_tok = BPETokenizer.train("ab ab ab ab", vocab_size=300)
    whole_tok = BPETokenizer.train("ab ab ab ab", vocab_size=300, pattern=None)
    assert split_tok.token_bytes[256:] == [b"ab", b" ab"]
    assert any(b"b " in t for t in whole_tok.token_bytes[256:])
    assert split_tok.encode("ab ab").tolist() == [256, 257]


def test_bpe_training_longer_only_adds_merges(corpus):
    text = corpus[:50_000]
    assert BPETokenizer.train(text, 400).merges[:44] == BPETokenizer.train(text, 300).merges


# --- BPE on the corpus and on any text ------------------------------------------------------------


def test_bpe_round_trip_on_the_corpus(corpus, bpe):
    assert bpe.vocab_size == 512
    ids = bpe.encode(corpus)
    assert ids.dtype == np.int64 and ids.max() < 512
    assert bpe.decode(ids) == corpus


def test_bpe_round_trip_on_unusual_unicode_with_bytes_never_seen(corpus, bpe):
    unseen = set(UNUSUAL.encode("utf-8")) - set(corpus.encode("utf-8"))
    assert len(unseen) > 10
    for text in [UNUSUAL, UNUSUAL * 3, "", " ", "\x00", corpus[:1000] + UNUSUAL + corpus[1000:2000]]:
        assert bpe.decode(bpe.encode(text)) == text
    whole = BPETokenizer(bpe.merges, pattern=None)
    assert whole.decode(whole.encode(UNUSUAL)) == UNUSUAL


def test_bpe_round_trip_on_random_code_points(bpe):
    rng = np.random.default_rng(0)
    code_points = np.r_[0:0xD800, 0xE000:0x110000]  # every code point but the surrogates
    whole = BPETokenizer(bpe.merges, pattern=None)
    for _ in range(50):
        text = "".join(map(chr, rng.choice(code_points, size=rng.integers(1, 40))))
        text += "".join(map(chr, rng.integers(0, 300, size=20)))
        assert bpe.decode(bpe.encode(text)) == text
        assert whole.decode(whole.encode(text)) == text


def test_bpe_decoding_half_a_character_gives_the_replacement_character(bpe):
    ids = bpe.encode("€")  # three bytes, none merged in an ASCII corpus
    assert ids.tolist() == list("€".encode())
    assert bpe.decode(ids[:2]) == "\ufffd"
    assert bpe.decode(ids[1:]) == "\ufffd\ufffd"


def test_bpe_compresses_the_corpus_more_as_the_vocabulary_grows(corpus, bpe):
    # training with a smaller vocab_size gives the first merges of a larger one
    sample = corpus[:100_000]
    per_char = [len(BPETokenizer(bpe.merges[:n]).encode(sample)) / len(sample) for n in (0, 64, 128, 256)]
    assert per_char[0] >= 1
    assert all(later < earlier for earlier, later in zip(per_char, per_char[1:]))
    assert per_char[-1] < 0.5


def test_bpe_lone_surrogate_is_a_clear_error(bpe):
    with pytest.raises(ValueError, match=r"BPETokenizer.encode: the text is not valid Unicode: '\\ud800'"):
        bpe.encode("ab\ud800")


def test_bpe_train_arguments_are_checked():
    with pytest.raises(ValueError, match="vocab_size must be at least 256"):
        BPETokenizer.train("abc", 100)
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        BPETokenizer.train("abc", 300.0)
    with pytest.raises(ValueError, match="training text is empty"):
        BPETokenizer.train("", 300)
    with pytest.raises(ValueError, match="does not match every character"):
        BPETokenizer.train("ab cd", 300, pattern=r"\w+")


# --- JSON: to_dict, save, load --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_save_and_load_give_an_equal_tokenizer(tmp_path, corpus, bpe, kind):
    tok = bpe if kind == "bpe" else CharTokenizer(corpus + "é\x00\U0010ffff")
    d = tok.to_dict()
    assert d["type"] == kind and json.loads(json.dumps(d)) == d
    path = tmp_path / f"{kind}.json"
    tok.save(path)
    for loaded in [type(tok).load(path), load_tokenizer(path), load_tokenizer(str(path)), load_tokenizer(d)]:
        assert loaded == tok and loaded.to_dict() == d
        assert loaded.encode(corpus[:5000]).tolist() == tok.encode(corpus[:5000]).tolist()


def test_loading_a_corrupt_file_names_it(tmp_path, bpe):
    path = tmp_path / "tok.json"
    path.write_text('{"type": "bpe", "merges": [[97, 98]')
    with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: not a tokenizer JSON file"):
        load_tokenizer(path)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected an object, got list"):
        BPETokenizer.load(path)
    bpe.save(path)
    with pytest.raises(
        ValueError, match=f"^{re.escape(str(path))}: .*expected a tokenizer of type 'char', got type 'bpe'"
    ):
        CharTokenizer.load(path)
    with pytest.raises(FileNotFoundError, match="^load_tokenizer: no such file: .*missing.json"):
        load_tokenizer(tmp_path / "missing.json")
    with pytest.raises(IsADirectoryError, match="^BPETokenizer.load: .* is a directory"):
        BPETokenizer.load(tmp_path)


@pytest.mark.parametrize(
    "d, message",
    [
        ({"type": "wordpiece"}, "unknown tokenizer type 'wordpiece' (known types: 'bpe', 'char', 'pretrained_bpe')"),
        ({"type": "bpe", "merges": []}, "lacks 'vocab_size', 'pattern'"),
        ({"type": "bpe", "vocab_size": 258, "pattern": None, "merges": [[97, 98]]}, "vocab_size 258 does not match"),
        ({"type": "bpe", "vocab_size": 257, "pattern": None, "merges": [[97, 300]]}, "merge 0 must be a pair of ids"),
        ({"type": "bpe", "vocab_size": 257, "pattern": None, "merges": [[97]]}, "merge 0 must be a pair of ids"),
        ({"type": "bpe", "vocab_size": 256, "pattern": "(", "merges": []}, "not a valid regular expression"),
        ({"type": "bpe", "vocab_size": 256, "pattern": 3, "merges": []}, "pattern must be a regular expression"),
        ({"type": "char", "chars": "ba"}, "'chars' must be sorted and without repeats"),
        ({"type": "char", "chars": ""}, "'chars' must be a non-empty string"),
    ],
)
def test_mismatched_tokenizer_dicts_are_clear_errors(d, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load_tokenizer(d)


def test_load_tokenizer_of_something_else_is_a_type_error():
    with pytest.raises(TypeError, match="load_tokenizer: expected a dict or a path, got int"):
        load_tokenizer(3)


# --- load_text ------------------------------------------------------------------------------------


def test_load_text_keeps_the_bytes(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("\ufeffline one\r\nnaïve ☕\n".encode())
    assert load_text(path) == "line one\r\nnaïve ☕\n"
    assert load_text(str(path)) == load_text(path)


@pytest.mark.parametrize(
    "content, error, message",
    [
        (b"", ValueError, "is empty"),
        (b"text\x00\x01\x02", ValueError, "looks binary, not text: it contains a NUL byte at offset 4"),
        ("naïve".encode() + b"\xff rest", ValueError, "is not valid UTF-8: byte 0xff at offset 6"),
        ("café".encode("latin-1"), ValueError, "is not valid UTF-8: byte 0xe9 at offset 3"),
    ],
)
def test_load_text_rejects_what_is_not_text(tmp_path, content, error, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(error, match=f"^load_text: {re.escape(repr(str(path)))} {re.escape(message)}"):
        load_text(path)


def test_load_text_of_a_missing_path_or_a_directory(tmp_path):
    with pytest.raises(
        FileNotFoundError, match=f"load_text: no such file: {re.escape(repr(str(tmp_path / 'no.txt')))}"
    ):
        load_text(tmp_path / "no.txt")
    with pytest.raises(IsADirectoryError, match=f"load_text: {re.escape(repr(str(tmp_path)))} is a directory"):
        load_text(tmp_path)
    with pytest.raises(TypeError, match="expected a path"):
        load_text(3)


# --- split and get_batch --------------------------------------------------------------------------


def test_split_takes_the_first_and_last_parts():
    ids = np.arange(1000)
    train, val = split(ids)
    assert train.shape == (900,) and val.shape == (100,)
    assert np.array_equal(np.concatenate([train, val]), ids) and train.dtype == np.int64
    assert [len(part) for part in split(ids, val_fraction=0.25)] == [750, 250]
    assert [len(part) for part in split(list(range(10)), val_fraction=0.29)] == [7, 3]
    assert [len(part) for part in split(ids, val_fraction=0)] == [1000, 0]


def test_split_checks_its_arguments():
    with pytest.raises(ValueError, match=r"val_fraction must be in \[0, 1\), got 1"):
        split(np.arange(10), val_fraction=1)
    with pytest.raises(ValueError, match="expected a 1-D sequence of token ids, got shape"):
        split(np.zeros((2, 3), dtype=np.int64))


def test_split_of_a_corpus_too_short_for_the_block_names_the_sizes():
    split(np.arange(330), block_size=32)  # 297 and 33 tokens: just enough
    message = (
        "split: the validation split (10% of 320) has 32 tokens, too few for block_size 32 "
        "(a window needs block_size + 1 = 33 tokens)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        split(np.arange(320), block_size=32)
    with pytest.raises(ValueError, match=r"the training split \(90% of 20\) has 18 tokens, too few for block_size 32"):
        split(np.arange(20), block_size=32)


def test_get_batch_windows_and_targets_shifted_by_one():
    ids = np.arange(100, 1100)  # each id is its position + 100, so y = x + 1 exactly
    x, y = get_batch(ids, batch_size=4, block_size=8, rng=np.random.default_rng(0))
    assert x.shape == y.shape == (4, 8) and x.dtype == y.dtype == np.int64
    assert np.array_equal(y, x + 1)
    assert np.array_equal(np.diff(x, axis=1), np.ones((4, 7)))


def test_get_batch_is_reproducible_from_the_generator_alone():
    ids = np.random.default_rng(1).integers(0, 50, size=500)
    gf.manual_seed(0)
    state = gf.get_rng_state()
    x1, y1 = get_batch(ids, 8, 16, np.random.default_rng(42))
    x2, y2 = get_batch(ids, 8, 16, np.random.default_rng(42))
    x3, _ = get_batch(ids, 8, 16, np.random.default_rng(43))
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2) and not np.array_equal(x1, x3)
    assert gf.get_rng_state() == state  # gradflow's own generator is untouched


def test_get_batch_windows_reach_both_ends_and_no_further():
    ids = np.arange(12)
    x, y = get_batch(ids, batch_size=2000, block_size=8, rng=np.random.default_rng(0))
    assert x[:, 0].min() == 0 and x[:, 0].max() == 3  # windows start at 0 .. 12 - 8 - 1
    assert y.max() == 11
    x, y = get_batch(np.arange(9), batch_size=3, block_size=8, rng=np.random.default_rng(0))
    assert np.array_equal(x, np.tile(np.arange(8), (3, 1))) and np.array_equal(y, x + 1)


def test_get_batch_of_a_sequence_too_short_names_the_sizes():
    message = (
        "get_batch: the token sequence has 8 tokens, too few for block_size 8 "
        "(a window needs block_size + 1 = 9 tokens)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        get_batch(np.arange(8), batch_size=2, block_size=8, rng=np.random.default_rng(0))


def test_get_batch_checks_its_arguments():
    ids = np.arange(100)
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator, got NoneType"):
        get_batch(ids, 2, 8, None)
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        get_batch(ids, 0, 8, np.random.default_rng(0))
    with pytest.raises(TypeError, match="block_size must be an int"):
        get_batch(ids, 2, 8.0, np.random.default_rng(0))
    with pytest.raises(TypeError, match="token ids must be integers"):
        get_batch(np.linspace(0, 1, 100), 2, 8, np.random.default_rng(0))


def test_split_counts_as_the_published_ninety_ten_split():
    train, val = split(np.arange(1_115_394))  # tiny shakespeare's length in characters
    assert (len(train), len(val)) == (1_003_854, 111_540)


def test_bpe_encode_equals_replaying_every_merge_in_order(corpus, bpe):
    """encode merges each chunk by rank; replaying all merges over the whole text, in order, gives the same ids."""
    from gradflow.text.bpe import bytes_and_chunk_starts, merge_pair

    text = corpus[:20000] + " naïve café ☕ aaaa"
    ids, starts = bytes_and_chunk_starts(bpe.chunks(text, "t"), "t")
    for i, pair in enumerate(bpe.merges):
        ids, kept = merge_pair(ids, starts, pair, 256 + i)
        starts = starts[kept]
    assert bpe.encode(text).tolist() == ids.tolist()
