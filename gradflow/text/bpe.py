"""Byte-level byte-pair encoding (BPE), trained from scratch, as GPT-2 tokenizes.

Training starts from the 256 byte values of the text's UTF-8 encoding and repeats one step: count
every adjacent pair of ids, and replace each occurrence of the most frequent pair (left to right,
so "a a a" becomes "aa a") by a new id, 256, 257, ... Common words end up as single tokens; rare
ones fall apart into pieces, down to single bytes. Because every byte is in the base vocabulary,
any text encodes, also text with characters the training text never had.

Before counting, the text is cut into chunks as GPT-2 does (a word with the space before it, a
number, a run of punctuation, whitespace), and no pair crosses from one chunk into the next, so
tokens are pieces of words ("ing", " the") rather than spans like "e t". Pass `pattern=None` to
merge over the whole text instead.
"""

from collections import Counter

import numpy as np
import regex

from gradflow.text.tokenizer import Tokenizer, short

# GPT-2's split pattern: a contraction, a word with the space before it, a number, a run of
# punctuation, whitespace (not the last space before a word, which goes with the word). \p{L} and
# \p{N} are Unicode's letters and numbers, classes the `regex` package knows and `re` does not.
SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# gradflow's first split pattern, the same cuts in the classes `re` knows: files saved with it still load
FIRST_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\w\s]|_)+|\s+(?!\S)|\s+"""

# the only split patterns a tokenizer read from a file may name (see `check_pattern`)
KNOWN_PATTERNS = {
    SPLIT_PATTERN: "GPT-2's, which gradflow writes and the pretrained tokenizer uses",
    FIRST_SPLIT_PATTERN: "gradflow's first",
    None: "no split",
}

# ids 0..255 are the bytes themselves; merge i makes id 256 + i
_BYTES = 256
_NEVER = float("inf")  # the rank of a pair no merge joins


class BPETokenizer(Tokenizer):
    """A byte-level BPE tokenizer: a list of merges (a, b) -> 256 + i, applied in the order learned.

    tok = BPETokenizer.train(text, vocab_size=512)
    tok.decode(tok.encode("naïve café ☕"))    # "naïve café ☕": every byte is in the vocabulary
    """

    type_name = "bpe"

    def __init__(self, merges, pattern=SPLIT_PATTERN):
        self.merges, self.rank = [], {}  # rank: (a, b) -> when it was learned
        for i, pair in enumerate(merges):
            # a merge may only join ids that exist before it: bytes and earlier merges
            if not (
                isinstance(pair, (list, tuple))
                and len(pair) == 2
                and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in pair)
                and all(0 <= x < _BYTES + i for x in pair)
            ):
                raise ValueError(
                    f"BPETokenizer: merges[{i}] must be a pair of ids below {_BYTES + i}, got {short(pair)}"
                )
            pair = (int(pair[0]), int(pair[1]))
            if pair in self.rank:
                # training merges every occurrence of a pair at once, so no pair is learned twice;
                # a repeat would give two ids for the same bytes, the first never produced
                raise ValueError(f"BPETokenizer: merges[{i}] {list(pair)} repeats merges[{self.rank[pair]}]")
            self.rank[pair] = i
            self.merges.append(pair)
        if pattern is not None and not isinstance(pattern, str):
            raise TypeError(f"BPETokenizer: pattern must be a regular expression string or None, got {short(pattern)}")
        try:
            self.split_regex = None if pattern is None else regex.compile(pattern)
        except regex.error as err:
            raise ValueError(
                f"BPETokenizer: pattern {short(pattern)} is not a valid regular expression: {err}"
            ) from None
        self.pattern = pattern
        # the bytes each id stands for: a byte itself, or the bytes of the pair it merged
        self.token_bytes = [bytes([b]) for b in range(_BYTES)]
        for a, b in self.merges:
            self.token_bytes.append(self.token_bytes[a] + self.token_bytes[b])

    @classmethod
    def train(cls, text, vocab_size, pattern=SPLIT_PATTERN):
        """Learn merges from `text` until there are `vocab_size` ids, or until no pair occurs twice.

        Pairs are counted where they touch, overlapping ones included ("aaa" has the pair (a, a)
        twice), as in Sennrich et al. (2016) and minbpe. A tie between equally frequent pairs goes
        to the pair with the lowest ids: the lowest first id, then the lowest second id. Training
        stops early when the most frequent pair occurs only once, since a merge of a single
        occurrence would memorise the text rather than find a pattern in it; `vocab_size` of the
        result is then below the one asked for.
        """
        if not isinstance(text, str):
            raise TypeError(f"BPETokenizer.train: expected the training text as a str, got {type(text).__name__}")
        if not text:
            raise ValueError("BPETokenizer.train: the training text is empty")
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
            raise TypeError(f"BPETokenizer.train: vocab_size must be an int, got {vocab_size!r}")
        if vocab_size < _BYTES:
            raise ValueError(f"BPETokenizer.train: vocab_size must be at least {_BYTES} (the bytes), got {vocab_size}")
        # no pair crosses a chunk, so equal chunks are merged alike: keep each distinct chunk once
        # and count its pairs as often as the chunk occurs (the default corpus's 465,000 bytes
        # hold 6,000 distinct chunks of 45,000 bytes in all: ten times less to scan per merge)
        chunk_counts = Counter(cls([], pattern).chunks(text, "BPETokenizer.train"))
        ids, starts = bytes_and_chunk_starts(list(chunk_counts), "BPETokenizer.train")
        occurrences = np.array(list(chunk_counts.values()))[np.cumsum(starts) - 1]
        merges = []
        for new_id in range(_BYTES, int(vocab_size)):
            # pair (a, b) as the one integer a * new_id + b (all ids are below new_id), so one
            # bincount counts every pair; argmax takes the first maximum, the lowest (a, b)
            inside = ~starts[1:]
            codes = ids[:-1][inside] * new_id + ids[1:][inside]
            if codes.size == 0:
                break
            counts = np.bincount(codes, weights=occurrences[1:][inside])
            best = int(counts.argmax())
            if counts[best] < 2:
                break
            pair = divmod(best, new_id)
            merges.append(pair)
            ids, kept = merge_pair(ids, starts, pair, new_id)
            starts, occurrences = starts[kept], occurrences[kept]
        return cls(merges, pattern)

    @property
    def vocab_size(self):
        return _BYTES + len(self.merges)

    def encode(self, text):
        """The ids of `text`: each chunk's UTF-8 bytes, merged as `merge_chunk` says (equal chunks once)."""
        if not isinstance(text, str):
            raise TypeError(f"BPETokenizer.encode: expected a str, got {type(text).__name__}")
        done, ids = {}, []
        for chunk in self.chunks(text, "BPETokenizer.encode"):
            if chunk not in done:
                done[chunk] = self.merge_chunk(list(utf8(chunk, "BPETokenizer.encode")))
            ids.extend(done[chunk])
        return np.array(ids, dtype=np.int64)

    def merge_chunk(self, ids):
        """Merge a chunk's byte ids: again and again, the adjacent pair learned first, at every place it occurs.

        This is the merges replayed in the order they were learned, with the ones that cannot apply
        skipped: a merge joins ids that exist before it, so joining pair i creates only pairs that
        contain 256 + i, whose merges come after i. Occurrences are merged left to right, so
        "a a a" becomes "aa a".
        """
        while len(ids) > 1:
            rank = min(self.rank.get(pair, _NEVER) for pair in zip(ids, ids[1:]))
            if rank == _NEVER:
                break
            pair, merged, i = self.merges[rank], [], 0
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                    merged.append(_BYTES + rank)
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = merged
        return ids

    def decode(self, ids):
        """The text of these ids; bytes that are not valid UTF-8 become U+FFFD.

        An id sequence can end, or start, inside a multi-byte character (a model may sample any
        sequence), so the bytes are decoded with errors="replace" rather than raising. Ids that
        `encode` produced always decode to the original text.
        """
        ids = self.check_ids(ids, "BPETokenizer.decode")
        return b"".join(self.token_bytes[i] for i in ids.tolist()).decode("utf-8", errors="replace")

    def chunks(self, text, where):
        """`text` cut by the split pattern into the pieces that merges stay inside (one piece without a pattern)."""
        if self.split_regex is None:
            return [text]
        chunks = [m.group() for m in self.split_regex.finditer(text) if m.group()]
        if sum(map(len, chunks)) != len(text):
            # a skipped character would vanish from the encoding: the round trip must be lossless
            raise ValueError(f"{where}: the split pattern {self.pattern!r} does not match every character")
        return chunks

    def to_dict(self):
        """{"type": "bpe", "vocab_size", "pattern": the split regex or None, "merges": [[a, b], ...] in order}."""
        return {
            "type": self.type_name,
            "vocab_size": self.vocab_size,
            "pattern": self.pattern,
            "merges": [list(pair) for pair in self.merges],
        }

    @classmethod
    def from_dict(cls, d):
        """The tokenizer that `to_dict` described, each field checked: its vocab_size must agree with its merges."""
        cls.check_dict(d, ["vocab_size", "pattern", "merges"])
        vocab_size = cls.field(d, "vocab_size", int, "an int")
        merges = cls.field(d, "merges", list, "a list of [a, b] pairs")
        pattern = cls.pattern_field(d)
        if vocab_size != _BYTES + len(merges):
            raise ValueError(
                f"BPETokenizer.from_dict: vocab_size {vocab_size} does not match the {len(merges)} "
                f"merges (expected {_BYTES} + {len(merges)} = {_BYTES + len(merges)})"
            )
        return cls(merges, pattern)

    @classmethod
    def pattern_field(cls, d):
        """d["pattern"], which must be null or one of KNOWN_PATTERNS (see `check_pattern`)."""
        pattern = cls.field(d, "pattern", (str, type(None)), "a string or null")
        return check_pattern(pattern, f"{cls.__name__}.from_dict")

    def save(self, path):
        """Write `to_dict()` to a JSON file; only a tokenizer with a known split pattern, so that it loads again."""
        if self.pattern not in KNOWN_PATTERNS:
            raise ValueError(
                f"{type(self).__name__}.save: the split pattern {short(self.pattern)} is not one gradflow reads "
                f"back from a file (see KNOWN_PATTERNS); train with pattern=SPLIT_PATTERN or None to save"
            )
        super().save(path)


