"""Text to train on: a built-in corpus that needs no download, and any UTF-8 text file."""

import os


def default_corpus():
    """The English documentation that CPython ships in `pydoc_data.topics`, topics joined in sorted key order.

    About 465,000 characters of prose and code examples in 103 distinct characters: enough for a
    small language model to learn words and Python syntax, and installed with Python itself.
    """
    try:
        from pydoc_data.topics import topics
    except ImportError:
        # OSError, like a missing corpus file: the text is a file of the standard library
        raise OSError(
            "default_corpus: the standard-library module pydoc_data is not installed, so the built-in "
            "corpus is unavailable (some Linux distributions ship it in a separate package); "
            "pass a UTF-8 text file instead"
        ) from None
    return "".join(topics[key] for key in sorted(topics))


def load_text(path):
    """The contents of a UTF-8 text file, or an error naming the path and why it is not usable text.

    The bytes are decoded as they are (no newline translation), so a lossless tokenizer gives the
    file back byte for byte; only a leading byte-order mark, which some editors add, is dropped.
    """
    return read_text(path, "load_text")


def read_text(path, where):
    """`load_text`, its errors starting with `where`, the caller's name."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{where}: expected a path (str or os.PathLike), got {type(path).__name__}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{where}: {str(path)!r} is a directory, not a text file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{where}: no such file: {str(path)!r}")
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise ValueError(f"{where}: {str(path)!r} is empty")
    nul = data.find(b"\0")
    if nul >= 0:
        raise ValueError(f"{where}: {str(path)!r} looks binary, not text: it contains a NUL byte at offset {nul}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{where}: {str(path)!r} is not valid UTF-8: byte 0x{data[err.start]:02x} at offset {err.start} "
            f"({err.reason})"
        ) from None
    return text.removeprefix("\ufeff")
