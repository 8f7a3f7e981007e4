"""The explorer's training scrub: a run's metrics and weight snapshots, step by step.

    training = {"metrics": [records of metrics.jsonl], "snapshots": {step: {name: array}}, "weight": name}

The page's slider moves over the steps the metrics name; at each it shows the loss so far, each
block's gradient norm and update size (||delta w|| / ||w||) from the evaluation at or before it, and
the chosen weight matrix in the snapshot at or before it, with its change since the previous one.
"""

import numpy as np

from gradflow.tools.explore_data import heat, stats


def training_data(training):
    """The scrub's data, checked: metrics as (step, loss) points and evaluations, one matrix per snapshot."""
    if not isinstance(training, dict) or not isinstance(training.get("metrics", []), list):
        raise TypeError("explore: training must be a dict with a list of metrics records")
    records = training.get("metrics", [])
    losses = [[r["step"], r["loss"]] for r in records if isinstance(r.get("loss"), (int, float))]
    evals = [
        {k: r[k] for k in ("step", "train_loss", "val_loss", "grad_norm", "clip_fraction", "blocks") if k in r}
        for r in records
        if "val_loss" in r
    ]
    weight, snapshots = training.get("weight"), training.get("snapshots") or {}
    shots, previous = [], None
    for step in sorted(snapshots):
        if weight not in snapshots[step]:
            raise ValueError(f"explore: the snapshot of step {step} has no parameter {weight!r}")
        w = np.asarray(snapshots[step][weight], dtype=np.float64)
        change = None if previous is None else heat(w - previous)
        shots.append({"step": int(step), "heat": heat(w), "stats": stats(w), "change": change})
        previous = w
    return {"losses": losses, "evals": evals, "weight": weight, "snapshots": shots}
