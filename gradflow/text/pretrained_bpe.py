"""A pretrained model's byte-level BPE tokenizer (GPT-2 style), from its vocabulary and merge list.

A model file such as SmolLM2's GGUF stores the tokenizer as three lists:
    tokens   the vocabulary, id -> token string ("Ġthe" for " the": see `BYTE_TO_CHAR`)
    merges   "Ġ t", "Ġ a", "i n", ... in the order they were learned
    types    1 for a normal token, 3 for a control token such as <|im_start|>

This is gradflow's own BPE (`BPETokenizer`) with two differences. Its ids are the file's: bytes
and merges are numbered 0..255 and 256 + i inside, as in `BPETokenizer`, and one table turns
those into the vocabulary's ids. And text goes through three cuts before any merge:
    1. control tokens are split out and become their own ids (a user typing "<|im_end|>" gets it)
    2. with `split_digits`, every number character stands alone ("2024" -> "2" "0" "2" "4";
       SmolLM2 does this, so the model never sees multi-digit tokens)
    3. GPT-2's pattern cuts the rest into words, numbers, punctuation and whitespace

A byte that has no token of its own (SmolLM2's vocabulary lacks 21 of the 256, such as 0x04 and
bytes that never occur in UTF-8) cannot be encoded; it is dropped, as Hugging Face's tokenizer does.
"""

import numpy as np
import regex

from gradflow.text.bpe import SPLIT_PATTERN, BPETokenizer
from gradflow.text.tokenizer import short

CONTROL = 3  # the token type of control tokens in GGUF files

# llama.cpp's name for the pre-tokenizer (tokenizer.ggml.pre) -> whether it isolates every number
# character before GPT-2's pattern; a file naming another cuts text in ways gradflow does not
# reproduce, so it is refused rather than encoded into ids its model never saw
PRE_TOKENIZERS = {"smollm": True, "gpt-2": False}


