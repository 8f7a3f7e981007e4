"""Wrong variants of a function's source, one small step each: the mutants that prove a grader.

`variants(source)` parses the source, visits every node, and for each node yields the small
changes a learner's slip could make there (an operator swapped, a constant off by one, an axis
changed, a statement left out, ...). Each variant is the whole function again, unparsed, with
exactly one change, and a one-line description ("line 4: keepdims=True -> keepdims=False"), the
line counted from the `def`. Variants whose text comes out the same as the reference's, or as
another variant's, are dropped.
"""

import ast
import copy
from dataclasses import dataclass

# operator swaps: what each operator is most easily mistaken for
BINARY = {
    ast.Add: (ast.Sub, ast.Mult),
    ast.Sub: (ast.Add, ast.Div),
    ast.Mult: (ast.Div, ast.Add, ast.Pow),
    ast.Div: (ast.Mult, ast.Sub, ast.FloorDiv),
    ast.FloorDiv: (ast.Div, ast.Mod),
    ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
    ast.MatMult: (ast.Mult,),
    ast.BitAnd: (ast.BitOr,),
    ast.BitOr: (ast.BitAnd,),
}
NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)
COMPARE = {
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
}
# calls mistaken for one another: the name of a function or method, wherever it is looked up
FAMILIES = (
    ("sum", "mean"),
    ("max", "min"),
    ("maximum", "minimum"),
    ("argmax", "argmin"),
    ("exp", "log"),
    ("zeros", "ones"),
    ("zeros_like", "ones_like"),
    ("any", "all"),
)
SWAPPED_CALL = {a: b for pair in FAMILIES for a, b in (pair, pair[::-1])}
DROPPABLE_CALLS = ("sqrt", "exp", "log", "reversed", "abs", "swapaxes", "transpose")  # f(x, ...) -> x
DROPPABLE_METHODS = ("swapaxes", "transpose", "reshape", "copy")  # x.f(...) -> x
MODULES = ("np", "math")  # np.f(...) is a function of np, not a method of an array


@dataclass(frozen=True)
class Variant:
    line: int  # counted from the def, which is line 1
    change: str  # "keepdims=True -> keepdims=False"
    source: str  # the whole function with the change

    def __str__(self):
        return f"line {self.line}: {self.change}"


def variants(source):
    """Every one-step variant of the function in `source` (one `def`), distinct and unlike the reference."""
    tree = ast.parse(source)
    reference = ast.unparse(tree)
    # not mutated: the docstring, messages, and the signature (the learner's stub gives it)
    skipped = {id(n) for d in _docstrings(tree) for n in ast.walk(d)}
    skipped |= {id(n) for n in ast.walk(tree.body[0].args)}
    skipped |= {id(n) for s in ast.walk(tree) if isinstance(s, ast.JoinedStr) for n in ast.walk(s)}
    seen, found = {reference}, []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skipped:
            continue
        for replacement in _changes(node):
            mutant = copy.deepcopy(tree)
            _replace(mutant, list(ast.walk(mutant))[index], replacement)
            text = ast.unparse(ast.fix_missing_locations(mutant))
            if text in seen:
                continue
            seen.add(text)
            found.append(Variant(node.lineno, _said(node, replacement), text + "\n"))
    return found


def _docstrings(tree):
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            yield first


def _said(old, new):
    """'a + b -> a - b', on one line and short enough to read."""

    def short(node):
        text = "pass" if node is None else ast.unparse(node).splitlines()[0]
        return text if len(text) <= 70 else text[:67] + "..."

    return f"{short(old)} -> {short(new)}"


def _replace(tree, old, new):
    """Put `new` where `old` is in `tree` (new None: remove a statement, leaving `pass` if the body empties)."""
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(v is old for v in value):
                i = next(i for i, v in enumerate(value) if v is old)
                value[i : i + 1] = [new] if new is not None else []
                if not value and field == "body":  # a block cannot be empty
                    value.append(ast.Pass())
                return
    raise ValueError("mutation_ast._replace: node not in tree")


