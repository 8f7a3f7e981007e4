"""The arrays backward needs: what forward saved must still hold the forward pass's values.

backward computes with the arrays forward saved: dL/dW = G^T x needs the x that forward saw. If x
changed in between (an optimizer's step updates the parameters in place), backward would use numbers
the forward pass never saw, and nothing would tell. So, for each op that saves memory of its inputs
or of its output (guard_saved), until its backward has run:

  versions   the node remembers the version of each tensor whose memory it saved (every in-place
             change counts one); backward refuses to run if one went up (check_saved);
  writes     writes into that memory through `tensor.data` are refused while the node lives
             (the tensor's side, below: its .data is then a read-only SavedArray);
  freed      backward frees what forward saved (unless retain_graph=True): a second backward through
             the same nodes is refused with the way out.

A view (reshape, transpose, slice) shares its input's memory, so it shares its guards too (viewed).
"""

import gc
import weakref

import numpy as np

from gradflow.engine.data_array import DataArray, same_layout
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
    versions = []  # (input index, its version): numbers only, which Python's garbage collector need not visit
    for i, (t, a) in enumerate(zip(ctx.inputs, arrays)):
        if a is not None and _shares_memory(saved, a):
            versions.append((i, t.version))
            t._hold(ctx)
    if _shares_memory(saved, out._data):  # softmax and exp save their output
        out._hold(ctx)
        ctx._saved_output = weakref.ref(out)
        versions.append((None, out.version))
    ctx._saved_versions = tuple(versions)


def _shares_memory(saved, a):
    """True if one of the arrays `saved` is array a or a view of its memory."""
    for s in saved:  # noqa: SIM110 (a loop, not any() over a generator: this runs for every op, twice or more)
        if s is a or same_memory(s, a):
            return True
    return False


def check_saved(node):
    """Before node's backward runs: what its forward saved is still there, and unchanged."""
    if node._freed:
        raise RuntimeError(
            f"backward: trying to backward through the graph a second time, but {node.name} freed its "
            "saved arrays after the first; call backward(retain_graph=True) the first time to keep them"
        )
    for i, version in node._saved_versions:
        t = node._saved_output() if i is None else node.inputs[i]  # the output, weakly held (see guard_saved)
        if t is not None and t.version != version:
            role = "output" if i is None else f"input {i}"
            raise RuntimeError(
                f"backward: {node.name}'s saved {role} ({describe(t, node.scope)}) was modified in place "
                f"after the forward pass (version {version}, now {t.version}); backward needs the values the "
                "forward pass used: run the forward pass again after changing them (optimizer.step() "
                "changes every parameter)"
            )


def _role(node, owner):
    """How node saved the memory of `owner`: 'its input i' or 'its output' (the last such, as listed)."""
    role = "it"
    for i, _ in node._saved_versions:
        t = node._saved_output() if i is None else node.inputs[i]
        if t is not None and (t if t._base is None else t._base) is owner:
            role = "its output" if i is None else f"its input {i}"
    return role


# --- the tensor's side: the version of its memory, the nodes that saved it, its guarded .data ----


class SavedMemory:
    """The guards a Tensor carries for its memory (Tensor inherits them; tensor.py holds the rest).

    A view (reshape, transpose, slice; detach of a leaf) keeps in `_base` the tensor whose memory it
    views, and counts and checks everything through that one, so that a change through either shows.
    """

    # class-level defaults, so that making a tensor costs nothing more
    _version = 0  # how many in-place updates its memory has had (see in_place); a view counts its base's
    _base = None  # for a view of another tensor's memory (reshape, transpose, slice, detach): that tensor
    _saved_by = None  # the ops that saved this memory for backward: a weak reference to one's node, or a list

    @property
    def data(self):
        """The numpy array, as a DataArray (the same memory, with PyTorch's in-place methods: add_,
        copy_, normal_, ...). While an op recorded in a live graph keeps it for backward, a read-only
        view of it that refuses to be written into, naming the op (see SavedArray)."""
        return self._data.view(DataArray) if self._holder() is None else SavedArray.of(self)

    @data.setter
    def data(self, value):
        """Replace the array (given as an array or, as PyTorch's `p.data = ...` does, a tensor's values):
        always allowed, since a graph that saved the old array keeps it."""
        value = getattr(value, "_data", value)  # a tensor: its array
        if isinstance(value, DataArray) and same_layout(value, self._data):
            return  # `x.data *= 2` wrote into the array and assigns it back: it stays the array it was
        self._data = np.array(value) if isinstance(value, DataArray) else value  # a copy: never a way in

    @property
    def version(self):
        """How many times this tensor's memory has been updated in place (by in_place()); a view
        counts the updates of the tensor it views."""
        return (self if self._base is None else self._base)._version

    def in_place(self):
        """The array itself, for an update that writes into it (an optimizer's step). The version goes
        up by one, so backward through a graph that saved the old values refuses to use the new ones."""
        (self if self._base is None else self._base)._version += 1
        return self._data

    def __getstate__(self):
        """For pickling and deep copies: a copy has memory of its own, which no graph here holds."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_saved_by", "_base")}

    def _holder(self):
        """A live, not yet backwarded op's node that saved this memory, or None."""
        owner = self if self._base is None else self._base
        held = owner._saved_by
        if type(held) is weakref.ref:  # one node saved it (see _hold)
            node = held()
            return node if node is not None and not node._freed else None
        while held:  # the newest first; entries of freed or deleted graphs are dropped on the way
            node = held[-1]()
            if node is not None and not node._freed:
                return node
            held.pop()
        return None

    def _hold(self, node):
        """Record that `node` saved this memory (as an input, or as its output: node._saved_versions says).

        The entries of finished graphs are forgotten (a parameter is saved at every step) when the list
        reaches a power of two: a weight that one graph uses n times (a loop over the characters of a
        word) then costs O(n) in all, not O(n^2) as when the list was filtered at every entry past 8.
        Memory that one node saved (most of it: an op's output, read by the next op) keeps that node's
        reference alone, without a list: one object fewer per op for Python's garbage collector to visit."""
        owner = self if self._base is None else self._base
        held = owner._saved_by
        node = weakref.ref(node)  # (one weak reference per node, shared by its inputs' lists)
        if held is None:
            owner._saved_by = node
        elif type(held) is weakref.ref:
            owner._saved_by = [held, node]
        else:
            if len(held) >= 8 and len(held) & (len(held) - 1) == 0:  # at 8, 16, 32, ... entries (see above)
                held[:] = [r for r in held if (n := r()) is not None and not n._freed]
            held.append(node)


