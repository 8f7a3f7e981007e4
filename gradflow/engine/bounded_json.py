"""JSON read from a file someone else wrote: its size and its nesting are bounded before it is parsed.

A checkpoint's description, a safetensors header, a config.json, a log line, an export's manifest
and an exercise workspace's progress are JSON. Python's parser recurses once per level of nesting,
so `[[[[...]]]]` 100,000 deep would end in a RecursionError (a traceback, not a message), and
whatever walks the parsed value later recurses as deep. So the depth is measured first, without
recursing, and in time linear in the text: one pass of a regular expression removes the strings
(a bracket inside one is text), then the depth after each remaining bracket is the running sum of
+1 per opening, -1 per closing.

The string pattern matches from a quote through escaped pairs and other characters to the closing
quote, or to the end of the text when there is none. An unclosed string is thus consumed once: a
pattern that demanded the closing quote would fail at the end and be tried again from every later
quote, and `"` followed by 200,000 `\\"` would take 200,000 scans of the text (minutes for 60 KB).
json.loads then parses the text once more, in C and in linear time, only if it nests within bounds.

Every file is read through read() (whole documents) or lines() (JSON lines): a regular file only,
at most `max_bytes` (a line at most `max_line`), so that a 300 MB file is refused before it is read.
"""

import json
import os
import re

import numpy as np

from gradflow.engine.files import opened

MAX_DEPTH = 64  # gradflow's own files nest a handful of levels; a description 64 deep is already absurd
MAX_BYTES = 64 << 20  # a whole document: a tokenizer.json of a large vocabulary is a few MB
MAX_LINE = 1 << 20  # one line of a JSON lines file: a log record, a conversation
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
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
    opening = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if opening <= max_depth:  # no deeper than its brackets: a log line needs no exact measure
        return json.loads(text)
    nested = depth(text)
    if nested > max_depth:
        raise ValueError(f"{what} nests {nested} levels deep; at most {max_depth} are read")
    return json.loads(text)


def read(path, what=None, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, follow=True):
    """The JSON document in the regular file `path` (a link to one is followed if `follow`, else refused),
    read whole if it holds at most `max_bytes`: a ValueError naming `what` (the path by default) says what
    is wrong, in one line; files.NotAFile (an OSError) a link, a FIFO or a folder at `path`."""
    what = what or str(path)
    with opened(path, "rb", follow=follow) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise ValueError(f"{what} holds {size:,} bytes; at most {max_bytes:,} are read")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while opened
        raise ValueError(f"{what} holds over {max_bytes:,} bytes; at most {max_bytes:,} are read")
    try:
        return loads(data.decode("utf-8"), what, max_depth)
    except UnicodeDecodeError as err:
        raise ValueError(f"{what} is not UTF-8 (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} is not JSON ({err.msg}, line {err.lineno}, column {err.colno})") from None


def lines(path, max_line=MAX_LINE, max_depth=MAX_DEPTH):
    """(line number, value or the ValueError saying why it is none) for each line of the JSON lines file
    `path`; a line longer than `max_line` bytes is skipped unread (past its end) and said to be too long."""
    with opened(path, "rb", follow=True) as f:
        number = 0
        while line := f.readline(max_line + 1):
            number += 1
            if len(line) > max_line and not line.endswith(b"\n"):
                while (rest := f.readline(max_line)) and not rest.endswith(b"\n"):
                    pass  # the rest of the long line, a piece at a time
                yield number, ValueError(f"line {number} is longer than {max_line:,} bytes")
                continue
            try:
                yield number, loads(line.decode("utf-8"), f"line {number}", max_depth)
            except ValueError as err:  # not UTF-8 (UnicodeDecodeError is one), not JSON, too deep
                yield number, err
