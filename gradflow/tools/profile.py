"""Where the time goes: forward and backward seconds per op, over a block of code.

with gf.profile() as prof:
    loss = model(x, y)[1]
    loss.backward()
print(prof.table())

The profiler is a watcher (engine/hooks.py): the engine calls it as each op's forward and each
node's backward begins and ends, only while a profile block is open.
"""

import contextlib
import time
from collections import defaultdict

from gradflow.engine.hooks import Watcher, watching


class Profiler(Watcher):
    def __init__(self):
        self.seconds = defaultdict(float)  # (op, "forward" | "backward") -> seconds
        self.calls = defaultdict(int)
        self.started = time.perf_counter()
        self.wall = None
        self._begun = []  # perf_counter() at the start of each op or node running now

    def forward_begins(self, node):
        self._begun.append(time.perf_counter())

    def forward_ends(self, node, out):
        self.record(node.name, "forward", time.perf_counter() - self._begun.pop())

    def backward_begins(self, node, grad):
        self._begun.append(time.perf_counter())

    def backward_ends(self, node, grads):
        self.record(node.name, "backward", time.perf_counter() - self._begun.pop())

    def record(self, op, phase, seconds):
        self.seconds[op, phase] += seconds
        self.calls[op, phase] += 1

    def rows(self):
        """(op, calls, forward s, backward s), the most expensive first."""
        ops = {op for op, _ in self.seconds}
        rows = [
            (op, self.calls[op, "forward"], self.seconds[op, "forward"], self.seconds[op, "backward"]) for op in ops
        ]
        return sorted(rows, key=lambda r: -(r[2] + r[3]))

    def table(self, per=1):
        """A text table of milliseconds per op (divided by `per`, e.g. the number of steps profiled)."""
        rows = self.rows()
        in_ops = sum(f + b for _, _, f, b in rows)
        wall = self.wall if self.wall is not None else time.perf_counter() - self.started
        lines = [f"{'op':<14} {'calls':>7} {'forward ms':>11} {'backward ms':>12} {'share':>6}"]
        for op, calls, f, b in rows:
            lines.append(
                f"{op:<14} {calls // per:>7} {1000 * f / per:>11.2f} {1000 * b / per:>12.2f} {(f + b) / wall:>6.1%}"
            )
        outside = wall - in_ops
        lines.append(f"{'(outside ops)':<14} {'':>7} {1000 * outside / per:>24.2f} {outside / wall:>6.1%}")
        lines.append(f"{'total':<14} {'':>7} {1000 * wall / per:>24.2f} {1:>6.0%}")
        return "\n".join(lines)


@contextlib.contextmanager
def profile():
    """Time every op's forward and backward inside the block (the rest is engine and Python overhead)."""
    profiler = Profiler()
    try:
        with watching(profiler):
            yield profiler
    finally:
        profiler.wall = time.perf_counter() - profiler.started
