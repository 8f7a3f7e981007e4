"""An interactive explorer of a computation: one HTML page that steps through forward and backward.

    import gradflow as gf
    logits, loss = model(ids, targets)
    page = gf.explore(loss, model=model)        # runs backward, keeping every tensor's gradient
    page.write("loss.html")                     # one self-contained file: open it from disk
    page                                        # in Jupyter: shown inline

The page draws the graph as Graphviz lays it out (the module a view shows, its sub-modules as
boxes that open on click); clicking a tensor shows its values and gradient, an op its formula
(its docstring), its constants and the gradient it sends to each input. Step mode runs forward in
data-flow order, then backward in reverse, one op per key press (the arrow keys), lighting the op
and the arrows its gradient travels along; a tensor read by several ops shows each share of its
gradient arriving and the running sum. A fused op (attention, layer_norm, cross_entropy, gelu,
...) opens into the primitive ops it fuses, its reference in engine/ops/composed.py with each step
named, run on the same inputs from the same output gradient, so the numbers are the engine's. With
`tokens`, a grid of every layer's and head's attention weights; with `training`, a slider over a
run's steps.

Everything is computed here, in Python, when the page is built; the page only shows it.
explore_view.py turns the graph into the page's views, explore_page.py lays them out and writes
the HTML, explore_data.py writes an array's numbers.
"""

import html
from pathlib import Path

import numpy as np

from gradflow.engine.files import write_atomically
from gradflow.engine.tensor import Tensor
from gradflow.nn.module import Module
from gradflow.tools.explore_page import page_html
from gradflow.tools.explore_tour import tour
from gradflow.tools.explore_training import training_data
from gradflow.tools.explore_view import Exploration
from gradflow.tools.graph import backward_keeping_every_grad


class Explorer:
    """The page of one computation: `write(path)` saves it, `html` is its text, Jupyter shows it."""

    def __init__(self, text):
        self.html = text

    @property
    def size(self):
        """The page's size in bytes, as written."""
        return len(self.html.encode("utf-8"))

    def write(self, path, force=False):
        """Save the page to `path` (atomically); an existing file is replaced only with force=True."""
        path = Path(path)
        if path.exists() and not force:
            raise FileExistsError(f"explore: {path} exists; pass force=True (--force) to replace it")
        if not path.parent.is_dir():
            raise FileNotFoundError(f"explore: cannot write {path}: there is no directory {path.parent}")
        write_atomically(path, self.html)
        return path

    def _repr_html_(self):
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width: 100%; height: 640px; '
            'border: 1px solid #d1d5db; border-radius: 6px"></iframe>'
        )

    def __repr__(self):
        return f"<Explorer: a page of {self.size:,} bytes; .write(path) saves it>"


def explore(
    root,
    model=None,
    names=None,
    tokens=None,
    training=None,
    backward=True,
    max_decompositions=64,
    title=None,
):
    """An Explorer of everything `root` depends on.

    model: a Module: its parameters and sub-modules get their dotted names, and each module that
        ran becomes a box that opens into its own view.
    names: {tensor: name} for tensors that are not parameters (inputs, intermediate results).
    tokens: the text's tokens (strings), to label the attention maps' axes.
    training: {"metrics": records of a metrics.jsonl, "snapshots": {step: {parameter: array}},
        "weight": the parameter to show}: the training scrub.
    backward: run root.backward() keeping every gradient (root must be one number, its leaves
        without gradients); False shows the gradients the tensors already hold.
    max_decompositions: how many fused ops are opened into primitive ops (each kind at least once).
    """
    if not isinstance(root, Tensor):
        raise TypeError(f"explore: root must be a Tensor, got {type(root).__name__}")
    if model is not None and not isinstance(model, Module):
        raise TypeError(f"explore: model must be an nn.Module, got {type(model).__name__}")
    if tokens is not None and not all(isinstance(t, str) for t in tokens):
        raise TypeError("explore: tokens must be a list of strings")
    if not isinstance(max_decompositions, int) or max_decompositions < 0:
        raise ValueError(f"explore: max_decompositions must be a non-negative int, got {max_decompositions!r}")
    ran = False
    if backward and root.requires_grad:
        with np.errstate(all="ignore"):
            ran = backward_keeping_every_grad(root, "explore", retain_graph=True)
    exploration = Exploration(root, model, names or {}, max_decompositions)
    data = exploration.data(tokens)
    data["tour"] = tour(exploration.views)
    if training is not None:
        data["training"] = training_data(training)
    data["title"] = title or "gradflow explorer"
    if ran:  # free what forward saved, as the backward pass would have without retain_graph
        exploration.release()
    return Explorer(page_html(data, exploration.views))


__all__ = ["Explorer", "explore"]
