"""Reading a GGUF model file: metadata, and every tensor as a float32 numpy array.

GGUF (the llama.cpp format) is one file: a header of key-value metadata (architecture, sizes,
tokenizer, chat template), a table of tensors (name, shape, type, offset), and the tensor bytes.
The `gguf` package, the format's reference reader, parses the header and maps the bytes; turning
quantized bytes back into numbers is gradflow's own (`quant.py`).

Shapes: GGUF lists dimensions fastest-first (ne0 = the row length), numpy slowest-first, so a
weight GGUF calls [576, 1536] is a (1536, 576) array here: 1536 rows of 576, as Linear stores it.
"""

import numpy as np

from .quant import DEQUANTIZE


class GGUFFile:
    """f = GGUFFile(path); f.metadata["llama.block_count"]; f.shape("blk.0.attn_q.weight"); f.array(name)"""

    def __init__(self, path):
        from gguf import GGUFReader  # imported here: only reading a model file needs it

        self.path = path
        reader = GGUFReader(path)
        self.metadata = {key: field.contents() for key, field in reader.fields.items()}
        # keep the tensors (views of the mapped file), not the reader: its parsed fields hold a small
        # numpy array for each of the 98,000 tokenizer strings, about 150 MB
        self.tensors = {t.name: t for t in reader.tensors}

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
        if name not in self.tensors:
            raise KeyError(f"GGUFFile: {self.path} has no tensor {name!r}")
        return self.tensors[name]
