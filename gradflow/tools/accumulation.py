"""An opt-in warning for a gradient summed over two backward passes.

backward adds into a leaf's .grad, dL/dw = sum over the passes, so a training loop that forgets
optimizer.zero_grad() steps along the sum of every batch's gradient so far, silently, here as in
PyTorch. Inside the block

    with gf.warn_grad_accumulation():
        for x, y in batches:
            loss = model(x, y)[1]
            loss.backward()
            optimizer.step()

a backward pass about to add into a .grad that still holds a nonzero gradient from an earlier pass
warns, once per tensor, naming it, and says whether the tensor was updated in between (its
version changed: optimizer.step() changes every parameter in place), when the sum mixes gradients
taken at different weights. Summing on purpose, over several micro-batches per step, is the same
pattern without the update: that is why the check is opt-in.

It is a watcher (engine/hooks.py): the engine tells it when each backward walk begins.
"""

import sys
import warnings
import weakref
from pathlib import Path

import numpy as np

from gradflow.engine.hooks import Watcher, watching
from gradflow.engine.naming import describe


class _Accumulation(Watcher):
    def __init__(self):
        self.passed = {}  # id(leaf) -> (weak reference to the leaf, its version at its last backward pass)
        self.warned = set()  # ids of the leaves already named

    def walk_begins(self, root, grad, order):
        leaves = {}  # id -> (leaf, the scope of a node that uses it, to name it by)
        for node in order:
            for t in node.inputs:
                if t is not None and t.grad_fn is None and t.requires_grad:
                    leaves.setdefault(id(t), (t, node.scope))
        for key, (leaf, scope) in leaves.items():
            self._check(leaf, scope)
            self.passed[key] = (weakref.ref(leaf), leaf.version)

    def _check(self, leaf, scope):
        ref, version = self.passed.get(id(leaf), (None, None))
        if ref is None or ref() is not leaf or id(leaf) in self.warned:
            return
        if leaf.grad is not None and np.any(leaf.grad.data):
            self.warned.add(id(leaf))
            between = (
                "it was updated since, so the sum mixes gradients taken at different weights"
                if leaf.version != version
                else "no update came between them"
            )
            warnings.warn(
                f"backward adds to the gradient of {describe(leaf, scope)} left by an earlier backward pass, and "
                f"{between}: call optimizer.zero_grad() before each backward pass, unless you sum gradients on purpose",
                stacklevel=_callers_level(),
            )


def _callers_level():
    """warnings.warn's stacklevel of the innermost frame outside gradflow: the user's loss.backward()."""
    package = str(Path(__file__).resolve().parents[1])
    frame, level = sys._getframe(1), 1
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


class warn_grad_accumulation(watching):
    """Inside the block, warn when backward sums a tensor's gradient over two passes without an update between."""

    def __init__(self):
        super().__init__(_Accumulation())
