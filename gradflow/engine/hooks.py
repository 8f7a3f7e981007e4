"""The engine's one extension point: watchers, the tools that see every op run and every gradient pass.

A tool that looks at the computation without changing what it computes is a Watcher: gf.profile
times each op, gf.detect_anomaly checks each output and gradient, gf.autograd.retain_grads keeps
every gradient, module_scope tells each op which module ran it (for drawings and error messages).
A tool is on while it is in `watchers`. Function.apply and backward call the functions below once
per op and once per node, and only when the list is not empty: with no tool on, watching costs one
`if watchers:` per op.

    an op            forward_begins(node)          the op's forward      forward_ends(node, out)
    backward(root)   walk_begins(root, grad, order), then for each node of the order:
                     backward_begins(node, grad)   the node's backward   backward_ends(node, grads)

The watchers begin in the order they were turned on and end in the reverse order, as nested blocks do.
"""


class Watcher:
    """A tool watching the engine: it overrides the moments it needs; the others do nothing."""

    def forward_begins(self, node):
        """An op is about to run; `node` is its ctx (the node it records, if it records one)."""

    def forward_ends(self, node, out):
        """It ran: `out` is its output array (node.inputs are its input tensors, node.params its constants)."""

    def walk_begins(self, root, grad, order):
        """backward(root) starts with dL/d(root) = grad and will visit the nodes in `order`."""

    def backward_begins(self, node, grad):
        """node's backward is about to run with `grad`, dL/d(its output), summed over every use."""

    def backward_ends(self, node, grads):
        """It ran: `grads` holds dL/d(input) for each input, in its shape and dtype (None where none flows)."""


watchers = []  # the tools that are on; changed in place only, since autograd holds this very list


class watching:
    """`with watching(w):` turns the watcher w on for the block (once, when blocks with w nest)."""

    def __init__(self, watcher):
        self.watcher = watcher

    def __enter__(self):
        self.turned_on = self.watcher not in watchers
        if self.turned_on:
            watchers.append(self.watcher)
        return self

    def __exit__(self, *exc):
        if self.turned_on:
            watchers.remove(self.watcher)


def forward(run, node, arrays):
    """run(node, arrays), an op's forward, between the watchers' begins and ends."""
    for w in watchers:
        w.forward_begins(node)
    out = run(node, arrays)
    for w in reversed(watchers):
        w.forward_ends(node, out)
    return out


def walk_begins(root, grad, order):
    for w in watchers:
        w.walk_begins(root, grad, order)


def backward(run, node, grad):
    """run(node, grad), a node's backward, between the watchers' begins and ends."""
    for w in watchers:
        w.backward_begins(node, grad)
    grads = run(node, grad)
    for w in reversed(watchers):
        w.backward_ends(node, grads)
    return grads
