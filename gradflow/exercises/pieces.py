"""A piece of gradflow an exercise hands to the learner: where it lives, its source, its stub, and the swap.

A piece is one function of gradflow's own code: a Function's backward (ops.Mul.backward), a
helper of the engine (autograd.unbroadcast), a method (KVCache.append). Everything an exercise shows
is read from that code at the time it is shown, so an exercise cannot drift from the engine:

    solution   the piece's source, as gradflow runs it
    stub       its signature and docstring (for a backward, the op's docstring with both formulas)
               over a body that raises NotImplementedError("TODO ...")
    imports    the names the solution reads from its module (np, math, spread, ...), so that the
               learner's file has the same tools at hand

`replaced_by(fn)` puts the learner's function where gradflow reaches the piece, and puts
gradflow's back afterwards, whatever happens inside.
"""

import ast
import builtins
import contextlib
import inspect
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

import gradflow

ROOT = Path(gradflow.__file__).parent.parent  # the folder holding gradflow/, for paths a reader can open


@dataclass(frozen=True)
class Piece:
    owner: object  # the module or class that holds the piece
    attribute: str  # its name there
    label: str = None  # how a reader calls it, where its class's name would mislead (_Extreme.backward)
    # and, set by __post_init__, `stored`: the piece as its owner stores it (a staticmethod for a backward)

    def __post_init__(self):  # gradflow's own, kept from before any swap: what every check compares with
        object.__setattr__(self, "stored", inspect.getattr_static(self.owner, self.attribute))

    @property
    def function(self):
        stored = self.stored
        return stored.__func__ if isinstance(stored, staticmethod) else stored

    @property
    def qualname(self):
        """How a reader calls it: Mul.backward, unbroadcast, KVCache.append."""
        if self.label:
            return self.label
        return self.attribute if isinstance(self.owner, types.ModuleType) else f"{self.owner.__name__}.{self.attribute}"

    @property
    def path(self):
        """The file that holds it, relative to the repository (gradflow/engine/ops/elementwise.py)."""
        path = Path(inspect.getsourcefile(self.function)).resolve()
        try:
            return path.relative_to(ROOT.resolve()).as_posix()
        except ValueError:
            return path.name

    def source(self):
        """The piece's code as gradflow runs it, dedented, without its decorator."""
        source = textwrap.dedent(inspect.getsource(self.function))
        node = _function_node(source)
        return "\n".join(source.splitlines()[node.lineno - 1 :]) + "\n"

    def stub(self, states=None):
        """The signature and the docstring over a body that is still to be written. `states`, when given,
        is the docstring instead (a backward's forward and what to find, not the op's derivation)."""
        source = self.source()
        lines, node = source.splitlines(), _function_node(source)
        first = node.body[0]
        has_doc = isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str)
        head = lines[: first.end_lineno] if has_doc and not states else lines[: first.lineno - 1]
        if states:
            head.append(textwrap.indent(f'"""{states}\n"""', "    "))
        elif not has_doc and inspect.isclass(self.owner) and self.owner.__doc__:  # a backward: the op's formulas
            head.append(textwrap.indent(f'"""{inspect.cleandoc(self.owner.__doc__)}\n"""', "    "))
        todo = f'    raise NotImplementedError("TODO: write {self.qualname}")'
        if "ctx.saved_tensors" in source:  # how a backward reads what its forward kept, in the order kept
            head.append("    # what forward saved, in the order it saved it: ... = ctx.saved_tensors")
        return "\n".join([*head, todo]) + "\n"

    def imports(self):
        """Import lines for every name the solution reads from its module's globals."""
        node = _function_node(self.source())
        local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        scope = self.function.__globals__
        modules, names = set(), set()
        for name in sorted(read - local):
            if name not in scope and hasattr(builtins, name):
                continue
            value = scope[name]
            if isinstance(value, types.ModuleType):
                alias = "" if value.__name__ == name else f" as {name}"
                modules.add(f"import {value.__name__}{alias}")
            else:
                names.add(name)
        lines = sorted(modules)
        if names:
            lines.append(f"from {self.function.__module__} import {', '.join(sorted(names))}")
        return lines

    @contextlib.contextmanager
    def replaced_by(self, fn):
        """Run `fn` wherever gradflow runs this piece, inside the block; gradflow's own again after it.

        A method is replaced on its class (a backward stays a staticmethod). A module's function is
        replaced in its module and in every gradflow module that imported it by name (trainer.py
        holds its own name for clip_grad_norm), so that every caller meets the same function.
        """
        if not isinstance(self.owner, types.ModuleType):
            stored = self.stored
            setattr(self.owner, self.attribute, staticmethod(fn) if isinstance(stored, staticmethod) else _method(fn))
            try:
                yield
            finally:
                setattr(self.owner, self.attribute, stored)
            return
        original = self.function
        holders = [
            m
            for name, m in list(sys.modules.items())
            if (name == "gradflow" or name.startswith("gradflow.")) and m is not None
            and getattr(m, self.attribute, None) is original
        ]  # fmt: skip
        for module in holders:
            setattr(module, self.attribute, fn)
        try:
            yield
        finally:
            for module in holders:
                setattr(module, self.attribute, original)


def _method(fn):
    """fn as a function, which a class binds to its instances (a callable object it would not)."""
    if isinstance(fn, types.FunctionType):
        return fn

    def method(*args, **kwargs):
        return fn(*args, **kwargs)

    return method


def _function_node(source):
    node = ast.parse(source).body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TypeError(f"Piece: expected a function's source, got {type(node).__name__}")
    return node


def given_context(owner, piece):
    """The source of `owner` (a class, or a function the piece works for), with the piece's own
    body and the class's docstring (a backward's derivation) cut out when `owner` is the piece's
    class: what the learner is given around the blank."""
    source = textwrap.dedent(inspect.getsource(owner))
    if owner is not piece.owner:
        return source
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == piece.attribute:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            indent = lines[node.lineno - 1][: len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())]
            lines[start : node.end_lineno] = [f"{indent}# {piece.attribute}: yours, below"]
            break
    doc = tree.body[0].body[0]  # above the piece, so its line numbers still hold
    if isinstance(doc, ast.Expr) and isinstance(getattr(doc.value, "value", None), str):
        del lines[doc.lineno - 1 : doc.end_lineno]
    return "\n".join(lines).rstrip() + "\n"
