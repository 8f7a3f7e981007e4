"""gradflow.text: tokenizers round-trip, BPE learns the merges worked by hand, corpora and batches fail clearly."""

import json
import re
import time

import numpy as np
import pytest

import gradflow as gf
from gradflow.text import (
    SPLIT_PATTERN,
    BPETokenizer,
    CharTokenizer,
    PretrainedBPETokenizer,
    default_corpus,
    get_batch,
    load_text,
    load_tokenizer,
    split,
)
from gradflow.text.bpe import FIRST_SPLIT_PATTERN

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


# the end of every unknown-pattern message
UNKNOWN = (
    "; gradflow accepts only its known pre-tokenizer patterns "
    "(a pattern from a file could take time exponential in the text's length)"
)


def bpe_dict(**fields):
    """A valid 'bpe' tokenizer dict of one merge (a, b), with `fields` replaced."""
    return {"type": "bpe", "vocab_size": 257, "pattern": None, "merges": [[97, 98]], **fields}


@pytest.mark.parametrize(
    "d, message",
    [
        ({"type": "wordpiece"}, "unknown tokenizer type 'wordpiece' (known types: 'bpe', 'char', 'pretrained_bpe')"),
        ({"type": ["bpe"]}, "unknown tokenizer type ['bpe'] (known types: 'bpe', 'char', 'pretrained_bpe')"),
        (
            {"type": "bpe", "merges": []},
            "BPETokenizer.from_dict: the 'bpe' tokenizer dict lacks 'vocab_size', 'pattern'",
        ),
        (
            bpe_dict(vocab_size=258),
            "BPETokenizer.from_dict: vocab_size 258 does not match the 1 merges (expected 256 + 1 = 257)",
        ),
        (bpe_dict(vocab_size="257"), "BPETokenizer.from_dict: 'vocab_size' must be an int, got '257'"),
        (bpe_dict(vocab_size=True), "BPETokenizer.from_dict: 'vocab_size' must be an int, got True"),
        (bpe_dict(merges={"a": 1}), "BPETokenizer.from_dict: 'merges' must be a list of [a, b] pairs, got {'a': 1}"),
        (bpe_dict(merges=[[97, 300]]), "BPETokenizer: merges[0] must be a pair of ids below 256, got [97, 300]"),
        (bpe_dict(merges=[[97]]), "BPETokenizer: merges[0] must be a pair of ids below 256, got [97]"),
        (bpe_dict(merges=[[97, -1]]), "BPETokenizer: merges[0] must be a pair of ids below 256, got [97, -1]"),
        (bpe_dict(merges=[[97, 98.0]]), "BPETokenizer: merges[0] must be a pair of ids below 256, got [97, 98.0]"),
        (bpe_dict(vocab_size=258, merges=[[97, 98], [97, 98]]), "BPETokenizer: merges[1] [97, 98] repeats merges[0]"),
        (bpe_dict(merges=[[256, 98]]), "BPETokenizer: merges[0] must be a pair of ids below 256, got [256, 98]"),
        (bpe_dict(pattern=3), "BPETokenizer.from_dict: 'pattern' must be a string or null, got 3"),
        (bpe_dict(pattern="("), "BPETokenizer.from_dict: unknown split pattern '('" + UNKNOWN),
        (
            {"type": "char", "chars": "ba"},
            "CharTokenizer.from_dict: 'chars' must be sorted and without repeats: 'b' comes before 'a'",
        ),
        (
            {"type": "char", "chars": "abbc"},
            "CharTokenizer.from_dict: 'chars' must be sorted and without repeats: 'b' is listed twice",
        ),
        ({"type": "char", "chars": ""}, "CharTokenizer.from_dict: 'chars' must be a non-empty string, got ''"),
        (
            {"type": "char", "chars": ["a", "b"]},
            "CharTokenizer.from_dict: 'chars' must be a non-empty string, got ['a', 'b']",
        ),
    ],
)
def test_malformed_tokenizer_dicts_are_one_line_naming_the_field(d, message):
    with pytest.raises(ValueError, match=f"^load_tokenizer: {re.escape(message)}$"):
        load_tokenizer(d)


def pretrained_dict(**fields):
    """A valid 'pretrained_bpe' tokenizer dict (a control token, the 256 bytes, "ab"), with `fields` replaced."""
    from gradflow.text.pretrained_bpe import BYTE_TO_CHAR

    tokens = ["<|end|>"] + [BYTE_TO_CHAR[b] for b in range(256)] + ["ab"]
    return {**PretrainedBPETokenizer(tokens, ["a b"], control=[0]).to_dict(), **fields}


