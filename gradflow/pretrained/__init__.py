"""Pretrained weights from model files: fetching SmolLM2-135M, reading GGUF, block dequantization."""

from gradflow.pretrained.fetch import smollm2_path
from gradflow.pretrained.gguf_file import GGUFFile
from gradflow.pretrained.quant import dequantize_q4_1, dequantize_q8_0, quantize_q4_1, quantize_q8_0

__all__ = ["GGUFFile", "dequantize_q4_1", "dequantize_q8_0", "quantize_q4_1", "quantize_q8_0", "smollm2_path"]
