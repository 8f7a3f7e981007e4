"""A readable name for every tensor the explorer shows: the user's name, the parameter's dotted name,
or the expression that made it from its inputs' names.

    relu(h)         an op applied to one tensor
    q @ k^T         an operator between two (add, sub, mul, div, matmul), k^T a swap of the last two axes
    x[-1]           an index
    blocks.0 out    a tensor a module hands on, named by that module where the names inside it would be long
    0.7071          a one-number constant, by its value
    q               a reshaped or permuted tensor, by the name its one reader gives it (explore_view.py)

An operand longer than SHORT characters is shortened at its own parts, never cut through a bracket:
a dotted name keeps its last parts (attn.q_proj out), a call shortens its argument
(silu(gate_proj out)) or becomes silu(…), an operator shortens each side; a number keeps its
digits (0.04471). So that no name outgrows its box, and every bracket opened is closed.
"""

import re

from gradflow.tools.graph import index_text

SHORT = 24
INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@"}
WORD = {sign: name for name, sign in INFIX.items()}


def _swaps_last_two(op):
    axes = op.params.get("axes") or op.params.get("dims")
    if op.name == "transpose":
        return True
    return axes is not None and len(axes) >= 2 and list(axes[-2:]) == [len(axes) - 1, len(axes) - 2]


NAME = re.compile(r"[A-Za-z_][\w.]*( out)?")  # a parameter's or module's dotted name, "blocks.0.attn out"
CALL = re.compile(r"([A-Za-z_]\w*)\((.*)\)")


def _depths(text):
    """The bracket depth before each character."""
    depth, out = 0, []
    for ch in text:
        depth -= ch in ")]"
        out.append(depth)
        depth += ch in "(["
    return out


def _top_level(text, sep):
    """text split at `sep` where no bracket is open; None if it is not there."""
    depths, parts, start = _depths(text), [], 0
    for i in range(len(text)):
        if depths[i] == 0 and i >= start and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
    return parts + [text[start:]] if parts else None


def _bracketed(text):
    """Is text one bracketed group, (…), its first bracket closed by its last character?"""
    return text.startswith("(") and text.endswith(")") and all(d > 0 for d in _depths(text)[1:-1] + [1])


def short(text, limit=SHORT):
    """text in at most `limit` characters, shortened at its parts (the module docstring)."""
    if len(text) <= limit:
        return text
    if NAME.fullmatch(text):
        parts = text.split(".")
        for k in range(1, len(parts)):
            tail = ".".join(parts[k:])
            if len(tail) <= limit and not tail[0].isdigit():  # never a bare index: 0.attn
                return tail
        return "…"
    if _bracketed(text):
        inner = short(text[1:-1], limit - 2)
        return inner if CALL.fullmatch(inner) else f"({inner})" if inner != "…" else "…"
    if text.endswith("]") and "[" in text and _depths(text)[text.rindex("[")] == 0:
        base, index = text[: text.rindex("[")], text[text.rindex("[") :]
        return short(base, limit - len(index)) + index if len(index) < limit // 2 else "…"
    for sign in INFIX.values():
        sides = _top_level(text, f" {sign} ")
        if sides and len(sides) == 2:
            a, b = sides
            if a == b and sign == "*":  # x * x: x^2, the one name written once
                squared = short(_operand(a, infix=True), limit - 2) + "^2"
                return squared if len(squared) <= limit else "…"
            if len(a) > len(b):  # the longer side gives way first
                a = short(a, max(limit - len(short(b, limit)) - len(sign) - 2, 1))
                b = short(b, limit - len(a) - len(sign) - 2)
            else:
                b = short(b, max(limit - len(short(a, limit)) - len(sign) - 2, 1))
                a = short(a, limit - len(b) - len(sign) - 2)
            joined = f"{a} {sign} {b}"
            if len(joined) <= limit and "…" not in (a, b):
                return joined
            return f"{WORD[sign]}(…)"  # not "… * …": the op, its operands in its box's panel
    call = CALL.fullmatch(text)
    if call and _bracketed(text[len(call.group(1)) :]):
        name, inner = call.group(1), call.group(2)
        args = _top_level(inner, ", ") or [inner]
        room = limit - len(name) - 2
        shown = ", ".join([short(args[0], room - 3 * (len(args) > 1))] + ["…"] * (len(args) > 1))
        return f"{name}({shown})" if len(shown) <= room else f"{name}(…)"
    return "…"


def _operand(text, infix=False):
    text = short(text)
    spaced = any(ch == " " and depth == 0 for ch, depth in zip(text, _depths(text)))
    return f"({text})" if infix and spaced else text


def expression(op, names):
    """What op computed, written with its inputs' names (None for an input that is not a tensor)."""
    shown = [n for n in names if n is not None]
    if op.name == "mul" and len(shown) == 2 and op.inputs[0] is op.inputs[1]:
        return _operand(shown[0], infix=True) + "^2"
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
