"""The arrays backward needs: what forward saved must still hold the forward pass's values.

backward computes with the arrays forward saved: dL/dW = G^T x needs the x that forward saw. If x
changed in between (an optimizer's step updates the parameters in place), backward would use numbers
the forward pass never saw, and nothing would tell. So, for each op that saves memory of its inputs
or of its output (guard_saved), until its backward has run:

  versions   the node remembers the version of each tensor whose memory it saved (every in-place
             change counts one); backward refuses to run if one went up (check_saved);
  writes     writes into that memory through `tensor.data` are refused while the node lives
             (Tensor.data hands out a read-only SavedArray);
  freed      backward frees what forward saved (unless retain_graph=True): a second backward through
             the same nodes is refused with the way out.

A view (reshape, transpose, slice) shares its input's memory, so it shares its guards too (viewed).
"""

import weakref

import numpy as np

from gradflow.engine.naming import describe


def same_memory(s, a):
    """True if array s is array a or a view of a's memory (numpy's .base is the array owning the memory)."""
    return s is a or s.base is a or (a.base is not None and s.base is a.base and np.may_share_memory(s, a))


def viewed(out, tensors, arrays):
    """The tensor whose memory `out` views, when it is an input's (None if it is another array's)."""
    for t, a in zip(tensors, arrays):
        if a is not None and same_memory(out, a):
            return t if t._base is None else t._base
    return None


def guard_saved(ctx, arrays, out):
    """Guard the memory forward saved, of inputs or of the output, until backward has used it.

    Each saved input's version is remembered, for backward to compare (an optimizer's in-place
    update raises it), and writes through `.data` are refused while this node lives (Tensor.data).
    A saved output's version is remembered too, through a weak reference: the node must not keep
    its own output alive, and once nothing holds the output nothing can write into it.
    """
    saved = [s for s in ctx._saved if isinstance(s, np.ndarray)]
    versions = []
    for i, (t, a) in enumerate(zip(ctx.inputs, arrays)):
        if a is not None and any(same_memory(s, a) for s in saved):
            versions.append((i, t, t.version))
            t._hold(ctx, i)
    if any(same_memory(s, out._data) for s in saved):  # softmax and exp save their output
        out._hold(ctx, None)
        versions.append((None, weakref.ref(out), out.version))
    ctx._saved_versions = tuple(versions)


def check_saved(node):
    """Before node's backward runs: what its forward saved is still there, and unchanged."""
    if node._freed:
        raise RuntimeError(
            f"backward: trying to backward through the graph a second time, but {node.name} freed its "
            "saved arrays after the first; call backward(retain_graph=True) the first time to keep them"
        )
    for i, t, version in node._saved_versions:
        t = t() if i is None else t  # the output, weakly held (see guard_saved)
        if t is not None and t.version != version:
            role = "output" if i is None else f"input {i}"
            raise RuntimeError(
                f"backward: {node.name}'s saved {role} ({describe(t, node.scope)}) was modified in place "
                f"after the forward pass (version {version}, now {t.version}); backward needs the values the "
                "forward pass used: run the forward pass again after changing them (optimizer.step() "
                "changes every parameter)"
            )
