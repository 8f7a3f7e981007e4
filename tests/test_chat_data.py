"""Chat fine-tuning data: ChatML pieces, targets only on the replies, JSONL errors, padding and packing."""

import json

import numpy as np
import pytest

from gradflow.text import CharTokenizer
from gradflow.text.chat_data import (
    SMOLLM2_SYSTEM,
    batches,
    chat_example,
    chat_tokens,
    chatml,
    load_examples,
    pack,
    pad,
    read_chat_jsonl,
    text_example,
)

TWO_TURNS = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "yo"},
    {"role": "user", "content": "ok?"},
    {"role": "assistant", "content": "no"},
]
TOK = CharTokenizer("<|>_imstarendusegyohk?\n abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,'")


def view(tokens, counts):
    """The tokens as text, with '.' for each one that is not learned."""
    return "".join(TOK.decode([t]) if c else "." for t, c in zip(tokens, counts))


def test_only_the_replies_and_their_end_token_are_learned():
    tokens, counts = chat_tokens(TWO_TURNS, TOK, default_system=None)
    assert TOK.decode(tokens) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
        "<|im_start|>user\nok?<|im_end|>\n<|im_start|>assistant\nno<|im_end|>\n"
    )
    # written out by hand, one line of the rendered text per line, '.' where nothing is learned
    assert view(tokens, counts) == (
        "................."  # <|im_start|>user\n
        "............."  # hi<|im_end|>\n
        "......................"  # <|im_start|>assistant\n
        "yo<|im_end|>."  # yo<|im_end|>\n: the reply and its end, not the newline after it
        "................."  # <|im_start|>user\n
        ".............."  # ok?<|im_end|>\n
        "......................"  # <|im_start|>assistant\n
        "no<|im_end|>."  # no<|im_end|>\n
    )