def check_pattern(pattern, where):
    """`pattern` if it is one of KNOWN_PATTERNS; a split pattern read from a file is never compiled otherwise.

    A regular expression is a program, and some take time exponential in the text's length: with
    (a|a)+$ on a run of a's and one b, the matcher tries both branches at every a before it gives
    up, so each extra character doubles the time (22 characters: 3 seconds; 40: days). A
    tokenizer file is data, and data must not be able to stall gradflow, so a pattern from a file
    must be one gradflow itself writes.
    """
    if pattern not in KNOWN_PATTERNS:
        raise ValueError(
            f"{where}: unknown split pattern {short(pattern)}; gradflow accepts only its known pre-tokenizer "
            f"patterns (a pattern from a file could take time exponential in the text's length)"
        )
    return pattern


def utf8(chunk, where):
    """The UTF-8 bytes of `chunk`, or an error naming the character that has none (a lone surrogate)."""
    try:
        return chunk.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = err.object[err.start]
        raise ValueError(f"{where}: the text is not valid Unicode: {bad!r} ({err.reason})") from None


def bytes_and_chunk_starts(chunks, where):
    """The UTF-8 bytes of the chunks, one after another, as int64 ids, and a mask that is True where a chunk starts."""
    parts = [utf8(chunk, where) for chunk in chunks]
    ids = np.frombuffer(b"".join(parts), dtype=np.uint8).astype(np.int64)
    starts = np.zeros(ids.size, dtype=bool)
    starts[np.cumsum([0] + [len(p) for p in parts[:-1]])] = True
    return ids, starts


def merge_pair(ids, starts, pair, new_id):
    """Replace each occurrence of `pair` within a chunk by `new_id`, left to right.

    Returns the new ids and `kept`, the mask of old positions that survive (the second half of a
    merged pair does not), for the caller to apply to what it keeps per position.
    """
    a, b = pair
    at = np.flatnonzero((ids[:-1] == a) & (ids[1:] == b) & ~starts[1:])
    kept = np.ones(ids.size, dtype=bool)
    if at.size == 0:
        return ids, kept
    if a == b:
        # in a run "a a a a" the pairs overlap (at = p, p+1, p+2); merging left to right takes
        # the 1st, 3rd, ... of each run of consecutive positions, giving "aa aa"
        run_begins = np.r_[True, np.diff(at) != 1]
        run_first = at[run_begins][np.cumsum(run_begins) - 1]
        at = at[(at - run_first) % 2 == 0]
    ids = ids.copy()
    ids[at] = new_id
    # the merged token sits where its first half was, and so keeps that half's chunk start
    kept[at + 1] = False
    return ids[kept], kept
