"""torch.backends.cuda: whether products may use TensorFloat-32 or reduced precision on a GPU.

Remembered as set, without effect: gradflow computes on the CPU with numpy, in full float32 or float64.
"""

from types import SimpleNamespace

matmul = SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True)


def is_built():
    """False: gradflow is not built with CUDA."""
    return False
