"""The character tokenizer: one id per distinct character of the corpus, in sorted order."""

import numpy as np

from gradflow.text.tokenizer import Tokenizer

# how many unknown characters an encode error lists before it only counts the rest
_MAX_LISTED = 10


class CharTokenizer(Tokenizer):
    """Vocabulary = the sorted distinct characters of `text`; id i is the i-th of them.

    tok = CharTokenizer(text)          # or CharTokenizer.from_text(text)
    tok.decode(tok.encode("hello"))    # "hello", if every character occurs in text
    """

    type_name = "char"

    def __init__(self, text):
        if not isinstance(text, str):
            raise TypeError(f"CharTokenizer: expected the corpus as a str, got {type(text).__name__}")
        if not text:
            raise ValueError("CharTokenizer: the corpus is empty, so the vocabulary would be empty")
        self.chars = sorted(set(text))
        self.char_to_id = {c: i for i, c in enumerate(self.chars)}

    @classmethod
    def from_text(cls, text):
        """The tokenizer whose vocabulary is the distinct characters of `text`."""
        return cls(text)

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, text):
        """The ids of the characters of `text`, as an int64 array; every character must be in the vocabulary."""
        if not isinstance(text, str):
            raise TypeError(f"CharTokenizer.encode: expected a str, got {type(text).__name__}")
        unknown = [c for c in dict.fromkeys(text) if c not in self.char_to_id]
        if unknown:
            listed = ", ".join(repr(c) for c in unknown[:_MAX_LISTED])
            if len(unknown) > _MAX_LISTED:
                listed += f" and {len(unknown) - _MAX_LISTED} more"
            raise ValueError(
                f"CharTokenizer.encode: characters not in the vocabulary: {listed} "
                f"(vocabulary of {self.vocab_size} characters)"
            )
        return np.fromiter((self.char_to_id[c] for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids):
        """The text whose characters have these ids."""
        return "".join(self.chars[i] for i in self.check_ids(ids, "CharTokenizer.decode").tolist())

    def to_dict(self):
        """{"type": "char", "chars": the vocabulary as one string, id i being its i-th character}."""
        return {"type": self.type_name, "chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, d):
        """The tokenizer that `to_dict` described; the characters must be sorted and distinct, as it writes them."""
        cls.check_dict(d, ["chars"])
        chars = cls.field(d, "chars", str, "a non-empty string")
        if not chars:
            raise ValueError("CharTokenizer.from_dict: 'chars' must be a non-empty string, got ''")
        # ids are positions in the sorted vocabulary: any other order would silently remap them
        for a, b in zip(chars, chars[1:]):
            if a >= b:
                problem = f"{a!r} is listed twice" if a == b else f"{a!r} comes before {b!r}"
                raise ValueError(f"CharTokenizer.from_dict: 'chars' must be sorted and without repeats: {problem}")
        return cls(chars)
