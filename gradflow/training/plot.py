"""loss.png, the picture of a run, drawn by Trainer.plot when a run ends (and when it diverges):

    top      each step's batch loss, and the estimated train and validation loss of each evaluation
    middle   per block, the gradient's norm before clipping (health.py); all blocks together in black,
             x where clipping fired since the previous evaluation, the clipping threshold dotted
    bottom   per block, the update's size relative to the weights, ||delta w|| / ||w||

The lower two appear once an evaluation has logged the run's health.
"""

import numpy as np

from gradflow.engine.files import opened, written_atomically


def plot_run(path, records, history, grad_clip):
    """Draw `records` (metrics.jsonl's lines) and `history` (the evaluations' records) to path; returns path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = [(r["step"], r["loss"]) for r in records if "loss" in r]
    health = [h for h in history if "blocks" in h]
    fig, axes = plt.subplots(3 if health else 1, 1, figsize=(7, 9 if health else 4), sharex=True, squeeze=False)
    ax = axes[0, 0]
    if batches:
        ax.plot(*zip(*batches), lw=0.8, alpha=0.5, label="batch loss")
    if history:
        evals = [h["step"] for h in history]
        ax.plot(evals, [h["train_loss"] for h in history], "o-", label="train (estimate)")
        ax.plot(evals, [h["val_loss"] for h in history], "o-", label="validation (estimate)")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.legend()
    if health:
        steps = [h["step"] for h in health]
        for block in health[-1]["blocks"]:
            for row, key in ((1, "grad_norm"), (2, "update_ratio")):
                values = [h["blocks"].get(block, {}).get(key, np.nan) for h in health]
                axes[row, 0].semilogy(steps, values, ".-", lw=1, label=block)
        axes[1, 0].semilogy(steps, [h["grad_norm"] for h in health], "k-", lw=1.5, label="all")
        clipped = [(h["step"], h["grad_norm"]) for h in health if h["clip_fraction"] > 0]
        if clipped:
            axes[1, 0].plot(*zip(*clipped), "kx", ms=8, label="clipped since the last evaluation")
        if grad_clip > 0:
            axes[1, 0].axhline(grad_clip, color="k", ls=":", lw=1, label="clipping threshold")
        axes[1, 0].set_ylabel("gradient norm")
        axes[2, 0].set_ylabel("||update|| / ||weights||")
        axes[1, 0].legend(fontsize=7, ncol=2)
    for ax in axes[:, 0]:
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    with written_atomically(path) as tmp, opened(tmp, "wb") as f:  # never through a link (files.py)
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)
    return path