def _byte_to_char():
    """GPT-2's map from the 256 bytes to 256 printable characters, so that a token is a readable string.

    Printable Latin-1 bytes stand for themselves ("a" is 0x61); the other 68 (controls, space,
    0x7F-0xA0, 0xAD) are moved to U+0100 and up, in byte order: space 0x20 becomes "Ġ" (U+0120).
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    moved = [b for b in range(256) if b not in printable]
    table = {b: chr(b) for b in printable}
    table.update({b: chr(256 + i) for i, b in enumerate(moved)})
    return table


BYTE_TO_CHAR = _byte_to_char()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


class PretrainedBPETokenizer(BPETokenizer):
    """tok = PretrainedBPETokenizer(tokens, merges, control=[0, 1, 2, ...], split_digits=True)

    tok.encode("<|im_start|>user")   # [1, 4093]: the control token, then "user" by BPE
    tok.decode([19556, 905])         # "Hello world"
    """

    type_name = "pretrained_bpe"

    def __init__(self, tokens, merges, control=(), split_digits=False, pattern=SPLIT_PATTERN):
        where = "PretrainedBPETokenizer"
        self.tokens = _items(tokens, "tokens", str, "a string")
        if not self.tokens:
            raise ValueError(f"{where}: 'tokens' is empty")
        self.token_id = {}
        for i, t in enumerate(self.tokens):
            # two ids for one string: encode could give only one of them, and decode would disagree
            if self.token_id.setdefault(t, i) != i:
                raise ValueError(f"{where}: tokens[{i}] {short(t)} repeats tokens[{self.token_id[t]}]")
        self.control = set()
        for k, i in enumerate(_items(control, "control", (int, np.integer), "an id")):
            if not 0 <= i < len(self.tokens):
                raise ValueError(f"{where}: control[{k}] {i} is outside the vocabulary [0, {len(self.tokens)})")
            if i in self.control:
                raise ValueError(f"{where}: control[{k}] {i} is listed twice")
            if not self.tokens[i]:
                # an empty control token would match between every two characters of any text
                raise ValueError(f"{where}: control[{k}] is token {i}, which is empty")
            self.control.add(int(i))
        self.control = sorted(self.control)
        if not isinstance(split_digits, bool):
            raise ValueError(f"{where}: split_digits must be True or False, got {short(split_digits)}")
        self.split_digits = split_digits
        self.merge_strings = _items(merges, "merges", str, "a string 'a b'")
        # the internal id of each token string: a byte, or 256 + the merge that made it
        internal = {BYTE_TO_CHAR[b]: b for b in range(256)}
        pairs = []
        for i, merge in enumerate(self.merge_strings):
            parts = merge.split(" ")
            if len(parts) != 2 or parts[0] not in internal or parts[1] not in internal:
                raise ValueError(f"{where}: merges[{i}] {short(merge)} is not two earlier tokens")
            pairs.append((internal[parts[0]], internal[parts[1]]))
            internal[parts[0] + parts[1]] = 256 + i
        super().__init__(pairs, pattern)
        # internal id -> vocabulary id (-1 for a byte or merge the vocabulary lacks)
        self.vocab_id = np.full(256 + len(pairs), -1, dtype=np.int64)
        for token, i in internal.items():
            self.vocab_id[i] = self.token_id.get(token, -1)
        # what each id decodes to: a control token's own text, a normal token's bytes
        self.vocab_bytes = [bytes(CHAR_TO_BYTE.get(c, 0x3F) for c in t) for t in self.tokens]
        control_tokens = [self.tokens[i] for i in self.control]
        for i, t in zip(self.control, control_tokens):
            self.vocab_bytes[i] = t.encode("utf-8")
        # longest first, so that a control token that begins another never cuts it short
        alternatives = "|".join(regex.escape(t) for t in sorted(control_tokens, key=len, reverse=True))
        self.control_regex = regex.compile(f"({alternatives})") if control_tokens else None

    @classmethod
    def from_gguf(cls, metadata, source=None):
        """The tokenizer a GGUF file's metadata describes (tokenizer.ggml.* keys); `source` names the file.

        The metadata is checked before use: a byte-level BPE ("gpt2") tokenizer, a pre-tokenizer
        gradflow reproduces, and one token type per token.
        """
        where = "PretrainedBPETokenizer.from_gguf" + (f": {source}" if source is not None else "")
        model = metadata.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise ValueError(f"{where}: expected a 'gpt2' (byte-level BPE) tokenizer, got {short(model)}")
        missing = [k for k in ("tokens", "token_type", "merges") if f"tokenizer.ggml.{k}" not in metadata]
        if missing:
            raise ValueError(f"{where}: the file lacks {', '.join(f'tokenizer.ggml.{k}' for k in missing)}")
        pre = metadata.get("tokenizer.ggml.pre")
        if not isinstance(pre, str) or pre not in PRE_TOKENIZERS:
            known = ", ".join(map(repr, PRE_TOKENIZERS))
            raise ValueError(f"{where}: unknown pre-tokenizer {short(pre)}; gradflow reproduces only {known}")
        tokens, types = metadata["tokenizer.ggml.tokens"], metadata["tokenizer.ggml.token_type"]
        if not (isinstance(tokens, list) and isinstance(types, list)):
            raise ValueError(f"{where}: tokenizer.ggml.tokens and tokenizer.ggml.token_type must be lists")
        if len(types) != len(tokens):
            raise ValueError(
                f"{where}: tokenizer.ggml.token_type has {len(types)} entries for {len(tokens)} tokens; "
                f"there must be one per token"
            )
        try:
            return cls(
                tokens,
                metadata["tokenizer.ggml.merges"],
                control=[i for i, t in enumerate(types) if t == CONTROL],
                # llama.cpp's "smollm" pre-tokenizer isolates every number character before GPT-2's pattern
                split_digits=PRE_TOKENIZERS[pre],
            )
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None

    @property
    def vocab_size(self):
        return len(self.tokens)

    def encode(self, text):
        """Vocabulary ids of `text`: control tokens as they are, everything between them by BPE."""
        if not isinstance(text, str):
            raise TypeError(f"PretrainedBPETokenizer.encode: expected a str, got {type(text).__name__}")
        pieces = self.control_regex.split(text) if self.control_regex else [text]
        ids = []
        for k, piece in enumerate(pieces):  # split with a group: odd pieces are the control tokens
            if k % 2:
                ids.append(self.token_id[piece])
            elif piece:
                inner = self.vocab_id[super().encode(piece)]
                ids.extend(inner[inner >= 0].tolist())
        return np.array(ids, dtype=np.int64)

    def chunks(self, text, where):
        """GPT-2's chunks, within the runs between numbers when `split_digits` (each number character alone)."""
        if not self.split_digits:
            return super().chunks(text, where)
        chunks = []
        for run in regex.split(r"(\p{N})", text):
            chunks += super().chunks(run, where) if run else []
        return chunks

    def decode(self, ids):
        """The text of vocabulary ids; bytes that are not valid UTF-8 become U+FFFD."""
        ids = self.check_ids(ids, "PretrainedBPETokenizer.decode")
        return b"".join(self.vocab_bytes[i] for i in ids.tolist()).decode("utf-8", errors="replace")

    def to_dict(self):
        """{"type": "pretrained_bpe", "tokens", "merges" ("a b" strings), "control" (ids), "split_digits", "pattern"}"""
        return {
            "type": self.type_name,
            "tokens": self.tokens,
            "merges": self.merge_strings,
            "control": self.control,
            "split_digits": self.split_digits,
            "pattern": self.pattern,
        }

    @classmethod
    def from_dict(cls, d):
        """The tokenizer that `to_dict` described, each field checked (types here, contents in __init__)."""
        cls.check_dict(d, ["tokens", "merges", "control", "split_digits", "pattern"])
        return cls(
            cls.field(d, "tokens", list, "a list of strings"),
            cls.field(d, "merges", list, "a list of 'a b' strings"),
            cls.field(d, "control", list, "a list of ids"),
            cls.field(d, "split_digits", bool, "true or false"),
            cls.pattern_field(d),
        )

    def __repr__(self):
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, merges={len(self.merges)})"


def _items(values, name, kinds, what):
    """`values` as a list, or an error naming the first item that is not one of `kinds` (bool is never an id)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"PretrainedBPETokenizer: {name!r} must be a list, got {short(values)}")
    values = list(values)
    for i, v in enumerate(values):
        if not isinstance(v, kinds) or isinstance(v, bool):
            raise ValueError(f"PretrainedBPETokenizer: {name}[{i}] must be {what}, got {short(v)}")
    return values
