"""PyTorch's torch.cuda as a computer without a GPU answers it: gradflow computes on the CPU (numpy).

A program written for a GPU asks `torch.cuda.is_available()` and takes the CPU path when the
answer is False; it seeds the GPU's generator beside the CPU's, and asks which float formats the
GPU has. Here is_available() is False, device_count() is 0, is_bf16_supported() is False, and the
seeding functions accept a seed and do nothing, as PyTorch's do without CUDA: they never touch
gradflow's generator, which gf.manual_seed seeds. `torch.cuda.amp` (autocast, GradScaler) is
gradflow.amp's, for the GPU: see gradflow/amp.py. What needs a GPU (synchronize,
current_device, ...) is refused in one line.
"""

from gradflow.cuda import amp
from gradflow.engine.rng import seed_arg


def is_available():
    return False


def device_count():
    return 0


def is_bf16_supported(including_emulation=True):
    return False


def manual_seed(seed):
    """Nothing to seed: there is no GPU. gf.manual_seed seeds gradflow's generator."""
    seed_arg("cuda.manual_seed", seed)


def manual_seed_all(seed):
    """Nothing to seed: there is no GPU. gf.manual_seed seeds gradflow's generator."""
    seed_arg("cuda.manual_seed_all", seed)


def _no_gpu(op):
    raise RuntimeError(f"cuda.{op}: gradflow has no GPU (gf.cuda.is_available() is False)")


def synchronize(device=None):
    _no_gpu("synchronize")


def current_device():
    _no_gpu("current_device")


def get_device_name(device=None):
    _no_gpu("get_device_name")


def set_device(device):
    _no_gpu("set_device")


__all__ = ["amp", "current_device", "device_count", "get_device_name", "is_available", "is_bf16_supported"]
__all__ += ["manual_seed", "manual_seed_all", "set_device", "synchronize"]
