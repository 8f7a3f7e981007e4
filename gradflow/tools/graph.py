"""Drawing the computation graph: tensors with their values and gradients, ops, and the modules they ran in.

    import gradflow as gf
    loss.backward()
    gf.draw_graph(loss, model=model)            # a graphviz.Digraph; Jupyter shows it as SVG
    gf.draw_graph(loss).write("loss.svg")       # or .png, or .dot for the DOT text
    gf.draw_graph(loss, grads="all")            # runs backward keeping every tensor's gradient

A tensor is a box with its name, shape and dtype and, when it is small, its data and gradient side
by side; an op is an oval with its name; arrows follow the data from inputs to outputs. Nodes are
numbered in the order of a walk from the root (the engine's topological order, inputs in order),
so the same computation always gives the same DOT text. A legend box names the fill colours.

Laying out and drawing (svg, png) is Graphviz's work: the system's `dot` when it is on PATH, else
`graphviz-pure`, a self-contained port of Graphviz's `dot` that pip installs as a program for every
platform, so a fresh machine draws graphs without installing Graphviz.
"""

import html
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import graphviz
import numpy as np

from gradflow.engine.autograd import retain_grads, topological_order
from gradflow.engine.files import write_atomically
from gradflow.engine.tensor import Tensor
from gradflow.nn.module import Module, Parameter

RANKDIRS = ("LR", "TB")
MODULE_MODES = (None, "cluster", "collapse")
RENDER_FORMATS = ("svg", "png", "jpeg")  # what both `dot` and graphviz-pure write
# A png or jpeg is drawn at Graphviz's 96 dots per inch, and a drawing longer than 1600 pixels on a
# side is scaled down to fit (Graphviz's size attribute), so a laptop's screen shows it whole.
PIXELS_PER_INCH, LONGEST_SIDE = 96, 1600
FILE_FORMATS = {".dot": None, ".gv": None, ".svg": "svg", ".png": "png"}  # None: the DOT text itself
FALLBACK_PROGRAM = "graphviz-pure"  # the dot command line of the `graphviz-pure` package

# fill colours: what the learner sets (leaves with gradients), constants, the result, ops and modules
LEAF, CONSTANT, RESULT, VALUE = "#dbeafe", "#f3f4f6", "#fef3c7", "#ffffff"
OP, MODULE = "#ffedd5", "#e0e7ff"
KINDS = {  # what each fill means, for the legend
    "leaf": (LEAF, "input or weight (differentiated)"),
    "constant": (CONSTANT, "constant (not differentiated)"),
    "value": (VALUE, "computed tensor"),
    "result": (RESULT, "the result (root)"),
    "op": (OP, "operation"),
    "module": (MODULE, "module (collapsed)"),
}


def tensor_kind(t, root):
    """Which of the legend's kinds a tensor is: the result, a computed value, a leaf or a constant."""
    return "result" if t is root else "value" if t.grad_fn is not None else "leaf" if t.requires_grad else "constant"


def backward_keeping_every_grad(root, who, retain_graph=False):
    """Run root.backward() keeping the gradient of every tensor in its graph (autograd.retain_grads),
    unless root already holds its gradient (a backward in that mode ran); True if it ran. Refuses a
    graph whose leaves already hold gradients: adding a second backward's would show doubled numbers."""
    if root.grad is not None or root.grad_fn is None:
        return False
    if root.grad_fn._freed:
        raise ValueError(
            f"{who}: a backward pass already ran through this graph and freed it, keeping only the leaves' "
            "gradients; build the graph again and call it before backward"
        )
    if root.numel() != 1:
        raise ValueError(f"{who}: the root has shape {root.shape}; backward needs a one-element root (a loss)")
    ops, _, _ = walk(root)
    for op in ops:
        for t in op.inputs:
            if t is not None and t.grad_fn is None and t.grad is not None:
                raise ValueError(
                    f"{who}: {t.name or f'a leaf of shape {t.shape}'} already holds a gradient, and this backward "
                    "would add to it; zero the gradients first (model.zero_grad()), or draw without running backward"
                )
    with retain_grads():
        root.backward(retain_graph=retain_graph)
    return True


