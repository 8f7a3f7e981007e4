"""JSON read from a file someone else wrote: its size and its nesting are bounded before it is parsed.

A checkpoint's description, a safetensors header and a config.json are JSON. Python's parser
recurses once per level of nesting, so `[[[[...]]]]` 100,000 deep would end in a RecursionError
(a traceback, not a message), and whatever walks the parsed value later recurses as deep. The
depth is measured first, without recursing: strings are removed (a bracket inside one is text),
then the depth after each remaining bracket is the running sum of +1 per opening, -1 per closing.
"""

import json
import re

import numpy as np

MAX_DEPTH = 64  # gradflow's own files nest a handful of levels; a description 64 deep is already absurd
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_CHUNK = 1 << 20


def depth(text):
    """How deeply the arrays and objects of JSON `text` (str or bytes) nest: 0 for a number, 1 for [1, 2]."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    brackets = np.frombuffer(_STRING.sub(b"", data).translate(None, _NOT_A_BRACKET), np.uint8)
    deepest, level = 0, 0
    for start in range(0, len(brackets), _CHUNK):  # in chunks: a 64 MB file needs no 512 MB of sums
        chunk = brackets[start : start + _CHUNK]
        levels = level + np.cumsum(np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1), dtype=np.int64)
        deepest, level = max(deepest, int(levels.max())), int(levels[-1])
    return deepest


def loads(text, what, max_depth=MAX_DEPTH):
    """json.loads(text), refusing nesting deeper than max_depth with a ValueError naming `what`."""
    nested = depth(text)
    if nested > max_depth:
        raise ValueError(f"{what} nests {nested} levels deep; at most {max_depth} are read")
    return json.loads(text)
