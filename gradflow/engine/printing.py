"""How a tensor prints: PyTorch's layout, so that a program's output reads as it does in PyTorch.

Numbers are shown with 4 digits after the point, every element in one column width:
    fixed       1.0000, -0.3805            most tensors
    scientific  1.0000e-05, 3.2000e+08     when the nonzero finite magnitudes span more than a
                                           factor 1000, or the largest passes 1e8, or the smallest is below 1e-4
    whole       5., 7.                     a float tensor whose values are all whole numbers
Integer and bool tensors print their values as they are. A row holds as many elements as fit in
80 characters after its indentation; a tensor of more than 1000 elements shows the first and last
3 along each axis, with "..." between.
"""

import numpy as np

PRECISION = 4  # digits after the point
LINE_WIDTH = 80
THRESHOLD = 1000  # more elements than this are summarized
EDGE_ITEMS = 3  # the elements shown at each end of a summarized axis


def array_text(a, indent):
    """The values of array `a` as PyTorch lays them out, its first line starting at column `indent`
    (after "tensor(")."""
    summarize = a.size > THRESHOLD
    shown = _shown(a) if summarize else a.reshape(-1)
    if np.issubdtype(a.dtype, np.floating):
        style = _float_style(shown)
        finite_nonzero = shown[np.isfinite(shown) & (shown != 0)]
        width = max((len(style(v)) for v in finite_nonzero.astype(np.float64)), default=1)  # a minus sign counts
    else:
        style = str
        width = max((len(str(v)) for v in shown.tolist()), default=1)

    def element(v):
        return style(v).rjust(width)

    if a.ndim == 0:
        return style(a.item())
    return _nested(a, indent, summarize, element, width)


def with_suffixes(text, suffixes, indent):
    """text followed by each suffix (", dtype=float64"), on a line of its own, indented, where the
    last line would pass LINE_WIDTH."""
    for suffix in suffixes:
        last_line = text.rsplit("\n", 1)[-1]
        if len(last_line) + len(suffix) + 2 > LINE_WIDTH:
            text += ",\n" + " " * indent + suffix
        else:
            text += ", " + suffix
    return text


def _nested(a, indent, summarize, element, width):
    """[row, row, ...]: a vector's elements in lines of what fits, or the sub-arrays one below the
    other, a blank line between blocks of three dimensions and more."""
    cut = summarize and len(a) > 2 * EDGE_ITEMS
    kept = [*range(EDGE_ITEMS), None, *range(len(a) - EDGE_ITEMS, len(a))] if cut else range(len(a))
    if a.ndim == 1:
        items = [" ..." if i is None else element(a[i].item()) for i in kept]
        per_line = max(1, (LINE_WIDTH - indent) // (width + 2))  # an element and its ", "
        lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    parts = ["..." if i is None else _nested(a[i], indent + 1, summarize, element, width) for i in kept]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _shown(a):
    """The elements a summarized print shows: the first and last EDGE_ITEMS along each longer axis."""
    for axis, n in enumerate(a.shape):
        if n > 2 * EDGE_ITEMS:
            a = np.take(a, np.r_[0:EDGE_ITEMS, n - EDGE_ITEMS : n], axis=axis)
    return a.reshape(-1)


def _float_style(values):
    """fixed, scientific or whole, chosen from the nonzero finite values (see the module's docstring)."""
    values = values.astype(np.float64)
    nonzero = np.abs(values[np.isfinite(values) & (values != 0)])
    if nonzero.size == 0:
        return _whole
    whole = bool(np.all(nonzero == np.ceil(nonzero)))
    wide = nonzero.max() / nonzero.min() > 1000 or nonzero.max() > 1e8
    if wide or (not whole and nonzero.min() < 1e-4):
        return _scientific
    return _whole if whole else _fixed


def _fixed(v):
    return f"{v:.{PRECISION}f}"


def _scientific(v):
    return f"{v:.{PRECISION}e}"


def _whole(v):
    """5. for a whole number (the point says the tensor holds floats); inf and nan as they are."""
    return f"{v:.0f}" + ("." if np.isfinite(v) else "")