# --- rendering DOT text with Graphviz ----------------------------------------------------------


def layout_program():
    """The program that lays out DOT text: Graphviz's `dot` on PATH, else the graphviz-pure package's.

    graphviz-pure is also looked for in this Python's scripts directories, because a Jupyter kernel
    or `.venv/bin/python` often runs without its environment's bin directory on PATH.
    """
    dot = shutil.which("dot")
    if dot:
        return dot
    scripts = [sysconfig.get_path("scripts"), sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user"))]
    found = shutil.which(FALLBACK_PROGRAM, path=os.pathsep.join([os.environ.get("PATH", ""), *scripts]))
    if found:
        return found
    raise RuntimeError(
        f"drawing a graph needs Graphviz's `dot` or the {FALLBACK_PROGRAM} package, and neither was found: "
        f"pip install {FALLBACK_PROGRAM} (or install Graphviz), or write the DOT text to a .dot file"
    )


def render(dot_source, fmt="svg"):
    """Lay out and draw DOT text as `fmt` ("svg", "png" or "jpeg"); returns the file's bytes."""
    if fmt not in RENDER_FORMATS:
        raise ValueError(f"render: cannot draw the format {fmt!r}; formats: {', '.join(RENDER_FORMATS)}")
    program = layout_program()
    command = [program, f"-T{fmt}"]
    if fmt != "svg":
        inches = LONGEST_SIDE / PIXELS_PER_INCH
        command += [f"-Gdpi={PIXELS_PER_INCH}", f"-Gsize={inches:.3f},{inches:.3f}"]
    done = subprocess.run(command, input=dot_source.encode("utf-8"), capture_output=True)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError(f"render: {Path(program).name} could not draw the graph as {fmt}: {message}")
    return done.stdout


class ComputationGraph(graphviz.Digraph):
    """The graphviz.Digraph that draw_graph returns, drawn by `render` so that it needs no system Graphviz:
    Jupyter shows it as SVG, `pipe(format)` gives the drawing's bytes, and `write(path)` saves it."""

    def pipe(self, format=None, *, encoding=None):
        """The drawing as bytes, or as text given an encoding (Jupyter asks for svg this way)."""
        data = render(self.source, format or self.format)
        return data if encoding is None else data.decode(encoding)

    def write(self, path):
        """Save to `path`, in the format its extension names: .svg, .png, or .dot/.gv for the DOT text."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in FILE_FORMATS:
            known = ", ".join(FILE_FORMATS)
            raise ValueError(f"cannot write '{path}': the format comes from the extension, one of {known}")
        if not path.parent.is_dir():  # fail before the layout, which can take a while for a large graph
            raise FileNotFoundError(f"cannot write '{path}': there is no directory '{path.parent}'")
        fmt = FILE_FORMATS[suffix]
        write_atomically(path, self.source.encode("utf-8") if fmt is None else render(self.source, fmt))
        return path


# --- walking the graph ---------------------------------------------------------------------------


def walk(root):
    """The ops in data-flow order (each after the ops that made its inputs) and, for every tensor in
    order of first appearance, the ops that read it; also which tensor each op produced.

    A node records its input tensors but not its output, so outputs are found as the inputs of the
    next ops (and the root).
    """
    if root.grad_fn is None:
        return [], {root: []}, {}
    ops = topological_order(root.grad_fn)[::-1]
    output = {root.grad_fn: root}
    for op in ops:
        for t in op.inputs:
            if t is not None and t.grad_fn is not None:
                output[t.grad_fn] = t
    readers = {}  # insertion-ordered: an op's inputs, then its output, op after op
    for op in ops:
        for t in op.inputs:
            if t is not None:
                readers.setdefault(t, []).append(op)
        readers.setdefault(output[op], [])
    return ops, readers, output


def shared_scope(scopes):
    """The longest run of modules, from the outermost, that every scope starts with."""
    first, *rest = scopes
    n = len(first)
    for scope in rest:
        n = min(n, len(scope))
        n = next((i for i in range(n) if scope[i] is not first[i]), n)
    return first[:n]


def _home(t, readers):
    """The innermost module that every use of `t` (the op that made it, the ops that read it) ran in.

    A leaf that is not a Parameter (an input, a constant) comes from outside every module.
    """
    if t.grad_fn is None and not isinstance(t, Parameter):
        return ()
    scopes = [op.scope for op in readers[t]]
    if t.grad_fn is not None:
        scopes.append(t.grad_fn.scope)
    return shared_scope(scopes) if scopes else ()


# --- labels ------------------------------------------------------------------------------------


def _array_text(a):
    """Fixed 4 decimals, so that columns line up and equal numbers print alike."""
    text = np.array2string(np.asarray(a), precision=4, floatmode="fixed", suppress_small=True)
    return '<br align="left"/>'.join(html.escape(line) for line in text.split("\n"))


def tensor_label(t, name, show_values, show_grads, max_elements, fill):
    """An HTML-like table: name, shape and dtype, then `data | grad` when the tensor is small enough."""
    cells = []
    if t.numel() <= max_elements:
        if show_values:
            cells.append(("data", t.data))
        if show_grads and t.grad is not None:
            cells.append(("grad", t.grad.data))
    span = max(len(cells), 1)
    rows = [f'<tr><td colspan="{span}"><b>{html.escape(name)}</b></td></tr>'] if name else []
    rows.append(f'<tr><td colspan="{span}">{t.shape} {t.dtype}</td></tr>')
    if cells:
        row = "".join(
            f'<td align="left" balign="left"><font point-size="10" color="#6b7280">{title}</font><br/>'
            f'<font face="Courier">{_array_text(a)}</font></td>'
            for title, a in cells
        )
        rows.append(f"<tr>{row}</tr>")
    return (
        f'<<table border="0" cellborder="1" cellspacing="0" cellpadding="4" bgcolor="{fill}">{"".join(rows)}</table>>'
    )


def index_text(index):
    """x[-1, 2:5] for an index tuple; an integer array shows as its shape."""
    parts = []
    for i in index:
        if isinstance(i, slice):
            step = "" if i.step is None else f":{i.step}"
            parts.append(f"{'' if i.start is None else i.start}:{'' if i.stop is None else i.stop}{step}")
        elif isinstance(i, np.ndarray):
            parts.append(f"ids{i.shape}")
        else:
            parts.append("..." if i is Ellipsis else str(i))
    return "[" + ", ".join(parts) + "]"


def param_text(key, value):
    """A constant worth a glance (axis, shape, eps, ...) as `key=value`; None for arrays and defaults."""
    if key == "index":
        return index_text(value)
    if value is None or value is False:
        return None
    if isinstance(value, (bool, int, float, str, np.number)):
        return f"{key}={value}"
    if isinstance(value, tuple) and all(isinstance(v, (int, np.integer)) for v in value):
        return f"{key}={value}"
    return None


def op_label(op, size=10):
    """The op's name over its constants, these in `size` points."""
    params = [p for p in (param_text(k, v) for k, v in op.params.items()) if p is not None]
    extra = f'<br/><font point-size="{size}">{html.escape(", ".join(params))}</font>' if params else ""
    return f"<{html.escape(op.name)}{extra}>"


def module_label(module, module_names):
    name = module_names.get(module)
    kind = type(module).__name__
    return f"{name} ({kind})" if name else kind


# --- the drawing -------------------------------------------------------------------------------


def _check_options(root, model, rankdir, max_elements, modules, collapse_depth, grads=True):
    if not (isinstance(grads, bool) or grads == "all"):
        raise ValueError(f"draw_graph: grads must be True, False or 'all', got {grads!r}")
    if not isinstance(root, Tensor):
        raise TypeError(f"draw_graph: root must be a Tensor, got {type(root).__name__}")
    if model is not None and not isinstance(model, Module):
        raise TypeError(f"draw_graph: model must be an nn.Module, got {type(model).__name__}")
    if rankdir not in RANKDIRS:
        raise ValueError(f"draw_graph: rankdir must be 'LR' (left to right) or 'TB' (top to bottom), got {rankdir!r}")
    if modules not in MODULE_MODES:
        raise ValueError(f"draw_graph: modules must be None, 'cluster' or 'collapse', got {modules!r}")
    for name, n in (("max_elements", max_elements), ("collapse_depth", collapse_depth)):
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise ValueError(f"draw_graph: {name} must be a non-negative int, got {n!r}")


def draw_graph(
    root,
    model=None,
    values=True,
    grads=True,
    rankdir="LR",
    max_elements=20,
    modules=None,
    collapse_depth=1,
    names=None,
    legend=True,
):
    """Draw everything `root` depends on; returns a ComputationGraph (a graphviz.Digraph).

    model: a Module whose Parameters get their dotted names (`blocks.0.attn.q_proj.weight`) and
        whose sub-modules label the module boxes.
    values, grads: print the data and (after backward) the gradient of tensors with at most
        `max_elements` elements. grads="all" first runs the backward pass keeping every tensor's
        gradient (autograd.retain_grads), so that every box shows the gradient flowing back into it.
    rankdir: "LR" (inputs on the left) or "TB" (inputs at the top).
    modules: None draws every op; "cluster" boxes each module's ops with the module's name;
        "collapse" draws each module `collapse_depth` levels below the outermost one as one node
        (the levels above stay boxes), so a whole model stays readable. A module called twice is
        one node. A tensor sits in the innermost module that made it and read it (inputs and
        constants outside every module); one used only inside a collapsed module is not drawn.
    names: {tensor: name}; otherwise a tensor's `.name`, else its parameter name in `model`.
    legend: a box naming what each fill colour means.
    """
    _check_options(root, model, rankdir, max_elements, modules, collapse_depth, grads)
    if grads == "all":
        backward_keeping_every_grad(root, "draw_graph")
    named, module_names = {}, {}
    if model is not None:
        named.update((p, name) for name, p in model.named_parameters())
        module_names.update((m, name) for name, m in model.named_modules())
    ops, readers, output = walk(root)
    named.update((t, t.name) for t in readers if t.name)
    named.update(names or {})

    def label_of(t):
        return tensor_label(t, named.get(t), values, bool(grads), max_elements, KINDS[tensor_kind(t, root)][0])

    drawing = _Drawing(root, readers, modules, collapse_depth, label_of, module_names)
    for op in ops:
        drawing.add_op(op, output[op])
    if not ops:
        drawing.tensor_node(root)
    graph = drawing.digraph(rankdir)
    if legend:
        shown = ["leaf", "constant", "value", "result", "op"] + ["module"] * (modules == "collapse")
        _add_legend(graph, shown, rankdir)
    return graph


def _add_legend(graph, kinds, rankdir):
    """A box of one sample node per kind drawn, each filled with its colour and saying what it is.

    The samples stand in one column, so the legend adds a narrow strip beside the drawing. Nodes of
    one rank line up across the flow: down the page when it runs left to right, but along it (one
    wide row) when it runs top to bottom, where invisible arrows put each sample one rank lower.
    """
    with graph.subgraph(name="cluster_legend") as box:
        box.attr(label="legend", style="rounded", color="#d1d5db", fontsize="10")
        for kind in kinds:
            fill, text = KINDS[kind]
            shape = {"op": "ellipse", "module": "box3d"}.get(kind, "box")
            box.node(f"legend_{kind}", label=text, shape=shape, fillcolor=fill, fontsize="9", height="0.2")
        if rankdir == "TB":
            for above, below in zip(kinds, kinds[1:]):
                box.edge(f"legend_{above}", f"legend_{below}", style="invis")


class _Drawing:
    """The nodes and arrows of one drawing, numbered in the order the walk meets them, each placed in
    the module box it belongs to.

    modules=None: every op, no boxes. "cluster": every op, in nested boxes of the modules it ran in.
    "collapse": the ops of a module `depth` levels below the outermost become one node for that
    module; the modules above it are boxes.
    """

    def __init__(self, root, readers, modules, depth, tensor_label, module_names):
        self.root, self.modules, self.tensor_label, self.module_names = root, modules, tensor_label, module_names
        self.depth = depth if modules == "collapse" else None
        self.homes = {t: _home(t, readers) for t in readers}
        self.ids, self.counts = {}, {"t": 0, "op": 0, "m": 0}
        self.members = {(): []}  # module box (a scope) -> its nodes, boxes in order of first appearance
        self.edges, self.seen = [], set()

    def unit(self, op):
        """What stands for the op: itself, or the collapsed module it ran in."""
        collapsed = self.depth is not None and len(op.scope) > self.depth
        return op.scope[self.depth] if collapsed else op

    def shown(self, t):
        """Every tensor but those that never leave a collapsed module (the root always shows)."""
        return t is self.root or self.depth is None or len(self.homes[t]) <= self.depth

    def place(self, key, prefix, scope, attrs):
        """The node's id (prefix and a count per kind); the first time, draw it in `scope`'s box."""
        if key not in self.ids:
            self.ids[key] = f"{prefix}{self.counts[prefix]}"
            self.counts[prefix] += 1
            scope = () if self.modules is None else scope[: self.depth]
            for n in range(1, len(scope) + 1):
                self.members.setdefault(scope[:n], [])
            self.members[scope].append((self.ids[key], attrs))
        return self.ids[key]

    def tensor_node(self, t):
        return self.place(t, "t", self.homes[t], {"label": self.tensor_label(t), "shape": "plain"})

    def unit_node(self, op):
        u = self.unit(op)
        if u is op:
            return self.place(op, "op", op.scope, {"label": op_label(op), "fillcolor": OP})
        attrs = {"label": module_label(u, self.module_names), "shape": "box3d", "fillcolor": MODULE}
        return self.place(u, "m", op.scope[: self.depth], attrs)

    def connect(self, tail, head, once):
        """An op reading a tensor twice (x * x) gets two arrows; a collapsed module gets one."""
        if not (once and (tail, head) in self.seen):
            self.seen.add((tail, head))
            self.edges.append((tail, head))

    def add_op(self, op, out):
        """Arrows from the op's inputs to it and from it to its output, drawing the nodes as needed."""
        inputs = [t for t in op.inputs if t is not None and self.shown(t)]
        tails = [self.tensor_node(t) for t in inputs]
        head = self.unit_node(op)
        collapsed = self.unit(op) is not op
        for t, tail in zip(inputs, tails):
            if not (collapsed and t.grad_fn is not None and self.unit(t.grad_fn) is self.unit(op)):
                self.connect(tail, head, once=collapsed)  # (an arrow from a module back into itself says nothing)
        if self.shown(out):
            self.connect(head, self.tensor_node(out), once=collapsed)

    def digraph(self, rankdir):
        """The Digraph: nodes inside nested module boxes, then the arrows in data-flow order."""
        graph = ComputationGraph(format="svg")
        graph.attr(rankdir=rankdir, fontname="Helvetica", nodesep="0.25", ranksep="0.35")
        graph.attr("node", shape="ellipse", style="filled", fontname="Helvetica", fontsize="12")
        graph.attr("edge", arrowsize="0.7")
        self.fill(graph, (), {scope: i for i, scope in enumerate(s for s in self.members if s)})
        for tail, head in self.edges:
            graph.edge(tail, head)
        return graph

    def fill(self, body, scope, boxes):
        """Draw `scope`'s nodes into `body`, then each module box directly inside it."""
        for node_id, attrs in self.members[scope]:
            body.node(node_id, **attrs)
        for inner in (s for s in boxes if len(s) == len(scope) + 1 and s[: len(scope)] == scope):
            with body.subgraph(name=f"cluster_{boxes[inner]}") as box:
                box.attr(label=module_label(inner[-1], self.module_names), style="rounded", color="#9ca3af")
                self.fill(box, inner, boxes)


__all__ = [
    "ComputationGraph", "backward_keeping_every_grad", "draw_graph", "layout_program", "module_label", "op_label",
    "param_text", "render", "shared_scope", "tensor_kind", "tensor_label", "walk",
]  # fmt: skip
