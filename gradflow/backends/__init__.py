"""PyTorch's torch.backends switches, set_float32_matmul_precision and compile: accepted, and without effect.

GPU programs start by allowing TensorFloat-32 (`torch.backends.cuda.matmul.allow_tf32 = True`,
`torch.backends.cudnn.allow_tf32 = True`), asking cuDNN to benchmark its kernels, or lowering the
precision of float32 matrix products. Each switch concerns a GPU library or a GPU number format;
gradflow computes in float32 or float64 with numpy on the CPU, exactly as written, so the switches
are plain attributes that remember what was set and change nothing: one small module per library,
cuda.py, cudnn.py and mps.py, each with PyTorch's defaults. (The one switch of gradflow's
own is the kernel tier: gf.use_kernels.) `torch.compile(model)` asks for the same function, faster;
here it is the model itself, computing what it computed.
"""

from gradflow.backends import cuda, cudnn, mps  # (modules, so that `import torch.backends.cudnn` runs too)

_MATMUL_PRECISIONS = ("highest", "high", "medium")
_matmul_precision = "highest"


def set_float32_matmul_precision(precision):
    """Accepted and without effect: gradflow's float32 products are numpy's, at full float32 precision."""
    global _matmul_precision
    if precision not in _MATMUL_PRECISIONS:
        raise ValueError(
            f"set_float32_matmul_precision: precision must be one of {_MATMUL_PRECISIONS}, got {precision!r}"
        )
    _matmul_precision = precision


def get_float32_matmul_precision():
    """What set_float32_matmul_precision last set ("highest" at first), though products are always full float32."""
    return _matmul_precision


def compile(model=None, **options):
    """The model (or function) itself, as PyTorch's compile would give it back, computing the same; used
    as @compile or @compile(mode=...), the function itself. options (mode, fullgraph, backend, ...) are accepted."""
    return model if model is not None else (lambda fn: fn)


__all__ = ["compile", "cuda", "cudnn", "get_float32_matmul_precision", "mps", "set_float32_matmul_precision"]
