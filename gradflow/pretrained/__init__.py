"""Pretrained weights from model files: fetching SmolLM2-135M, reading GGUF, block dequantization.

fetch.py downloads a model file once and checks its sha256; gguf_file.py reads a GGUF file's
tensors and metadata; quant.py writes out the Q8_0 and Q4_1 block formats' arithmetic. It
returns numpy arrays and tokenizer tables; building a model from them is gradflow.models' work.
"""

from gradflow.pretrained.fetch import smollm2_path
from gradflow.pretrained.gguf_file import GGUFFile
from gradflow.pretrained.quant import dequantize_q4_1, dequantize_q8_0, quantize_q4_1, quantize_q8_0

__all__ = ["GGUFFile", "dequantize_q4_1", "dequantize_q8_0", "quantize_q4_1", "quantize_q8_0", "smollm2_path"]