def test_the_pretrained_dict_of_these_tests_loads():
    tok = load_tokenizer(pretrained_dict())
    assert tok.encode("ab<|end|>a").tolist() == [257, 0, 98]


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(tokens="abc"), "PretrainedBPETokenizer.from_dict: 'tokens' must be a list of strings, got 'abc'"),
        (dict(tokens=[]), "PretrainedBPETokenizer: 'tokens' is empty"),
        (dict(tokens=["a", 7]), "PretrainedBPETokenizer: tokens[1] must be a string, got 7"),
        (dict(tokens=["x", "a", "x"], control=[]), "PretrainedBPETokenizer: tokens[2] 'x' repeats tokens[0]"),
        (dict(control=[258]), "PretrainedBPETokenizer: control[0] 258 is outside the vocabulary [0, 258)"),
        (dict(control=[-1]), "PretrainedBPETokenizer: control[0] -1 is outside the vocabulary [0, 258)"),
        (dict(control=[0, 0]), "PretrainedBPETokenizer: control[1] 0 is listed twice"),
        (dict(control=["0"]), "PretrainedBPETokenizer: control[0] must be an id, got '0'"),
        (dict(control=[True]), "PretrainedBPETokenizer: control[0] must be an id, got True"),
        (dict(control=0), "PretrainedBPETokenizer.from_dict: 'control' must be a list of ids, got 0"),
        (dict(tokens=["", "a"], control=[0]), "PretrainedBPETokenizer: control[0] is token 0, which is empty"),
        (dict(split_digits="yes"), "PretrainedBPETokenizer.from_dict: 'split_digits' must be true or false, got 'yes'"),
        (dict(merges=["a b", "ab zz"]), "PretrainedBPETokenizer: merges[1] 'ab zz' is not two earlier tokens"),
        (dict(merges=["a b", "a  b"]), "PretrainedBPETokenizer: merges[1] 'a  b' is not two earlier tokens"),
        (dict(merges=["a b", "a b"]), "BPETokenizer: merges[1] [97, 98] repeats merges[0]"),
        (dict(merges=[["a", "b"]]), "PretrainedBPETokenizer: merges[0] must be a string 'a b', got ['a', 'b']"),
        (dict(pattern=r"\w+"), "PretrainedBPETokenizer.from_dict: unknown split pattern '\\\\w+'" + UNKNOWN),
        (
            dict(tokens=["a" * 200, "a" * 200], control=[]),  # a long value is cut short in the message
            f"PretrainedBPETokenizer: tokens[1] {repr('a' * 200)[:57]}... repeats tokens[0]",
        ),
    ],
)
def test_malformed_pretrained_tokenizer_dicts_are_one_line_naming_the_field(fields, message):
    d = pretrained_dict(**fields)
    with pytest.raises(ValueError, match=f"^a.json: {re.escape(message)}$"):
        load_tokenizer(d, source="a.json")


def test_load_tokenizer_of_something_else_is_a_type_error():
    with pytest.raises(TypeError, match="load_tokenizer: expected a dict or a path, got int"):
        load_tokenizer(3)


def test_a_tokenizer_from_a_file_that_is_not_an_object_is_a_value_error_naming_the_file():
    with pytest.raises(ValueError, match=r"^out/model.npz: the tokenizer must be a JSON object, got list$"):
        load_tokenizer([1, 2], source="out/model.npz")


# --- split patterns: only the known ones load ---------------------------------------------------------


@pytest.mark.parametrize("pattern", [r"(a|a)+$", r"(a+)+$", r"(x+x+)+y", "." * 10_000])
def test_an_unknown_split_pattern_is_refused_at_once(pattern):
    """(a|a)+$ doubles its matching time with every 'a' (22 of them: seconds): it is refused, never compiled."""
    start = time.perf_counter()
    shown = repr(pattern) if len(repr(pattern)) <= 60 else repr(pattern)[:57] + "..."
    message = f"out/model.npz: BPETokenizer.from_dict: unknown split pattern {shown}" + UNKNOWN
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        load_tokenizer(bpe_dict(pattern=pattern), source="out/model.npz")
    assert time.perf_counter() - start < 0.5


def test_a_pattern_in_a_json_file_names_the_file(tmp_path):
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(bpe_dict(pattern="(a|a)+$")))
    with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: BPETokenizer.from_dict: unknown split pattern"):
        load_tokenizer(path)
    with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: BPETokenizer.from_dict: unknown split pattern"):
        BPETokenizer.load(path)


@pytest.mark.parametrize("pattern", [SPLIT_PATTERN, FIRST_SPLIT_PATTERN, None])
def test_the_known_split_patterns_load(pattern):
    """GPT-2's (gradflow writes it, the pretrained tokenizer uses it), gradflow's first, and none."""
    tok = load_tokenizer(bpe_dict(pattern=pattern))
    assert tok.pattern == pattern
    assert tok.decode(tok.encode("it's 42 naïve ab!")) == "it's 42 naïve ab!"


def test_a_tokenizer_with_its_own_pattern_works_but_is_not_saved(tmp_path):
    tok = BPETokenizer.train("ab ab cd", 260, pattern=r"\w+|\W+")  # fine in Python: the user chose it
    assert tok.decode(tok.encode("ab cd")) == "ab cd"
    message = r"BPETokenizer.save: the split pattern '\\w+|\\W+' is not one gradflow reads back from a file"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        tok.save(tmp_path / "tok.json")
    assert not (tmp_path / "tok.json").exists()


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
