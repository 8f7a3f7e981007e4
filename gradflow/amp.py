"""Mixed precision, as PyTorch's torch.amp names it: autocast and GradScaler, for a computer without a GPU.

PyTorch's programs wrap their forward pass in `autocast` (matrix products in float16 or bfloat16)
and scale the loss with a `GradScaler` (so that float16 gradients do not underflow to zero). gradflow
computes in float32 or float64 only (engine/dtype.py), so neither has work to do:

- `autocast(device_type, dtype=None, enabled=True)` is a context (and a decorator) whose region
  computes as written, as with autocast disabled: silently when it is disabled or asks for float32,
  with a one-line warning when it asks for bfloat16 (the CPU's default) or float16 on the CPU, or
  for "cuda", which PyTorch itself turns off with a warning on a computer without CUDA. autocast is
  a request for speed in a region a program must be right without (enabled=False is always a valid
  run of it), so programs that autocast on the CPU unconditionally (build-nanogpt's training loop)
  run; the warning says that their numbers are float32's, a little off PyTorch's bfloat16 ones.
  A tensor made in float16 or bfloat16 is refused instead: it asks for data in that format.
- `GradScaler(device="cuda", ..., enabled=True)` is PyTorch's disabled scaler: scale(loss) is loss,
  step(optimizer) is optimizer.step(), unscale_ and update do nothing, get_scale() is 1.0. Enabled,
  it warns once and disables itself, as PyTorch's does without CUDA: float32 gradients do not
  underflow where float16 ones would.
"""

import functools
import sys
import warnings

from gradflow.engine.device import on_cpu
from gradflow.engine.dtype import bfloat16, float16


def _warn_off(message):
    """Warn at the program's own line that asked (the first caller outside gradflow), not inside gradflow."""
    level = 1
    while sys._getframe(level - 1).f_globals.get("__name__", "").startswith("gradflow."):
        level += 1
    warnings.warn(message, stacklevel=level)


class autocast:
    """A region whose ops PyTorch would compute in a narrower float; here it computes as written
    (see this file's docstring for when it warns)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type != "cuda":
            on_cpu("autocast", device_type)
        narrow = bfloat16 if dtype is None else dtype  # PyTorch's CPU default is bfloat16
        if enabled and device_type == "cuda":
            _warn_off("autocast: gradflow has no CUDA device; autocast is off, as in PyTorch without CUDA")
        elif enabled and (narrow is bfloat16 or float16 == narrow):
            name = "bfloat16" if narrow is bfloat16 else "float16"
            _warn_off(f"autocast: gradflow has no {name}; the region computes as written, in float32 or float64")
        self.device_type, self.enabled = device_type, False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        """As a decorator: fn runs inside this region."""

        @functools.wraps(fn)
        def inside(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return inside


class GradScaler:
    """PyTorch's GradScaler, disabled (see this file's docstring): every method passes through."""

    def __init__(
        self,
        device="cuda",
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
    ):
        if device != "cuda":
            on_cpu("GradScaler", device)
        if enabled:
            _warn_off(
                "GradScaler: gradflow's float32 gradients need no scaling; it is off, as PyTorch's is without CUDA"
            )
        self._enabled = False

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """outputs unchanged (a disabled scaler multiplies by nothing)."""
        return outputs

    def unscale_(self, optimizer):
        """Nothing: the gradients were never scaled."""

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(...), and what it returns."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Nothing: the scale stays 1."""

    def get_scale(self):
        return 1.0

    def state_dict(self):
        return {}

    def load_state_dict(self, state_dict):
        """Nothing to restore: a disabled scaler has no state."""
