"""Two tiers of kernels, and the one switch that chooses between them for the whole process.

plain  the ops of gradflow/engine/ops, written formula for formula: what a learner reads, and
       steps into with a debugger.
fast   the same ops, except where gradflow/fast has a tuned kernel for one: each of those names
       the plain op it replaces, what it changes, and what that was measured to save.

Both tiers compute the same numbers and take the same arguments (tests/test_fast_kernels.py checks
every fast kernel against its plain op, value, gradient and signature). The functional entry
points ask for the class to run with `kernel(ops.Gelu)`: the plain op itself, or its fast
replacement. The engine knows nothing of the fast tier: gradflow/fast sits above it and offers its
table of replacements here (gradflow's __init__ does that), so the engine reads, and runs, on its own.

Who runs which tier:
- The library runs plain unless told otherwise, so that a learner who steps into `F.layer_norm`
  or `x.gelu()` from a script lands on the formula in gradflow/engine/ops.
- What trains and measures (the Trainer, every `gradflow` command, the benchmarks) runs inside
  `fast_unless_chosen()`: fast, unless a tier was chosen.
- A tier is chosen by GRADFLOW_KERNELS=plain|fast in the environment (read at the first op), or
  at run time:

    gf.use_kernels("fast")                  # from now on
    with gf.use_kernels("fast"):            # inside the block only
        loss = model(x, y)
    gf.kernels_in_use()                     # "plain" or "fast"
"""

import os

TIERS = ("plain", "fast")
ENVIRONMENT_VARIABLE = "GRADFLOW_KERNELS"

_tier = None  # None until the first op asks: then the environment decides
_chosen = False  # True once a tier was chosen, by the environment or by use_kernels
_offered = {}  # plain op -> its fast kernel, as the fast tier offered them


def kernel(op):
    """The Function class that runs `op` (a plain op of gradflow.engine.ops) in the tier in use; or,
    for a plain function the fast tier also replaces (an optimizer's step), the function that runs it."""
    if _tier is None:
        _from_environment()
    return _offered.get(op, op) if _tier == "fast" else op


def offer(replacements):
    """The fast tier's table {plain op: fast kernel}, kept by reference (a benchmark may take
    kernels out of it to time their plain ops)."""
    global _offered
    _offered = replacements


def kernels_in_use():
    """The tier the ops run in: "plain" or "fast"."""
    if _tier is None:
        _from_environment()
    return _tier


class use_kernels:  # lower case: its callers use it as a function, like no_grad
    """Run every op with the "plain" or the "fast" kernels: from now on, or, used as a context
    manager, until the `with` block ends, when the tier in use before comes back."""

    def __init__(self, kernels, chosen=True):
        _check(kernels, "use_kernels")
        self.previous, self.was_chosen = kernels_in_use(), _chosen
        _set(kernels, chosen or _chosen)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(self.previous, self.was_chosen)


def fast_unless_chosen():
    """A context manager for what trains and measures: the fast tier inside the block, unless the
    environment or use_kernels chose a tier (that one then stays)."""
    kernels_in_use()
    return use_kernels(_tier if _chosen else "fast", chosen=False)


def _check(kernels, who):
    if kernels not in TIERS:
        raise ValueError(f'{who}: kernels must be "plain" or "fast", got {kernels!r}')


def _from_environment():
    value = os.environ.get(ENVIRONMENT_VARIABLE, "")
    if value:
        _check(value, ENVIRONMENT_VARIABLE)
    _set(value or "plain", bool(value))


def _set(tier, chosen):
    global _tier, _chosen
    _tier, _chosen = tier, chosen
