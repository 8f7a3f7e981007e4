"""A SummaryWriter with PyTorch's add_scalar, writing JSON lines a learner can read and plot, not TensorBoard's files.

    writer = SummaryWriter(log_dir="out")            # out/scalars.jsonl
    writer.add_scalar("Loss/train", loss, step)      # {"tag": "Loss/train", "value": 2.31, "step": 10, "time": ...}

makemore and its kind log their losses this way. TensorBoard's own format (protocol buffers in
event files) would need TensorBoard to read it; one JSON object per line reads with any tool:

    records = [json.loads(line) for line in open("out/scalars.jsonl")]

Only scalars are recorded: add_scalar and add_scalars; every other add_* (images, histograms,
graphs, ...) is refused in one line rather than dropped without a word.
"""

import json
import socket
import time
from datetime import datetime
from pathlib import Path

from gradflow.engine.files import opened


class SummaryWriter:
    """Appends each scalar to log_dir/scalars.jsonl (log_dir: runs/<date-time>_<host> by default, as PyTorch's)."""

    def __init__(self, log_dir=None, comment="", **kwargs):
        if log_dir is None:
            log_dir = Path("runs") / f"{datetime.now():%b%d_%H-%M-%S}_{socket.gethostname()}{comment}"
        self.log_dir = str(log_dir)
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(log_dir) / "scalars.jsonl"
        self._file = None

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, **kwargs):
        """One line: {"tag", "value" (a number or a one-element tensor, as a float), "step", "time"}."""
        if self._file is None:
            self._file = opened(self.path, "a")  # open until close(), as PyTorch's; never through a link
        record = {"tag": tag, "value": float(scalar_value), "step": global_step, "time": walltime or time.time()}
        self._file.write(json.dumps(record) + "\n")

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """One line per entry, tagged main_tag/name."""
        for name, value in tag_scalar_dict.items():
            self.add_scalar(f"{main_tag}/{name}", value, global_step, walltime)

    def flush(self):
        if self._file is not None:
            self._file.flush()

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        if name.startswith("add_"):
            raise AttributeError(
                f"SummaryWriter.{name}: gradflow's writer records scalars only (add_scalar), as JSON lines"
            )
        raise AttributeError(f"'SummaryWriter' object has no attribute {name!r}")
