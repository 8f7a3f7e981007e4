"""What the explorer's page shows of one array: every number when it is small, else a heat map of a
slice, a histogram and summary statistics. Numbers are written with a few significant digits (the
page shows four) so that a large model's page stays a few megabytes.

    summary(a) = {"shape": [3, 4], "stats": {...}, "values": [...]}                 (at most SMALL numbers)
               = {"shape": [...], "stats": {...}, "hist": {...}, "heat": {...}}     (larger)

stats: min, max, mean, std (population), norm = sqrt(sum a^2), the count of NaN and inf.
heat: the last two axes of the first slice ([0, 0, ..., :, :]), or of the slice holding a marked
element, every k-th row and column when it has more than HEAT_SIDE of them (and the marked one's);
`lead`, `rows` and `cols` say which were kept, `mark` where the marked element sits among them.
"""

import numpy as np

SMALL = 256  # every number of an array this small is written out
HEAT_SIDE = 32  # a heat map keeps at most this many rows and columns
BINS = 24
DIGITS = 6  # significant digits of the numbers written out


def rounded(a, digits=DIGITS):
    """The numbers of `a` as a flat list of floats with `digits` significant digits; NaN and inf as
    the strings "nan", "inf", "-inf" (JSON has no such numbers)."""
    flat = np.asarray(a, dtype=np.float64).ravel()
    out = [float(f"{v:.{digits}g}") for v in flat.tolist()]
    if not np.isfinite(flat).all():
        out = [v if np.isfinite(v) else str(v) for v in out]
    return out


def stats(a):
    """min, max, mean, std and norm of the finite numbers, and how many are NaN or infinite."""
    a = np.asarray(a, dtype=np.float64)
    finite = a[np.isfinite(a)]
    result = {"nan": int(np.isnan(a).sum()), "inf": int(np.isinf(a).sum())}
    if finite.size:
        result |= {
            "min": finite.min(),
            "max": finite.max(),
            "mean": finite.mean(),
            "std": finite.std(),
            "norm": np.sqrt(np.vdot(finite, finite)),
        }
    return {k: v if isinstance(v, int) else float(f"{v:.{DIGITS}g}") for k, v in result.items()}


def histogram(a):
    """Counts of the finite numbers in BINS equal bins between their min and max."""
    finite = np.asarray(a, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return None
    counts, edges = np.histogram(finite, bins=BINS)
    return {"counts": counts.tolist(), "lo": float(f"{edges[0]:.4g}"), "hi": float(f"{edges[-1]:.4g}")}


def heat(a, mark=None):
    """A matrix of `a` (its last two axes): the first, or the one holding element `mark` (an index);
    every k-th row and column beyond HEAT_SIDE, and mark's row and column."""
    m = np.asarray(a)
    mark = None if mark is None else tuple(mark)
    lead = mark[:-2] if mark is not None and m.ndim > 2 else (0,) * max(m.ndim - 2, 0)
    m = m[lead] if lead else m
    if m.ndim < 2:
        m, mark = m.reshape(1, -1), None if mark is None else (0, mark[-1] if mark else 0)
    at = None if mark is None else mark[-2:]
    rows = np.linspace(0, m.shape[0] - 1, min(m.shape[0], HEAT_SIDE)).round().astype(int)
    cols = np.linspace(0, m.shape[1] - 1, min(m.shape[1], HEAT_SIDE)).round().astype(int)
    if at is not None:  # its row and column replace the nearest kept ones, so that it is drawn
        rows[np.abs(rows - at[0]).argmin()], cols[np.abs(cols - at[1]).argmin()] = at
    rows, cols = np.unique(rows), np.unique(cols)
    shown = {"lead": list(lead), "rows": rows.tolist(), "cols": cols.tolist()}
    shown["values"] = rounded(m[np.ix_(rows, cols)], 4)
    if at is not None:
        shown["mark"] = [int(np.searchsorted(rows, at[0])), int(np.searchsorted(cols, at[1]))]
    return shown


def summary(a):
    """What the page shows of an array (see the module docstring); None for None."""
    if a is None:
        return None
    a = np.asarray(a)
    if a.dtype.kind not in "fiub":
        return {"shape": list(a.shape), "note": f"dtype {a.dtype}"}
    shown = {"shape": list(a.shape), "stats": stats(a)}
    if a.size <= SMALL:
        shown["values"] = rounded(a)
    elif a.size:
        shown["hist"] = histogram(a)
        shown["heat"] = heat(a)
    return shown
