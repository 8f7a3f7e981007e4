"""Reading a GGUF model file: metadata, and every tensor as a float32 numpy array.

GGUF (the llama.cpp format) is one file: a header of key-value metadata (architecture, sizes,
tokenizer, chat template), a table of tensors (name, shape, type, offset), and the tensor bytes.
The `gguf` package, the format's reference reader, parses the header and maps the bytes; turning
quantized bytes back into numbers is gradflow's own (`quant.py`).

Shapes: GGUF lists dimensions fastest-first (ne0 = the row length), numpy slowest-first, so a
weight GGUF calls [576, 1536] is a (1536, 576) array here: 1536 rows of 576, as Linear stores it.

A file that is not GGUF, or is cut short or damaged, is refused with one line naming it
(`GGUFError`): the reader believes every count and offset the file states, so in a damaged file
it fails somewhere inside numpy, in words that say nothing about which file or why.
"""

import os

import numpy as np

from gradflow.pretrained.quant import DEQUANTIZE

MAGIC = b"GGUF"  # the first four bytes of every GGUF file
VERSIONS = (2, 3)  # the format versions the gguf package reads
HEADER_BYTES = 24  # magic (4), version (uint32), tensor count (uint64), metadata count (uint64)


class GGUFError(ValueError):
    """A file that is not a readable GGUF file: wrong kind of file, cut short, or damaged."""


class GGUFFile:
    """f = GGUFFile(path); f.metadata["llama.block_count"]; f.shape("blk.0.attn_q.weight"); f.array(name)"""

    def __init__(self, path):
        from gguf import GGUFReader  # imported here: only reading a model file needs it

        self.path = path
        check_header(path)
        try:
            reader = GGUFReader(path)
            self.metadata = {key: field.contents() for key, field in reader.fields.items()}
            # keep the tensors (views of the mapped file), not the reader: its parsed fields hold a small
            # numpy array for each of the 98,000 tokenizer strings, about 150 MB
            self.tensors = {t.name: t for t in reader.tensors}
        except UnicodeDecodeError:
            raise GGUFError(f"GGUFFile: {path} is not a readable GGUF file (a metadata string is not UTF-8)") from None
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, MemoryError):
            # the reader trusts every length and offset it reads: in a damaged file one of them
            # points past the end or asks for an absurd size, and numpy objects in its own words
            raise GGUFError(
                f"GGUFFile: {path} is not a readable GGUF file (its metadata or tensor table is damaged, "
                f"or the file is cut short)"
            ) from None

    def shape(self, name):
        """The numpy shape of tensor `name` (GGUF's dimensions reversed)."""
        return tuple(int(n) for n in reversed(self.tensor(name).shape))

    def kind(self, name):
        """The storage type of tensor `name`: "F32", "Q8_0", "Q4_1", ..."""
        return self.tensor(name).tensor_type.name

    def array(self, name):
        """Tensor `name` as a float32 array of its numpy shape, in memory of its own (not a view of the file)."""
        kind = self.kind(name)
        data = self.tensor(name).data  # a read-only memory map of the file's bytes
        if kind == "F32":
            out = np.array(data, dtype=np.float32)  # a copy: a view would keep the file mapped and read-only
        elif kind in DEQUANTIZE:
            out = DEQUANTIZE[kind](data)
        else:
            raise ValueError(f"GGUFFile.array: tensor {name!r} is stored as {kind}; gradflow reads F32, Q8_0 and Q4_1")
        return out.reshape(self.shape(name))

    def tensor(self, name):
        """The gguf package's record of tensor `name`: its type, GGUF shape and mapped bytes (`.data`)."""
        if name not in self.tensors:
            raise KeyError(f"GGUFFile: {self.path} has no tensor {name!r}")
        return self.tensors[name]


def check_header(path):
    """Raise an error naming `path` unless it starts like a GGUF file: the magic bytes and a known version.

    The gguf package's reader would say "GGUF magic invalid" or fail inside numpy; checking the
    first 24 bytes first gives a message that says which file, and what is wrong with it.
    """
    if os.path.isdir(path):
        raise IsADirectoryError(f"GGUFFile: {path} is a directory, not a GGUF file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"GGUFFile: no such file: {path}")
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
    if not head:
        reason = "it is empty"
    elif len(head) < HEADER_BYTES:
        reason = f"it has {len(head)} bytes, fewer than the {HEADER_BYTES} of a GGUF header"
    elif head[:4] != MAGIC:
        reason = f"it starts with {head[:4]!r}, not {MAGIC!r}"
    else:
        version = int.from_bytes(head[4:8], "little")
        swapped = int.from_bytes(head[4:8], "big")  # a big-endian file, which the reader also reads
        if version in VERSIONS or swapped in VERSIONS:
            return
        reason = f"format version {version}; gradflow reads versions {VERSIONS[0]} and {VERSIONS[1]}"
    raise GGUFError(f"GGUFFile: {path} is not a readable GGUF file ({reason})")
