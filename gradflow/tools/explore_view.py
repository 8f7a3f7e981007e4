"""The explorer's views of a computation: what each one draws and what clicking its nodes shows.

A view shows the ops that ran directly in one module, and each sub-module that ran as one box
(a view of its own, opened on click); the first view is the innermost module every op ran in.
A tensor appears in the views where it crosses a box's edge, and not in the views above, where it
stays inside one box. A fused op opened into primitive ops is a view too, of a graph of its own.

Gradients: after a backward pass that kept every gradient (autograd.retain_grads), each op's
output holds dL/d(output); running the op's backward on it again gives the share it sends to each
of its inputs, the number that travels along that arrow. A tensor read by n ops receives n shares,
summed in reverse data-flow order, as the engine sums them.
"""

import inspect

import numpy as np

from gradflow.engine.autograd import _as_grad_tuple, _input_grad, retain_grads
from gradflow.engine.ops.attention import allowed_keys, softmax_of_scores
from gradflow.engine.ops.composed import REFERENCES
from gradflow.fast import REPLACES
from gradflow.tools.explore_data import heat, stats, summary
from gradflow.tools.explore_names import NAME, expression, short
from gradflow.tools.explore_page import SMALL
from gradflow.tools.explore_worked import worked
from gradflow.tools.graph import KINDS, op_label, param_text, shared_scope, tensor_kind, walk

PLAIN_OF = {fast: plain for plain, fast in REPLACES.items()}
WORKED_NAME = 16  # characters of a name in a worked element's lines, which repeat it
REARRANGES = ("reshape", "permute")  # the same numbers in another shape: named by what reads them


def brief(a, mark=None):
    """A share of a gradient as the page shows it: every number if few, else a heat map and the statistics;
    `mark`, a worked element: its place in the heat map and its value."""
    if a is None:
        return None
    if a.size <= 64:
        return summary(a)
    shown = {"shape": list(a.shape), "stats": stats(a), "heat": heat(a, mark)}
    if mark is not None:
        shown["marked"] = {"at": list(mark), "value": float(f"{a[tuple(mark)]:.6g}")}
    return shown


def _within(scope, prefix):
    return len(scope) >= len(prefix) and all(a is b for a, b in zip(scope, prefix))


def _formula(op):
    """The docstring of the plain op (the fast tier's kernels point to it) and, for a fast kernel, its note."""
    plain = PLAIN_OF.get(type(op), type(op))
    fast = None if plain is type(op) else inspect.getdoc(type(op)).split("\n\n")[0]
    return inspect.getdoc(plain) or op.name, fast


def _input_names(op):
    """The names forward gives its inputs (q, k, v; x, w, b), from its signature."""
    names = list(inspect.signature(type(op).forward).parameters)[1:]
    return [names[i] if i < len(names) and not names[i].startswith("*") else f"x{i}" for i in range(len(op.inputs))]


