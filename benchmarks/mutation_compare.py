"""Comparing what a variant computed with what gradflow's piece computed, for the equivalence oracle."""

import numpy as np

from gradflow.engine.tensor import Tensor

RTOL = 1e-7  # float64 throughout: the same formula rearranged agrees to ~1e-14


class Different(Exception):
    """The variant and the reference disagree; the message says where."""


def same(got, want, what):
    """Raise Different unless `got` matches `want`: arrays, tensors, numbers, None, and nests of them."""
    if isinstance(want, Tensor) or isinstance(got, Tensor):
        if not (isinstance(want, Tensor) and isinstance(got, Tensor)):
            raise Different(f"{what}: {type(got).__name__} where the reference has {type(want).__name__}")
        return same(got.data, want.data, what)
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            raise Different(f"{what}: {_kind(got)} where the reference has {_kind(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{what}[{i}]")
        return
    if want is None or got is None:
        if want is not got:
            raise Different(f"{what}: {_kind(got)} where the reference has {_kind(want)}")
        return
    if isinstance(want, (str, bytes)):
        if got != want:
            raise Different(f"{what}: {got!r}, the reference {want!r}")
        return
    try:
        g, w = np.asarray(got), np.asarray(want)
    except (TypeError, ValueError):
        raise Different(f"{what}: {_kind(got)} where the reference has {_kind(want)}") from None
    if g.shape != w.shape:
        raise Different(f"{what}: shape {g.shape}, the reference {w.shape}")
    if w.dtype.kind not in "fc" or g.dtype.kind not in "fc":
        if not np.array_equal(g, w):
            raise Different(f"{what}: other values")
        return
    finite = np.isfinite(w)  # where the reference itself overflows there is nothing to compare
    scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0.0)))
    if not np.allclose(g[finite], w[finite], rtol=RTOL, atol=1e-12 * scale):
        raise Different(f"{what}: other values (largest difference {np.max(np.abs(g[finite] - w[finite])):.3g})")


def _kind(v):
    if isinstance(v, (list, tuple)):
        return f"a {type(v).__name__} of {len(v)}"
    return "None" if v is None else type(v).__name__
