"""A tensor's shape as PyTorch gives it: torch.Size, a tuple of ints that prints as `torch.Size([5, 27])`.

Size is a tuple: it unpacks (`B, T = x.shape`), indexes, compares equal to the tuple of the same ints,
hashes as that tuple does, and numpy takes it wherever it takes a shape (`np.zeros(x.shape)`). As in
PyTorch, a slice of it is a Size (`x.shape[1:]`), so is the sum with a tuple (`x.shape[:-1] + (n,)`),
and `numel()` is the product of the sizes.

How it prints: `print(x.shape)`, `str`, `repr` and a Size inside a printed list or tuple read
`torch.Size([5, 27])`, as in PyTorch. Inside an f-string or format() it reads `(5, 27)`: gradflow's own
messages name shapes that way (`matmul: (3, 4) @ (5, 2): inner sizes 4 and 5 differ`), the same for
tensors and numpy arrays, so a message reads the same whatever the shape came from. This is the one
place where a Size and PyTorch's differ (docs/pytorch.md).
"""

import math


class Size(tuple):
    """The sizes of a tensor's axes, (5, 27), printed as torch.Size([5, 27])."""

    __slots__ = ()

    def __repr__(self):
        return f"torch.Size({list(self)})"

    __str__ = __repr__

    def __format__(self, spec):
        return format(tuple.__repr__(self), spec)  # (5, 27): see the module's docstring

    def __getitem__(self, index):
        item = tuple.__getitem__(self, index)
        return Size(item) if isinstance(index, slice) else item

    def __add__(self, other):
        return Size(tuple.__add__(self, other))

    def numel(self):
        """How many elements a tensor of this shape holds: the product of the sizes (1 for ())."""
        return math.prod(self)
