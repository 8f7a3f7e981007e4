"""A one-line progress bar: step, bar, percentage, the caller's fields, rate and time left."""

import sys
import time


def _duration(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    """Redraws one line in place on a terminal; elsewhere (logs, CI) prints a line every `every` steps."""

    def __init__(self, total, start=0, unit="it", stream=None, every=None, width=24):
        self.total, self.step, self.unit, self.width = total, start, unit, width
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = every or max(1, total // 20)
        self.started, self.first = time.perf_counter(), start

    def update(self, step, **fields):
        """Show progress at `step` (steps done) with fields such as loss=2.31 or tok_s=12000."""
        self.step = step
        if not self.tty and step % self.every and step != self.total:
            return
        elapsed = time.perf_counter() - self.started
        rate = (step - self.first) / elapsed if elapsed > 0 else 0.0
        left = (self.total - step) / rate if rate > 0 else 0.0
        done = int(self.width * step / self.total) if self.total else self.width
        bar = "#" * done + "." * (self.width - done)
        shown = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in fields.items())
        line = f"{step:>{len(str(self.total))}}/{self.total} [{bar}] {100 * step / max(self.total, 1):3.0f}% {shown}"
        line += f" | {rate:.2f} {self.unit}/s | ETA {_duration(left)}"
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        self.stream.flush()

    def write(self, text):
        """Print a message above the bar (the bar is redrawn at the next update)."""
        self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
