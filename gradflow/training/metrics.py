"""A run's log, metrics.jsonl: one JSON record a line, a step's loss and learning rate or an evaluation's
losses and health (the Trainer appends them, rank 0 alone), read back here for the picture, a resumed
run and the explorer.
"""

import warnings
from pathlib import Path

from gradflow.engine import bounded_json


def read_metrics(path, numbered=False):
    """The records of a metrics.jsonl (none if there is no file: a checkpoint copied alone), as (line number,
    record) pairs if `numbered`; a line cut short (a full disk, a kill), holding bytes that are not UTF-8,
    nested too deep or too long to be a record (bounded_json) is dropped with a warning."""
    if not Path(path).exists():
        return []
    records = []
    for number, record in bounded_json.lines(path):
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            warnings.warn(f"{path}: line {number} is not a complete record; dropped", stacklevel=2)
            continue
        records.append((number, record) if numbered else record)
    return records
