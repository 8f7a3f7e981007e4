"""What every tokenizer shares: id checking, JSON files, and `load_tokenizer`, which picks the class by "type".

A tokenizer is fully described by a small JSON-serialisable dict (`to_dict`), so a checkpoint can
store it next to the weights and rebuild it without pickle. The dict's "type" field names the
class: "char" for `CharTokenizer`, "bpe" for `BPETokenizer`, "pretrained_bpe" for
`PretrainedBPETokenizer`.

A dict read from a file is data from outside, so `from_dict` checks it field by field before
using it: a missing key, a value of the wrong type, an id outside the vocabulary or a token listed
twice would otherwise surface later as a KeyError deep inside encode, or worse, as a tokenizer
that quietly maps text to other ids than the model was trained on.
"""

import json
import os

import numpy as np

from gradflow.engine import bounded_json
from gradflow.engine.files import write_atomically
from gradflow.text.corpus import read_text

# type name -> Tokenizer subclass, filled in as each subclass is defined
_TOKENIZERS = {}


class Tokenizer:
    """Base class: subclasses set `type_name` and define vocab_size, encode, decode, to_dict and from_dict."""

    type_name = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _TOKENIZERS[cls.type_name] = cls

    def save(self, path):
        """Write `to_dict()` to a JSON file (non-ASCII characters escaped, so any text survives)."""
        write_atomically(path, json.dumps(self.to_dict()) + "\n")

    @classmethod
    def load(cls, path):
        """Read a tokenizer that `save` wrote; the file's "type" must be this class's."""
        d = read_tokenizer_json(path, f"{cls.__name__}.load")
        try:
            return cls.from_dict(d)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None

    @classmethod
    def check_dict(cls, d, keys):
        """Raise unless `d` is a dict of this tokenizer's type holding `keys`."""
        where = f"{cls.__name__}.from_dict"
        if not isinstance(d, dict):
            raise TypeError(f"{where}: expected a dict, got {type(d).__name__}")
        if d.get("type") != cls.type_name:
            raise ValueError(f"{where}: expected a tokenizer of type {cls.type_name!r}, got type {d.get('type')!r}")
        missing = [k for k in keys if k not in d]
        if missing:
            raise ValueError(f"{where}: the {cls.type_name!r} tokenizer dict lacks {', '.join(map(repr, missing))}")

    @classmethod
    def field(cls, d, key, kinds, what):
        """d[key], or an error naming the field, what it must be, and the value found.

        `kinds` are the accepted Python types. bool is an int to Python (True == 1), but never an
        id or a size here, so it counts only where `kinds` names it.
        """
        value, kinds = d[key], kinds if isinstance(kinds, tuple) else (kinds,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ValueError(f"{cls.__name__}.from_dict: {key!r} must be {what}, got {short(value)}")
        return value

    def check_ids(self, ids, where):
        """`ids` as a 1-D int64 array, or an error naming the first id outside [0, vocab_size)."""
        ids = np.asarray(ids)
        if ids.size == 0:
            return ids.astype(np.int64).reshape(0)
        if ids.ndim != 1:
            raise ValueError(f"{where}: expected a 1-D sequence of ids, got shape {ids.shape}")
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"{where}: ids must be integers, got dtype {ids.dtype}")
        bad = np.flatnonzero((ids < 0) | (ids >= self.vocab_size))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"{where}: id {int(ids[i])} at position {i} is outside the vocabulary [0, {self.vocab_size})"
            )
        return ids.astype(np.int64)

    def __eq__(self, other):
        """Equal when they map text to the same ids: same class and same `to_dict()`."""
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


def read_tokenizer_json(path, where):
    """The dict stored in a tokenizer JSON file, or an error naming the file and what is wrong with it."""
    text = read_text(path, where)
    try:
        d = bounded_json.loads(text, "it")
    except ValueError as err:  # not JSON, or nested too deep to read
        raise ValueError(f"{path}: not a tokenizer JSON file: {err}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: not a tokenizer JSON file: expected an object, got {type(d).__name__}")
    return d


def short(value, limit=60):
    """repr(value), cut to `limit` characters: an error message quotes a value, never a whole vocabulary."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_tokenizer(d_or_path, source=None):
    """A tokenizer from a `to_dict()` dict or from a JSON file, of the class its "type" field names.

    `source` names where a dict came from (a checkpoint's path, say) and starts every error
    message, so that a user knows which file to look at; a path names itself.
    """
    if isinstance(d_or_path, dict):
        d, where = d_or_path, source or "load_tokenizer"
    elif isinstance(d_or_path, (str, os.PathLike)):
        d, where = read_tokenizer_json(d_or_path, "load_tokenizer"), source or str(d_or_path)
    elif source is not None:  # read from a file: the file is wrong, not the call
        raise ValueError(f"{source}: the tokenizer must be a JSON object, got {type(d_or_path).__name__}")
    else:
        raise TypeError(f"load_tokenizer: expected a dict or a path, got {type(d_or_path).__name__}")
    kind = d.get("type")
    if not isinstance(kind, str) or kind not in _TOKENIZERS:
        known = ", ".join(repr(k) for k in sorted(_TOKENIZERS))
        raise ValueError(f"{where}: unknown tokenizer type {short(kind)} (known types: {known})")
    try:
        return _TOKENIZERS[kind].from_dict(d)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
