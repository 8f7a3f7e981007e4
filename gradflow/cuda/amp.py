"""torch.cuda.amp's autocast and GradScaler: gradflow.amp's, for device "cuda" (see gradflow/amp.py),
with the arguments PyTorch's older spelling takes (no device first)."""

from gradflow import amp
from gradflow.engine.dtype import float16


def autocast(enabled=True, dtype=float16, cache_enabled=True):
    """torch.amp.autocast("cuda", ...): off, with a warning when enabled (there is no CUDA)."""
    return amp.autocast("cuda", dtype, enabled, cache_enabled)


def GradScaler(init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
    """torch.amp.GradScaler("cuda", ...): off, with a warning when enabled (there is no CUDA)."""
    return amp.GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
