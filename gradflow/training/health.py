"""Training health, per block of the model, measured at the step before each evaluation and logged with it:

    grad_norm      ||g_b||, the gradient of block b's parameters before clipping (and ||g|| of all)
    update_ratio   ||delta w_b|| / ||w_b||, the step's size relative to the weights: about 1e-3 is
                   healthy; far above, the block is thrown around; far below, it has stopped learning
    clip_fraction  the share of the steps since the last evaluation whose ||g|| exceeded grad_clip

so an exploding or dead layer shows before the loss does (loss.png draws them, plot.py).
"""

import math
import re

import numpy as np

from gradflow.training.hooks import Hook


def block_of(name):
    """The part of the model a parameter belongs to, for health metrics: blocks.2.attn.q.weight -> blocks.2."""
    match = re.match(r"(.*?\.\d+)\.", name)
    return match.group(1) if match else name.rsplit(".", 1)[0]


class Health(Hook):
    """Counts clipping at every step; measures the blocks at the step before an evaluation, which logs them."""

    def __init__(self):
        self.clipped = 0  # steps clipped since the last evaluation
        self.measured = None  # {"grad_norm", "blocks"} of the last measured step, until an evaluation logs it
        # while a step is measured: the parameters that learn, their gradients' sums of squares per
        # block, the gradient's norm, and the weights before the update
        self.params = self.grads = self.norm = self.weights = None

    def after_backward(self, trainer):
        c, step = trainer.config, trainer.step + 1
        measured = step % c.eval_interval == 0 or step == c.max_iters
        self.params = trainer.trainable if measured else None
        if measured:
            self.grads = self._block_sums(trainer, [p.grad for p in self.params])

    def before_update(self, trainer, loss, norm):
        self.clipped += trainer.config.grad_clip > 0 and norm > trainer.config.grad_clip
        if self.params is not None:
            self.norm, self.weights = norm, [p.data.copy() for p in self.params]

    def after_update(self, trainer):
        if self.params is None:
            return
        updates = self._block_sums(trainer, [p.data - old for p, old in zip(self.params, self.weights)])
        weights = self._block_sums(trainer, self.weights)
        blocks = {
            block: {"grad_norm": math.sqrt(g), "update_ratio": math.sqrt(updates[block] / weights[block])}
            for block, g in self.grads.items()
            if weights[block] > 0
        }
        self.measured = {"grad_norm": self.norm, "blocks": blocks}
        self.params = self.grads = self.norm = self.weights = None

    def evaluated(self, trainer, metrics):
        if trainer.step > 0 and self.measured is not None:
            steps = trainer.step - (trainer.history[-1]["step"] if trainer.history else 0)
            metrics.update(
                grad_norm=self.measured["grad_norm"],
                clip_fraction=self.clipped / max(steps, 1),
                blocks=self.measured["blocks"],
            )
            self.clipped, self.measured = 0, None

    def _block_sums(self, trainer, arrays):
        """Sums of squares of `arrays` (one per measured parameter) per block; parameters without a gradient skipped."""
        sums = {}
        for p, a in zip(self.params, arrays):
            if p.grad is not None:
                block = block_of(trainer.names[id(p)])
                sums[block] = sums.get(block, 0.0) + float(np.vdot(a, a))
        return sums