def test_targets_are_the_next_token_where_it_is_learned():
    tokens, counts = chat_tokens(TWO_TURNS, TOK, default_system=None)
    ids, targets = chat_example(TWO_TURNS, TOK, default_system=None)
    assert np.array_equal(ids, tokens[:-1]) and targets.shape == ids.shape
    first = len("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert TOK.decode(ids[first - 1 : first + 1]) == "\ny"  # after "assistant\n" the target is "y"
    assert targets[first - 2] == -100 and TOK.decode(targets[first - 1 : first + 11]) == "yo<|im_end|>"
    assert targets[first + 11] == -100  # the newline after <|im_end|> is not taught
    assert TOK.decode(targets[targets != -100]) == "yo<|im_end|>no<|im_end|>"


def test_the_default_system_message_and_the_generation_prompt():
    with_system = chatml(TWO_TURNS, add_generation_prompt=False)
    assert with_system.startswith(f"<|im_start|>system\n{SMOLLM2_SYSTEM}<|im_end|>\n<|im_start|>user\nhi")
    assert chatml(TWO_TURNS[:3], True, None) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
        "<|im_start|>user\nok?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_plain_text_learns_every_token():
    ids, targets = text_example("abc d", TOK)
    assert TOK.decode(ids) == "abc " and TOK.decode(targets) == "bc d"


def write_lines(tmp_path, lines, name="chats.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reads_jsonl_and_plain_text(tmp_path):
    path = write_lines(tmp_path, [json.dumps({"messages": TWO_TURNS}), "", json.dumps({"messages": TWO_TURNS[:2]})])
    assert read_chat_jsonl(path) == [TWO_TURNS, TWO_TURNS[:2]]
    examples = load_examples(path, TOK, default_system=None)
    assert len(examples) == 2 and np.array_equal(examples[0][1], chat_example(TWO_TURNS, TOK, None)[1])
    text = tmp_path / "notes.txt"
    text.write_text("hello there", encoding="utf-8")
    [(ids, targets)] = load_examples(text, TOK)
    assert TOK.decode(ids) == "hello ther" and TOK.decode(targets) == "ello there"


GOOD = json.dumps({"messages": TWO_TURNS})


@pytest.mark.parametrize(
    "bad, fault",
    [
        ('{"messages": [', r"not valid JSON \(Expecting value, column 15\)"),
        ("[1, 2]", r'expected an object \{"messages": \[\.\.\.\]\}'),
        ('{"messages": []}', r'"messages" must be a non-empty list'),
        ('{"messages": [{"role": "user"}]}', r'message 0 must be an object with exactly "role" and "content"'),
        ('{"messages": [{"role": "bot", "content": "x"}]}',
         r"message 0: role must be one of system, user, assistant, got 'bot'$"),
        ('{"messages": [{"role": "assistant", "content": 3}]}', r"message 0: content must be a string, got int"),
        ('{"messages": [{"role": "user", "content": "x"}]}', r"no assistant message, so nothing to learn"),
    ],
)  # fmt: skip
def test_a_bad_line_names_the_file_the_line_and_the_fault(tmp_path, bad, fault):
    path = write_lines(tmp_path, [GOOD, GOOD, bad])
    with pytest.raises(ValueError, match=f"^read_chat_jsonl: {path}, line 3: {fault}"):
        read_chat_jsonl(path)


def test_padding():
    a = text_example("abcde", TOK)
    b = text_example("xy", TOK)
    ids, targets = pad([a, b], pad_id=0)
    assert ids.shape == targets.shape == (2, 4)
    assert np.array_equal(ids[1], [TOK.encode("x")[0], 0, 0, 0])
    assert np.array_equal(targets[1], [TOK.encode("y")[0], -100, -100, -100])
    assert np.array_equal(ids[0], a[0]) and np.array_equal(targets[0], a[1])
    cut_ids, cut_targets = pad([a, b], pad_id=0, block_size=3)
    assert cut_ids.shape == (2, 3) and TOK.decode(cut_targets[0]) == "bcd"


def test_packing():
    a = chat_example(TWO_TURNS[:2], TOK, default_system=None)  # 17 + 13 + 22 + 13 = 65 tokens: 64 pairs
    b = text_example("abcdefghij", TOK)  # 9 pairs
    ids, targets = pack([a, b], block_size=16, pad_id=0)
    assert ids.shape == targets.shape == (5, 16)  # 73 pairs in 5 blocks, the last holding 9 and 7 of padding
    assert np.array_equal(ids.reshape(-1)[:73], np.concatenate([a[0], b[0]]))
    assert np.array_equal(targets.reshape(-1)[:73], np.concatenate([a[1], b[1]]))
    assert (ids[-1, 9:] == 0).all() and (targets[-1, 9:] == -100).all()
    assert TOK.decode(targets[targets != -100]) == "yo<|im_end|>bcdefghij"


def test_batches_cover_every_example_once():
    examples = [text_example(s, TOK) for s in ("abc", "defgh", "ij", "klmn", "op")]
    rows = [row for ids, _ in batches(examples, batch_size=2, pad_id=0) for row in ids]
    assert len(rows) == 5 and rows[2].tolist() == [TOK.encode("i")[0], 0, 0]  # padded to "klmn"'s 3 pairs
    shuffled = list(batches(examples, batch_size=2, pad_id=0, rng=np.random.default_rng(0)))
    assert sorted(TOK.decode(r[r != -100]) for _, t in shuffled for r in t) == ["bc", "efgh", "j", "lmn", "p"]
    packed = list(batches(examples, batch_size=2, pad_id=0, block_size=4, packed=True))
    assert [ids.shape for ids, _ in packed] == [(2, 4), (1, 4)]  # 2 + 4 + 1 + 3 + 1 = 11 pairs in 3 blocks of 4
    with pytest.raises(ValueError, match="batches: packed=True needs a block_size"):
        next(batches(examples, batch_size=2, pad_id=0, packed=True))
