"""A readable name for every tensor the explorer shows: the user's name, the parameter's dotted name,
or the expression that made it from its inputs' names.

    relu(h)         an op applied to one tensor
    q @ k^T         an operator between two (add, sub, mul, div, matmul), k^T a swap of the last two axes
    x[-1]           an index
    blocks.0 out    a tensor a module hands on, named by that module where the names inside it would be long
    0.7071          a one-number constant, by its value
    q               a reshaped or permuted tensor, by the name its one reader gives it (explore_view.py)

An operand longer than SHORT characters keeps the last parts of a dotted name (attn.q_proj out), or
is written `…`, so that no name outgrows its box.
"""

from gradflow.tools.graph import index_text

SHORT = 20
INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@"}


def _swaps_last_two(op):
    axes = op.params.get("axes") or op.params.get("dims")
    if op.name == "transpose":
        return True
    return axes is not None and len(axes) >= 2 and list(axes[-2:]) == [len(axes) - 1, len(axes) - 2]


def _operand(text, infix=False):
    short = text
    while (len(short) > SHORT or short[0].isdigit()) and "." in short.split(" ")[0]:
        short = short.split(".", 1)[1]  # a dotted name keeps its last parts, never a bare index
    text = short if short != text and len(short) <= SHORT else text
    if len(text) > SHORT:
        return "…"
    return f"({text})" if infix and " " in text else text


def expression(op, names):
    """What op computed, written with its inputs' names (None for an input that is not a tensor)."""
    shown = [n for n in names if n is not None]
    if op.name in INFIX and len(shown) == 2:
        a, b = (_operand(n, infix=True) for n in shown)
        return f"{a} {INFIX[op.name]} {b}"
    if op.name == "neg" and shown:
        return "-" + _operand(shown[0], infix=True)
    if op.name in ("permute", "transpose") and shown and _swaps_last_two(op):
        return _operand(shown[0], infix=True) + "^T"
    if op.name == "index" and shown and "index" in op.params:
        return _operand(shown[0], infix=True) + index_text(op.params["index"])
    return f"{op.name}({', '.join(_operand(n) for n in shown[:1])}{', …' if len(shown) > 1 else ''})"