def _changes(node):
    """The replacements for `node`, each a new node (or None: the statement removed)."""
    c = copy.deepcopy
    if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.Pass)):
        yield None  # the statement left out
    if isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield ast.Return(ast.Constant(None))
        yield from (ast.Return(v) for v in _negated(node.value))
    if isinstance(node, ast.Assign):
        yield from (ast.Assign([c(t) for t in node.targets], v) for v in _negated(node.value))
        if isinstance(node.targets[0], ast.Tuple) and len(node.targets[0].elts) >= 2:
            yield ast.Assign([ast.Tuple(_swapped_first_two(node.targets[0].elts), ast.Store())], c(node.value))
    if isinstance(node, (ast.BinOp, ast.AugAssign)):
        for op in BINARY.get(type(node.op), ()):
            new = c(node)
            new.op = op()
            yield new
    if isinstance(node, ast.BinOp):
        yield c(node.left)  # a term or factor dropped
        yield c(node.right)
        if isinstance(node.op, NON_COMMUTATIVE):
            yield ast.BinOp(c(node.right), node.op, c(node.left))
        if isinstance(node.op, ast.MatMult):
            yield ast.BinOp(_swapaxes(node.left), node.op, c(node.right))
            yield ast.BinOp(c(node.left), node.op, _swapaxes(node.right))
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for other in COMPARE.get(type(op), ()):
                new = c(node)
                new.ops[i] = other()
                yield new
    if isinstance(node, ast.BoolOp):
        yield ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), c(node.values))
        yield from (c(v) for v in node.values)  # one condition left out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
        yield c(node.operand)
    if isinstance(node, ast.Constant):
        yield from (ast.Constant(v) for v in _constants(node.value))
    if isinstance(node, ast.keyword) and node.arg in ("axis", "keepdims"):
        yield from (ast.keyword(node.arg, v) for v in _axis_values(node))
    if isinstance(node, ast.Call):
        yield from _changed_calls(node)
    if isinstance(node, ast.Attribute) and node.attr == "T":
        yield c(node.value)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        yield c(node.value)  # the subscript dropped ([:, None], [..., 0, :])
    if isinstance(node, ast.Tuple) and isinstance(node.ctx, ast.Load) and len(node.elts) >= 2:
        yield ast.Tuple(_swapped_first_two(node.elts), ast.Load())
    if isinstance(node, ast.IfExp):
        yield c(node.body)
        yield c(node.orelse)


def _negated(value):
    """A value given a unary minus, or its minus dropped (the assignment's or return's sign flipped)."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        return
    if isinstance(value, ast.Tuple):
        for i, element in enumerate(value.elts):
            elts = copy.deepcopy(value.elts)
            elts[i] = ast.UnaryOp(ast.USub(), elts[i])
            if not (isinstance(element, ast.Constant) and element.value is None):
                yield ast.Tuple(elts, ast.Load())
        return
    yield ast.UnaryOp(ast.USub(), copy.deepcopy(value))


def _swapped_first_two(elts):
    elts = copy.deepcopy(elts)
    elts[0], elts[1] = elts[1], elts[0]
    return elts


def _swapaxes(node):
    """x.swapaxes(-1, -2): the last two axes swapped (a transpose added)."""
    minus = [ast.UnaryOp(ast.USub(), ast.Constant(n)) for n in (1, 2)]
    return ast.Call(ast.Attribute(copy.deepcopy(node), "swapaxes", ast.Load()), minus, [])


def _constants(value):
    """Numbers a slip turns `value` into: 0 <-> 1, 1 -> 2, n -> n +- 1, n -> -n, a float halved or doubled."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        out = [value + 1, value - 1, -value, 0 if value else 1, 2 if value == 1 else None]
    elif isinstance(value, float):
        out = [0.0, 1.0, 2.0, -value, value * 2, value / 2]
    else:
        return []
    return [v for v in dict.fromkeys(out) if v is not None and v != value]


def _axis_values(keyword):
    """axis=-1 -> 0 or -2, keepdims=True <-> False; None for the keyword dropped is handled by _changed_calls."""
    v = keyword.value
    if keyword.arg == "keepdims":
        if isinstance(v, ast.Constant) and isinstance(v.value, bool):
            return [ast.Constant(not v.value)]
        return [ast.UnaryOp(ast.Not(), copy.deepcopy(v))]
    literal = _literal(v)
    if isinstance(literal, int):
        return [
            ast.Constant(a) if a >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-a))
            for a in (0, -1, -2)
            if a != literal
        ]
    return [ast.Constant(-1), ast.Constant(0)]


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _changed_calls(call):
    """f(x) -> x for the droppable f; sum <-> mean and the other families; axis= or keepdims= left out."""
    c = copy.deepcopy
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name in SWAPPED_CALL:
        new = c(call)
        if isinstance(new.func, ast.Attribute):
            new.func.attr = SWAPPED_CALL[name]
        else:
            new.func.id = SWAPPED_CALL[name]
        yield new
    module = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in MODULES
    if name in DROPPABLE_CALLS and call.args and (module or isinstance(func, ast.Name)):
        yield c(call.args[0])
    if name in DROPPABLE_METHODS and isinstance(func, ast.Attribute) and not module:
        yield c(func.value)
    for i, keyword in enumerate(call.keywords):
        if keyword.arg in ("axis", "keepdims"):
            new = c(call)
            del new.keywords[i]
            yield new
