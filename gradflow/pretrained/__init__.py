"""Pretrained weights from model files: fetching SmolLM2-135M, reading GGUF, block dequantization."""

from .fetch import smollm2_path
from .gguf_file import GGUFFile
from .quant import dequantize_q4_1, dequantize_q8_0, quantize_q4_1, quantize_q8_0

__all__ = ["GGUFFile", "dequantize_q4_1", "dequantize_q8_0", "quantize_q4_1", "quantize_q8_0", "smollm2_path"]
