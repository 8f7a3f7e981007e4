"""A one-line progress bar (tqdm): step, bar, percentage, rate, time left and the caller's fields.

On a terminal tqdm redraws the line in place. Elsewhere (a log file, CI, a notebook's captured
stderr) redrawing would leave every frame in the output, so the bar draws nothing by itself and
Progress prints tqdm's line once every `every` steps (and at the last step) instead.
"""

import math
import os
import sys

from tqdm import tqdm


def _sized(stream):
    """Whether the terminal reports its size (a pseudo-terminal may say 0x0, and tqdm would then draw nothing)."""
    try:
        return min(os.get_terminal_size(stream.fileno())) > 0
    except (AttributeError, OSError, ValueError):
        return False


def _shown(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class Progress:
    """Progress(total, start, unit); update(step, loss=2.31, ...); write(message); close()."""

    def __init__(self, total, start=0, unit="it", stream=None, every=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.total, self.every = total, every or max(1, total // 20)
        sized = self.tty and _sized(self.stream)
        self.bar = tqdm(
            total=total,
            initial=start,
            unit=unit,
            file=self.stream,
            dynamic_ncols=sized,  # follows the window as it is resized
            ncols=100 if self.tty and not sized else None,
            nrows=20 if self.tty and not sized else None,
            # off a terminal tqdm never draws (nothing waits that long); update() prints the lines
            delay=0 if self.tty else math.inf,
        )

    def update(self, step, **fields):
        """Show progress at `step` (steps done) with fields such as loss=2.31 or tok_s=12000."""
        self.bar.set_postfix({k: _shown(v) for k, v in fields.items()}, refresh=False)
        self.bar.update(step - self.bar.n)
        if not self.tty and (step % self.every == 0 or step == self.total):
            self.stream.write(f"{self.bar}\n")
            self.stream.flush()

    def write(self, text):
        """Print a message above the bar (on a terminal the bar is drawn again below it)."""
        if self.tty:
            self.bar.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self):
        self.bar.close()
