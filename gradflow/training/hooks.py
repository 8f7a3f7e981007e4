"""The Trainer's hooks: what watches a run attaches at named points of each step, outside its lines.

    with hook.starting(trainer):                     around a fresh run's check of out_dir
    hook.started(trainer)                            once, as the first step is about to be taken
    with hook.during_step(trainer):                  around each train_step
        forward; backward
        hook.after_backward(trainer)                 grad L(theta) is in .grad, not yet clipped
        clip
        hook.before_update(trainer, loss, norm)      the weights have not changed yet
        optimizer.step()
        hook.after_update(trainer)                   trainer.step counts the update
    hook.evaluated(trainer, metrics)                 an evaluation's record, before it is logged
    hook.finished(trainer)                           once, as fit() ends, also on an error

The Trainer calls its hooks in order (trainer.hooks, a list you may add to). Its own:
StopOnDivergence (divergence.py), Health (health.py), AnomalyMode and KeepFreedMemory below,
SharedCores (shared_cores.py: one BLAS thread while other work keeps the cores busy) and Snapshots
(snapshots.py: the weights at each evaluation, for the explorer's training scrub); over MPI, OnRanks
(mpi.py: every rank runs the same loop, each on a shard of the batch).
"""

import contextlib

from gradflow.engine.anomaly import detect_anomaly
from gradflow.fast.memory import tune_malloc


class Hook:
    """One thing that watches a run; each point does nothing unless a subclass says otherwise."""

    def starting(self, trainer):
        return contextlib.nullcontext()

    def started(self, trainer):
        pass

    def during_step(self, trainer):
        return contextlib.nullcontext()

    def after_backward(self, trainer):
        pass

    def before_update(self, trainer, loss, norm):
        """loss: the batch's loss; norm: ||grad L(theta)|| before clipping (both floats)."""

    def after_update(self, trainer):
        pass

    def evaluated(self, trainer, metrics):
        """metrics: the record about to be logged ({"step", "train_loss", ...}); a hook may add to it."""

    def finished(self, trainer):
        pass


class Hooks(list):
    """The hooks of a Trainer, each called at every point in the order of the list."""

    def starting(self, trainer):
        return self._entered("starting", trainer)

    def started(self, trainer):
        for hook in self:
            hook.started(trainer)

    def during_step(self, trainer):
        return self._entered("during_step", trainer)

    def after_backward(self, trainer):
        for hook in self:
            hook.after_backward(trainer)

    def before_update(self, trainer, loss, norm):
        for hook in self:
            hook.before_update(trainer, loss, norm)

    def after_update(self, trainer):
        for hook in self:
            hook.after_update(trainer)

    def evaluated(self, trainer, metrics):
        for hook in self:
            hook.evaluated(trainer, metrics)

    def finished(self, trainer):
        for hook in self:
            hook.finished(trainer)

    def _entered(self, point, trainer):
        """Every hook's context at a point, entered in order (and left in reverse)."""
        stack = contextlib.ExitStack()
        for hook in self:
            stack.enter_context(getattr(hook, point)(trainer))
        return stack


class AnomalyMode(Hook):
    """With trainer.config.detect_anomaly, every op of each step, forward and backward, is checked for
    NaN and inf, and the first to make one is named (gradflow/engine/anomaly.py)."""

    def during_step(self, trainer):
        return detect_anomaly() if trainer.config.detect_anomaly else contextlib.nullcontext()


class KeepFreedMemory(Hook):
    """malloc keeps freed memory for the next step's arrays of the same sizes, for the rest of the process
    (gradflow/fast/memory.py): a training run is where that pays, and importing gradflow leaves malloc alone."""

    def started(self, trainer):
        tune_malloc()