class SavedArray(DataArray):
    """What `tensor.data` hands out while an op in a live graph keeps the tensor's memory for backward.

    Backward computes with the arrays forward saved: dL/dW = G^T x needs the x that forward saw.
    Writing into x between forward and backward (x.data[...] = v, x.data *= 2) would make backward
    use numbers the forward pass never saw, and nothing would tell. This read-only view refuses such
    writes with one line naming the op and the tensor; reading works as with any array and gives
    plain arrays. Its copy is an ordinary array, and assigning a new array (x.data = v) is always
    allowed: the graph keeps the old one. The tensor's own array is never made read-only, so the
    optimizer still updates it in place (in_place() counts that update; backward then refuses).
    """

    _guard = None  # a weak reference to the tensor (a view kept by the user must not keep a graph alive)

    @classmethod
    def of(cls, tensor):
        view = tensor._data.view(cls)
        view.flags.writeable = False  # this view's flag only: writes that bypass the checks below fail too
        view._guard = weakref.ref(tensor)
        return view

    def __array_finalize__(self, obj):
        # a view of it (a slice, a transpose) is guarded too; a copy, in its own memory, is not
        self._guard = getattr(obj, "_guard", None) if self.base is not None else None

    def _check_write(self):
        """Refuse to write while an op in a live graph holds the memory; once none does, allow it."""
        if self._guard is None:  # a copy, or a view already let go
            return
        tensor = self._guard()
        if tensor is not None and tensor._holder() is not None:
            # a graph that nothing reaches may only be waiting for Python's cycle collector (x[i] += v reads
            # x before changing it, so the graph of that change holds a cycle: engine/inplace.py)
            gc.collect()
        node = None if tensor is None else tensor._holder()
        if node is None:  # backward has run, or the graph was deleted: the memory is free again
            self._guard = None
            if self.base.flags.writeable:  # (memory read-only on purpose stays so)
                self.flags.writeable = True
            return
        role = _role(node, tensor if tensor._base is None else tensor._base)
        raise RuntimeError(
            f"tensor.data: {describe(tensor, node.scope)} cannot be written in place: {node.name} saved "
            f"it ({role}) for a backward pass that has not run; write after backward() (or once the graph is "
            "deleted), write into a copy, or assign a new array (x.data = ...)"
        )

    def __setitem__(self, index, value):
        self._check_write()
        super().__setitem__(index, value)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        # in-place operators (x.data *= 2) are ufuncs writing into out=; ufunc.at writes into its first input
        for a in (out or ()) + (inputs[:1] if method == "at" else ()):
            if isinstance(a, SavedArray):
                a._check_write()
        return super().__array_ufunc__(ufunc, method, *inputs, out=out, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func in _WRITE_INTO_FIRST and args and isinstance(args[0], SavedArray):
            args[0]._check_write()
        return super().__array_function__(func, types, args, kwargs)

    def fill(self, value):
        self._check_write()
        super().fill(value)

    def put(self, *args, **kwargs):
        self._check_write()
        super().put(*args, **kwargs)

    def sort(self, *args, **kwargs):
        self._check_write()
        super().sort(*args, **kwargs)

    def partition(self, *args, **kwargs):
        self._check_write()
        super().partition(*args, **kwargs)


_WRITE_INTO_FIRST = {np.copyto, np.place, np.putmask, np.put, np.put_along_axis, np.fill_diagonal}
