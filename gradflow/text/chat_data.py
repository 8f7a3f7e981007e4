"""Fine-tuning data for a chat model: conversations in ChatML, token ids, and targets that teach only the replies.

An instruct model learns to answer, not to write the user's questions, so the loss counts only
the tokens of the assistant's replies. Each reply's closing <|im_end|> counts too: it is how the
model learns to stop. Every other target is -100, the ignore_index of F.cross_entropy:

    <|im_start|>user\\nWhat is 2+2?<|im_end|>\\n<|im_start|>assistant\\n4<|im_end|>\\n
    ------------------ ignored -------------------------------------- 4<|im_end|> -

As in get_batch, targets[t] is the token that follows ids[t], so a sequence of n tokens gives
n - 1 (ids, targets) pairs: a target is kept when the token it names belongs to a reply.

A JSONL file holds one conversation per line, {"messages": [{"role": ..., "content": ...}, ...]};
a plain text file is one document whose every token counts. Batches come padded (pad ids, targets
-100) or packed: every example end to end, cut into blocks of one length, with no padding to waste.
"""

import json
import os

import numpy as np

from gradflow.engine import bounded_json
from gradflow.text.batches import _check_positive_int
from gradflow.text.corpus import read_text

SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index
ROLES = ("system", "user", "assistant")


def chatml_pieces(messages, default_system=SMOLLM2_SYSTEM):
    """[(text, is_reply)]: the ChatML text of the messages in pieces, is_reply True for an assistant's
    content and its closing <|im_end|>. Each message renders as "<|im_start|>{role}\\n{content}<|im_end|>\\n";
    a default system message goes first when the conversation has none (default_system=None: none)."""
    if messages and messages[0]["role"] != "system" and default_system is not None:
        messages = [{"role": "system", "content": default_system}, *messages]
    pieces = []
    for m in messages:
        reply = m["role"] == "assistant"
        pieces += [(f"<|im_start|>{m['role']}\n", False), (f"{m['content']}<|im_end|>", reply), ("\n", False)]
    return pieces


def chatml(messages, add_generation_prompt=True, default_system=SMOLLM2_SYSTEM):
    """The ChatML text of [{"role": ..., "content": ...}, ...], as SmolLM2's chat template renders it; with
    add_generation_prompt it ends with "<|im_start|>assistant\\n", for the model to write the reply."""
    text = "".join(piece for piece, _ in chatml_pieces(messages, default_system))
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def chat_tokens(messages, tokenizer, default_system=SMOLLM2_SYSTEM):
    """(tokens, is_reply): the conversation's token ids and, for each, whether it belongs to a reply.

    Each piece is encoded alone, as in chatting: the prompt, ending "<|im_start|>assistant\n", is
    encoded, and the model writes the reply's tokens after it. Encoding the whole text at once gives
    the same ids except where a reply starts with whitespace, which BPE would join to the newline
    before it: a token the model never sees when it chats.
    """
    tokens, is_reply = [], []
    for piece, reply in chatml_pieces(messages, default_system):
        ids = tokenizer.encode(piece)
        tokens.append(ids)
        is_reply.append(np.full(len(ids), reply))
    return np.concatenate(tokens).astype(np.int64), np.concatenate(is_reply)


def example(tokens, counts):
    """(ids, targets) of one sequence: ids = tokens[:-1], targets[t] = tokens[t + 1] where counts[t + 1],
    else IGNORE_INDEX."""
    tokens, counts = np.asarray(tokens, dtype=np.int64), np.asarray(counts, dtype=bool)
    return tokens[:-1], np.where(counts[1:], tokens[1:], IGNORE_INDEX)


def chat_example(messages, tokenizer, default_system=SMOLLM2_SYSTEM):
    """(ids, targets) of one conversation: only the replies' tokens are targets."""
    return example(*chat_tokens(messages, tokenizer, default_system))


def text_example(text, tokenizer):
    """(ids, targets) of plain text: every token is a target."""
    tokens = tokenizer.encode(text)
    return example(tokens, np.ones(len(tokens), dtype=bool))