class Exploration:
    """Every view of one computation and of the fused ops opened in it, with the page's data."""

    def __init__(self, root, model, names, max_decompositions):
        self.root, self.budget = root, max_decompositions
        self.module_names = {} if model is None else {id(m): n for n, m in model.named_modules()}
        self.names = {} if model is None else {id(p): n for n, p in model.named_parameters()}
        self.names |= {id(t): n for t, n in names.items()}
        self.views, self.graphs, self.counts = [], [], {"t": 0, "o": 0, "m": 0}
        self.ids = {}  # id(object) -> its node id, the same in every view
        self.keep = []  # the objects named in self.ids, so that no id is reused
        self.main = self.graph(root, "graph", None)

    def node_id(self, obj, prefix):
        if id(obj) not in self.ids:
            self.ids[id(obj)] = f"{prefix}{self.counts[prefix]}"
            self.counts[prefix] += 1
            self.keep.append(obj)
        return self.ids[id(obj)]

    # --- one graph: the computation, or a fused op's primitive ops --------------------------------

    def graph(self, root, title, parent):
        """Walk the graph of `root`, work out every arrow's gradient, and add its views; the first view's index."""
        ops, readers, output = walk(root)
        g = _Graph(root, ops, readers, output)
        self.graphs.append(g)
        g.shares = self.shares(ops, output)
        g.arrivals = self.arrivals(g)
        fused = [op for op in ops if op.name in REFERENCES]
        kinds = {}
        for op in fused:
            kinds.setdefault(op.name, op)
        chosen = list(kinds.values()) + [op for op in fused if op not in kinds.values()]
        g.decompose = set(chosen[: self.budget])
        self.budget -= len(g.decompose)
        g.infos = {}
        for op in ops:  # in data-flow order, so that naming a tensor never recurses far for its inputs' names
            self.title(g, output[op])
        # a module that handed on two tensors (one rope module turning q, then k) cannot name both "rope out"
        g.twice = {m for m, n in g.module_outs.items() if n > 1}
        if g.twice:
            g.titles, g.module_outs = {}, {}
            for op in ops:
                self.title(g, output[op])
        top = shared_scope([op.scope for op in ops]) if ops else ()
        return self.view(g, top, title, parent)

    def shares(self, ops, output):
        """{(op, i): the gradient op sends to its input i}, from each op's backward run once more."""
        shares = {}
        for op in ops:
            g = output[op].grad
            if op._freed or g is None:
                continue
            g = g.data
            grads = _as_grad_tuple(op, type(op).backward(op, g))
            for i, (t, gi) in enumerate(zip(op.inputs, grads)):
                if t is not None and gi is not None and op.needs_input_grad[i]:
                    shares[op, i] = _input_grad(op, i, t, gi)
        return shares

    def arrivals(self, g):
        """For each tensor read more than once: (op, its share, the sum so far) in the order backward adds them."""
        arrivals, sums = {}, {}
        for op in reversed(g.ops):
            for i, t in enumerate(op.inputs):
                if (op, i) in g.shares and len(g.readers[t]) > 1:
                    share = g.shares[op, i]
                    sums[id(t)] = share.copy() if id(t) not in sums else sums[id(t)] + share
                    arrivals.setdefault(id(t), []).append([self.node_id(op, "o"), brief(share), brief(sums[id(t)])])
        return arrivals

    # --- one view: the ops run directly in one module, its sub-modules as boxes ----------------------

    def view(self, g, scope, title, parent):
        index = len(self.views)
        v = {"title": title, "parent": parent, "nodes": {}, "edges": [], "steps": [], "main": g is self.graphs[0]}
        self.views.append(v)
        depth = len(scope)
        ops = [op for op in g.ops if _within(op.scope, scope)]

        def unit(op):
            return op if len(op.scope) == depth else op.scope[depth]

        def shown(t):
            home = g.home(t)
            return t is g.root or not (len(home) > depth and _within(home, scope))

        edges, units, boxes = [], [], {}
        for op in ops:
            u = unit(op)
            if u is not op:
                boxes.setdefault(u, []).append(op)
            uid = self.unit_node(g, u, op, index, scope, units)
            for t in op.inputs:
                if t is not None and shown(t):
                    if u is not op and t.grad_fn is not None and _within(t.grad_fn.scope, op.scope[: depth + 1]):
                        continue  # an arrow from a box back into itself says nothing
                    edges.append((self.tensor_node(g, t, v), uid, u is not op))
            out = g.output[op]
            if shown(out):
                edges.append((uid, self.tensor_node(g, out, v), u is not op))
        if not ops:
            self.tensor_node(g, g.root, v)
        seen = set()
        for tail, head, once in edges:
            if once and (tail, head) in seen:
                continue
            seen.add((tail, head))
            v["edges"].append([f"e{len(v['edges'])}", tail, head])
        v["steps"] = units
        for u, inside in boxes.items():
            v["nodes"][self.node_id(u, "m")]["sends"] = self.sends(g, inside, v)
        return index

    def unit_node(self, g, u, op, index, scope, units):
        """The node of an op, or of the sub-module box it ran in; added to view `index` the first time."""
        v = self.views[index]
        if u is op:
            uid = self.node_id(op, "o")
            if uid not in v["nodes"]:
                v["nodes"][uid] = self.op_info(g, op, index)
        else:
            uid = self.node_id(u, "m")
            if uid not in v["nodes"]:
                name = self.module_names.get(id(u)) or type(u).__name__
                v["nodes"][uid] = {"kind": "module", "name": name, "cls": type(u).__name__, "view": None}
                child = scope + (u,)
                v["nodes"][uid]["view"] = self.view(g, child, f"{name} ({type(u).__name__})", index)
        if uid not in units:
            units.append(uid)
        return uid

    def tensor_node(self, g, t, v):
        tid = self.node_id(t, "t")
        if tid not in v["nodes"]:
            v["nodes"][tid] = self.tensor_info(g, t)
        return tid

    def sends(self, g, inside, v):
        """What a collapsed module's backward step sends: to each tensor it reads from outside (drawn in
        view v) and to each of its parameters, the sum of the shares its own ops send (a tensor also read
        outside the box gets the rest from there)."""
        made = {id(g.output[op]) for op in inside}
        sums, order = {}, []
        for op in inside:
            for i, t in enumerate(op.inputs):
                share = g.shares.get((op, i))
                if t is None or share is None or id(t) in made:
                    continue
                if id(t) not in sums:
                    order.append(t)
                sums[id(t)] = share if id(t) not in sums else sums[id(t)] + share
        drawn = {id(t) for t in order if self.ids.get(id(t)) in v["nodes"]}
        return [
            {"to": self.title(g, t), "id": self.ids.get(id(t)) if id(t) in drawn else None, "share": brief(sums[id(t)])}
            for t in sorted(order, key=lambda t: id(t) not in drawn)  # the drawn inputs first, then parameters
        ]

    # --- what a click shows -------------------------------------------------------------------------

    def name(self, t):
        return t.name or self.names.get(id(t), "")

    def title(self, g, t):
        """Its readable name (explore_names.py): given, a parameter's, its module's or the expression that made it."""
        if id(t) not in g.titles:
            home, op = g.home(t), t.grad_fn
            g.titles[id(t)] = self.name(t) or (f"{t.data.item():.4g}" if t.data.size == 1 else "constant")
            if g.titles[id(t)] == "constant" and op is None:  # rope's cos and sin, not two "constant"s
                g.titles[id(t)] = self.read_as(g, t) or "constant"
            if not self.name(t) and op is not None:
                leaves = op.scope[len(home)] if len(op.scope) > len(home) else None
                if id(leaves) in self.module_names and id(leaves) not in g.twice:
                    g.titles[id(t)] = f"{self.module_names[id(leaves)]} out"
                    g.module_outs[id(leaves)] = g.module_outs.get(id(leaves), 0) + 1
                elif id(leaves) in self.module_names:  # named by the module and the named tensor it turned
                    g.titles[id(t)] = f"{self.module_names[id(leaves)].split('.')[-1]}({short(self.source(g, t))})"
                elif op.name in REARRANGES and self.read_as(g, t):
                    g.titles[id(t)] = self.read_as(g, t)
                else:
                    g.titles[id(t)] = expression(op, [None if i is None else self.title(g, i) for i in op.inputs])
        return g.titles[id(t)]

    def source(self, g, t):
        """The nearest tensor with a name of its own (a parameter's, a module's output) t was made from,
        along each op's first input: the q_proj out that a rope turned."""
        for _ in range(16):
            if t.grad_fn is None or not t.grad_fn.inputs or t.grad_fn.inputs[0] is None:
                break
            t = t.grad_fn.inputs[0]
            if NAME.fullmatch(self.title(g, t)):
                break
        return self.title(g, t)

    def read_as(self, g, t):
        """The name its readers' forward gives it (attention's q, k, v; rope's cos, sin), if they agree
        and it says more than x."""
        names = {n for op in g.readers.get(t, []) for u, n in zip(op.inputs, _input_names(op)) if u is t}
        (name,) = names if len(names) == 1 else (None,)
        return name if name and name not in ("x", "a", "b") and not name.startswith("x") else None

    def module_path(self, scope):
        if not scope:
            return ""
        return self.module_names.get(id(scope[-1])) or type(scope[-1]).__name__

    def tensor_info(self, g, t):
        if id(t) in g.infos:
            return g.infos[id(t)]
        kind = tensor_kind(t, g.root)
        info = {
            "kind": "tensor",
            "name": self.name(t),
            "title": self.title(g, t),
            "shape": list(t.shape),
            "dtype": str(t.dtype),
            "tkind": kind,
            "module": self.module_path(g.home(t)),
            "data": summary(t.data),
            "grad": summary(t.grad),
            "made_by": None if t.grad_fn is None else self.node_id(t.grad_fn, "o"),
            "used_by": [self.node_id(op, "o") for op in g.readers.get(t, [])],
            "arrivals": g.arrivals.get(id(t)),
        }
        g.infos[id(t)] = info
        return info

    def op_info(self, g, op, view_index):
        formula, fast = _formula(op)
        worked = self.worked(g, op)
        marks = {item["input"]: item["at"] for item in worked or []}
        params = [p for p in (param_text(k, v) for k, v in op.params.items()) if p is not None]
        arrays = [f"{k}: array of shape {np.shape(v)}" for k, v in op.params.items() if isinstance(v, np.ndarray)]
        info = {
            "kind": "op",
            "name": op.name,
            "doc": formula,
            "fast": fast,
            "params": params + arrays,
            "module": self.module_path(op.scope),
            "input_names": _input_names(op),
            "inputs": [None if t is None else self.node_id(t, "t") for t in op.inputs],
            "output": self.node_id(g.output[op], "t"),
            "shares": [brief(g.shares.get((op, i)), marks.get(i)) for i in range(len(op.inputs))],
            "worked": worked,
            "label": op_label(op, SMALL),
            "fused": op.name in REFERENCES,
            "view": None,
        }
        if op in g.decompose:
            info["view"], info["check"] = self.decomposition(g, op, view_index)
        return info

    def worked(self, g, op):
        """One element of each input's gradient worked through with the numbers (explore_worked.py)."""
        out = g.output[op]
        if out.grad is None:
            return None
        names = [None if t is None else short(self.title(g, t), WORKED_NAME) for t in op.inputs]
        inputs = [None if t is None else t.data for t in op.inputs]
        shares = [g.shares.get((op, i)) for i in range(len(op.inputs))]
        reads = [None if t is None else id(t) for t in op.inputs]  # x * x: one tensor, read twice
        y = short(self.title(g, out), WORKED_NAME)
        return worked(op, names, inputs, out.data, out.grad.data, shares, y, reads, _input_names(op))

    def decomposition(self, g, op, parent):
        """Open a fused op into primitive ops: its reference (engine/ops/composed.py), each step's
        tensor named by the reference, on copies of its inputs, from its output's gradient.

        Returns the view's index and the largest differences from the fused op's numbers."""
        leaves = []
        for i, t in enumerate(op.inputs):
            leaf = None
            if t is not None:  # named as outside, so that one name never means two tensors
                leaf = type(t)(t.data.copy(), requires_grad=op.needs_input_grad[i])
                leaf.name = self.title(g, t)
            leaves.append(leaf)
        with np.errstate(all="ignore"):
            out = REFERENCES[op.name](*leaves, **op.params, step=_named)
            out.name = self.title(g, g.output[op])
            fused_out, grad = g.output[op], g.output[op].grad
            if grad is not None and out.requires_grad:
                with retain_grads():
                    out.backward(grad, retain_graph=True)
        check = {"value": _largest_difference(out.data, fused_out.data)}
        shares = [(leaf.grad, g.shares.get((op, i))) for i, leaf in enumerate(leaves) if leaf is not None]
        if grad is not None:
            check["grad"] = max((_largest_difference(a, b) for a, b in shares if b is not None), default=0.0)
        return self.graph(out, f"{op.name} as primitive ops", parent), check

    # --- attention maps -------------------------------------------------------------------------------

    def attention_maps(self):
        """Each attention op's weights, first sequence of the batch: (layers, heads, Tq, Tk) in thousandths."""
        g = self.graphs[0]
        layers = []
        for op in g.ops:
            if op.name != "attention":
                continue
            q, k = op.inputs[0].data, op.inputs[1].data
            bias = op.inputs[3].data if len(op.inputs) > 3 and op.inputs[3] is not None else None
            p = op.params
            tq, tk = q.shape[-2], k.shape[-2]
            allowed = allowed_keys(p.get("allowed"), p.get("causal", False), tq, tk)
            w = softmax_of_scores(q, k, allowed, p.get("scale"), bias)
            w = w.reshape((q.shape[0] if q.ndim > 2 else 1), -1, tq, tk)[0]
            heads = [np.rint(h * 1000).astype(int).ravel().tolist() for h in w]
            layers.append({"op": self.node_id(op, "o"), "module": self.module_path(op.scope), "heads": heads})
        return layers

    def data(self, tokens):
        """The page's data: views (their nodes' details are written per view), attention maps, tokens."""
        maps = self.attention_maps()
        return {
            "main": self.main,
            "attention": {"layers": maps, "tokens": tokens},
            "kinds": {k: list(v) for k, v in KINDS.items()},
        }

    def release(self):
        """Free what forward saved in the computation's graph, as backward does without retain_graph."""
        for op in self.graphs[0].ops:
            if not op._freed:
                op._release()


def _named(name, t):
    """A reference's step: its tensor takes the step's name, which the view shows."""
    t.name = name
    return t


def _largest_difference(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    same_inf = (a == b) | (np.isnan(a) & np.isnan(b))
    worst = float(np.abs(a - b)[both].max()) if both.any() else 0.0
    return float(f"{worst:.3g}") if (both | same_inf).all() else "NaN or inf in one only"


class _Graph:
    """One walked graph: its ops in data-flow order, the ops reading each tensor, each op's output."""

    def __init__(self, root, ops, readers, output):
        self.root, self.ops, self.readers, self.output = root, ops, readers, output
        self.homes, self.titles = {}, {}
        self.module_outs, self.twice = {}, set()  # {id(module): tensors named "module out"}, those named twice

    def home(self, t):
        """The innermost module every op touching t ran in (the op that made it and those reading it)."""
        if id(t) not in self.homes:
            scopes = [op.scope for op in self.readers.get(t, [])]
            if t.grad_fn is not None:
                scopes.append(t.grad_fn.scope)
            self.homes[id(t)] = shared_scope(scopes) if scopes else ()
        return self.homes[id(t)]
