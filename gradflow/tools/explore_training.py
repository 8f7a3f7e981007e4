"""The explorer's training scrub: a run's metrics and weight snapshots, step by step.

    training = {"metrics": [records of metrics.jsonl], "snapshots": {step: {name: array}}, "weight": name,
                "run": the run's name, "source": "out/metrics.jsonl", "lines": [the line of each record],
                "others": [the parameters snapshots hold, when they do not hold `weight`]}  (the last four optional)

The page's slider moves over the steps the metrics and snapshots name; at each it shows the batch loss
and the validation loss of the evaluations so far, each block's gradient norm and update size
(||delta w|| / ||w||) from the evaluation at or before it, and the chosen weight matrix in the snapshot
at or before it, with its change since the previous one. `gradflow train` keeps the snapshots
(gradflow/training/snapshots.py: every learning parameter of a small model, the explored matrix of a
larger one, at each evaluation and every tenth of the run).

A long run logs a record per step: 150,000 of them would make a page of megabytes that draws no
faster than a few thousand, a pixel's width holding dozens of steps. So the curves are thinned to
at most POINTS points: the steps are cut into buckets of consecutive records, and each bucket keeps
its lowest and its highest value, in step order, so that a spike shows as it would at full length.
A loss or a measure that is NaN or inf (a run that diverged) is drawn as a gap (null), and the page
names the file and line it came from.
"""

import math

import numpy as np

from gradflow.tools.explore_data import heat, stats

POINTS = 4000  # per curve: a few per pixel of the page's plots
NOTES = 5  # the places of non-finite values named on the page (the rest counted)
MEASURES = ("train_loss", "val_loss", "grad_norm", "clip_fraction")


def training_data(training):
    """The scrub's data, checked: metrics as (step, loss) points and evaluations, one matrix per snapshot,
    each curve thinned to at most POINTS points, and `notes` naming where a NaN or an inf was found."""
    if not isinstance(training, dict) or not isinstance(training.get("metrics", []), list):
        raise TypeError("explore: training must be a dict with a list of metrics records")
    records = training.get("metrics", [])
    source, lines = training.get("source", "metrics"), training.get("lines") or range(1, len(records) + 1)
    found = []  # (where, what) of every value that is not finite

    def finite(value, where, what):
        """The number, or None (a gap) if it is NaN or inf, remembering where that was."""
        if isinstance(value, float) and not math.isfinite(value):
            found.append(f"{source}, line {where}: {what} is {value}")
            return None
        return value

    losses = [
        [r["step"], finite(r["loss"], line, "loss")]
        for r, line in zip(records, lines)
        if isinstance(r.get("loss"), (int, float))
    ]
    evals = []
    for r, line in zip(records, lines):
        if "val_loss" in r:
            e = {k: finite(r[k], line, k) for k in ("step", *MEASURES) if k in r}
            if isinstance(r.get("blocks"), dict):
                e["blocks"] = {
                    name: {k: finite(v, line, f"{name} {k}") for k, v in measures.items()}
                    for name, measures in r["blocks"].items()
                    if isinstance(measures, dict)
                }
            evals.append(e)
    weight, snapshots = training.get("weight"), training.get("snapshots") or {}
    shots, previous = [], None
    for step in sorted(snapshots):
        if weight not in snapshots[step]:
            raise ValueError(f"explore: the snapshot of step {step} has no parameter {weight!r}")
        w = np.asarray(snapshots[step][weight], dtype=np.float64)
        shot = {"step": int(step), "heat": heat(w), "stats": stats(w), "change": None}
        if previous is not None:  # the change since the snapshot before, and its size ||delta w|| / ||w||
            shot["change"], shot["moved"] = heat(w - previous), _relative(w - previous, previous)
        shots.append(shot)
        previous = w
    notes = found[:NOTES] + ([f"and {len(found) - NOTES} more"] if len(found) > NOTES else [])
    others = training.get("others")
    return {
        "run": training.get("run"),
        "losses": thinned(losses, lambda p: p[1]),
        "evals": thinned(evals, lambda e: e.get("val_loss")),
        "weight": weight,
        "snapshots": shots,
        "held": f"the run's snapshots hold {', '.join(others)}, not {weight}" if others else None,
        "notes": notes,
    }


def _relative(change, w):
    """||change|| / ||w||, with the page's digits (None where w is 0)."""
    size = float(np.linalg.norm(w))
    return float(f"{np.linalg.norm(change) / size:.4g}") if size > 0 else None


def thinned(items, value, most=POINTS):
    """At most about `most` of `items` (in step order): each bucket of consecutive items keeps the one of
    lowest and the one of highest value(item), in their order, and its first gap (value None), if any; the
    first item and the last are kept."""
    if len(items) <= most:
        return items
    size = math.ceil(len(items) / (most // 3))  # up to three kept per bucket
    kept = []
    for start in range(0, len(items), size):
        bucket = range(start, min(start + size, len(items)))
        numbers = [i for i in bucket if value(items[i]) is not None]
        gaps = [i for i in bucket if value(items[i]) is None]
        chosen = set(gaps[:1]) | {0, len(items) - 1} & set(bucket)  # the run's first and last step stay too
        if numbers:
            chosen |= {min(numbers, key=lambda i: value(items[i])), max(numbers, key=lambda i: value(items[i]))}
        kept += [items[i] for i in sorted(chosen)]
    return kept