def read_chat_jsonl(path):
    """The conversations of a JSONL file, one {"messages": [...]} per line (blank lines skipped).

    A line that is not JSON, or not of this shape, is an error naming the file, the line and the fault.
    """
    conversations = []
    for number, line in enumerate(read_text(path, "read_chat_jsonl").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = bounded_json.loads(line, "it")
        except json.JSONDecodeError as err:
            raise ValueError(
                f"read_chat_jsonl: {path}, line {number}: not valid JSON ({err.msg}, column {err.colno})"
            ) from None
        except ValueError as err:  # nested deeper than any conversation
            raise ValueError(f"read_chat_jsonl: {path}, line {number}: {err}") from None
        problem = _conversation_problem(record)
        if problem:
            raise ValueError(f"read_chat_jsonl: {path}, line {number}: {problem}")
        conversations.append(record["messages"])
    if not conversations:
        raise ValueError(f"read_chat_jsonl: {path} holds no conversation")
    return conversations


def _conversation_problem(record):
    """What is wrong with one line's record, or None when it is a conversation with a reply to learn."""
    if not isinstance(record, dict) or "messages" not in record:
        return 'expected an object {"messages": [...]}'
    messages = record["messages"]
    if not isinstance(messages, list) or not messages:
        return '"messages" must be a non-empty list'
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            return f'message {i} must be an object with exactly "role" and "content", got {json.dumps(m)[:80]}'
        if m["role"] not in ROLES:
            return f"message {i}: role must be one of {', '.join(ROLES)}, got {m['role']!r}"
        if not isinstance(m["content"], str):
            return f"message {i}: content must be a string, got {type(m['content']).__name__}"
    if not any(m["role"] == "assistant" for m in messages):
        return "no assistant message, so nothing to learn"
    return None


def load_examples(path, tokenizer, default_system=SMOLLM2_SYSTEM):
    """[(ids, targets)]: one per conversation of a .jsonl file; any other file is plain text, one example."""
    if os.fspath(path).endswith(".jsonl"):
        return [chat_example(m, tokenizer, default_system) for m in read_chat_jsonl(path)]
    return [text_example(read_text(path, "load_examples"), tokenizer)]


def pad(examples, pad_id, block_size=None):
    """(ids, targets), arrays (B, T): the examples cut to block_size, then padded on the right to the
    longest, ids with pad_id and targets with IGNORE_INDEX, so the padding is never learned. In a causal
    model the padding comes after every real token, so no real token attends to it."""
    examples = [(ids[:block_size], targets[:block_size]) for ids, targets in examples]
    T = max(len(ids) for ids, _ in examples)
    ids = np.full((len(examples), T), pad_id, dtype=np.int64)
    targets = np.full((len(examples), T), IGNORE_INDEX, dtype=np.int64)
    for row, (x, y) in enumerate(examples):
        ids[row, : len(x)], targets[row, : len(y)] = x, y
    return ids, targets


def pack(examples, block_size, pad_id):
    """(ids, targets), arrays (N, block_size): every example end to end, cut into blocks of block_size;
    the last block is padded (pad_id, IGNORE_INDEX). No padding is wasted between examples. A block
    may hold the end of one conversation and the start of the next, which then attends to the
    previous one as context; its targets are still only its own replies."""
    _check_positive_int("pack", "block_size", block_size)
    ids = np.concatenate([x for x, _ in examples])
    targets = np.concatenate([y for _, y in examples])
    n = -(-len(ids) // block_size) * block_size  # rounded up to whole blocks
    ids = np.concatenate([ids, np.full(n - len(ids), pad_id, dtype=np.int64)])
    targets = np.concatenate([targets, np.full(n - len(targets), IGNORE_INDEX, dtype=np.int64)])
    return ids.reshape(-1, block_size), targets.reshape(-1, block_size)


def batches(examples, batch_size, pad_id, block_size=None, packed=False, rng=None):
    """(ids, targets) batches of up to batch_size rows covering the examples once: padded examples, or
    with packed blocks of block_size. rng (a numpy Generator) shuffles the order; None keeps it."""
    _check_positive_int("batches", "batch_size", batch_size)
    if not examples:
        raise ValueError("batches: examples is empty")
    if packed and block_size is None:
        raise ValueError("batches: packed=True needs a block_size")
    if packed:
        ids, targets = pack(examples, block_size, pad_id)
        order = np.arange(len(ids)) if rng is None else rng.permutation(len(ids))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            yield ids[rows], targets[rows]
        return
    order = np.arange(len(examples)) if rng is None else rng.permutation(len(examples))
    for start in range(0, len(order), batch_size):
        yield pad([examples[i] for i in order[start : start + batch_size]], pad_id, block_size)
