"""The stop before a divergence: a step whose loss or gradient is not finite ends the run before the
weights change, so the last checkpoint, written at a finite state, stays the one on disk; so does an
evaluation whose estimated loss is not finite. The one line it says names the step, the values, the
parameter with the largest gradient, and the checkpoint kept.
"""

import math

from gradflow.training.hooks import Hook


class TrainingDiverged(FloatingPointError):
    """The loss or a gradient stopped being finite: the run stops before the weights change."""


class StopOnDivergence(Hook):
    """Raises TrainingDiverged where the loss, the gradient's norm or an estimated loss is not finite."""

    def before_update(self, trainer, loss, norm):
        if not (math.isfinite(loss) and math.isfinite(norm)):
            raise TrainingDiverged(_diverged(trainer, loss, norm))

    def evaluated(self, trainer, metrics):
        if not (math.isfinite(metrics["train_loss"]) and math.isfinite(metrics["val_loss"])):
            raise TrainingDiverged(
                f"train: stopped at step {trainer.step}: the estimated loss is {metrics['val_loss']:.4g}; "
                f"{trainer.checkpoint_path()} (step {trainer.saved_step}) is kept"
            )


def _diverged(trainer, loss, norm):
    """The one line that says where a run diverged, and what was kept."""
    worst, worst_norm = None, -1.0
    for name, p in trainer.model.named_parameters():
        if p.grad is not None:
            n = float(p.grad.norm())
            if not math.isfinite(n) or n > worst_norm:
                worst, worst_norm = name, n
                if not math.isfinite(n):
                    break
    kept = (
        f"{trainer.checkpoint_path()} (step {trainer.saved_step}) is kept"
        if trainer.saved_step is not None
        else "no checkpoint was written"
    )
    return (
        f"train: stopped at step {trainer.step + 1}: the loss is {loss:.4g} and the gradient's norm {norm:.4g} "
        f"(largest: {worst}, {worst_norm:.4g}); the weights were not updated and {kept}; "
        "try a lower learning rate, or find the first non-finite op with detect_anomaly"
    )
