"""Two tiers of kernels, and the one switch that chooses between them for the whole process.

plain  the ops of gradflow/engine/ops, written formula for formula: what a learner reads, and
       steps into with a debugger.
fast   the same ops, except where gradflow/fast has a tuned kernel for one: each of those names
       the plain op it replaces, what it changes, and what that was measured to save.

Both tiers compute the same numbers (tests/test_fast_kernels.py checks every fast kernel against
its plain op, value and gradient). The functional entry points ask for the class to run with
`kernel(ops.Gelu)`: the plain op itself, or its fast replacement. The engine knows nothing of the
fast tier: gradflow/fast sits above it and offers its table of replacements here (gradflow's
__init__ does that), so the engine reads, and runs, on its own.

Fast is the default. GRADFLOW_KERNELS=plain in the environment (read at the first op), or at run
time:

    gf.use_kernels("plain")                 # from now on
    with gf.use_kernels("plain"):           # inside the block only
        loss = model(x, y)
    gf.kernels_in_use()                     # "plain" or "fast"
"""

import os

TIERS = ("plain", "fast")
ENVIRONMENT_VARIABLE = "GRADFLOW_KERNELS"

_tier = None  # None until the first op asks: then the environment decides
_offered = {}  # plain op -> its fast kernel, as the fast tier offered them


def kernel(op):
    """The Function class that runs `op` (a plain op of gradflow.engine.ops) in the tier in use."""
    if _tier is None:
        _choose(_tier_from_environment())
    return _offered.get(op, op) if _tier == "fast" else op


def offer(replacements):
    """The fast tier's table {plain op: fast kernel}, kept by reference (a benchmark may take
    kernels out of it to time their plain ops)."""
    global _offered
    _offered = replacements


def kernels_in_use():
    """The tier the ops run in: "plain" or "fast"."""
    if _tier is None:
        _choose(_tier_from_environment())
    return _tier


class use_kernels:  # lower case: its callers use it as a function, like no_grad
    """Run every op with the "plain" or the "fast" kernels: from now on, or, used as a context
    manager, until the `with` block ends, when the tier in use before comes back."""

    def __init__(self, kernels):
        _check(kernels, "use_kernels")
        self.previous = kernels_in_use()
        _choose(kernels)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _choose(self.previous)


def _check(kernels, who):
    if kernels not in TIERS:
        raise ValueError(f'{who}: kernels must be "plain" or "fast", got {kernels!r}')


def _tier_from_environment():
    value = os.environ.get(ENVIRONMENT_VARIABLE, "") or "fast"
    _check(value, ENVIRONMENT_VARIABLE)
    return value


def _choose(tier):
    global _tier
    _tier = tier
