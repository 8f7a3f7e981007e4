"""gradflow's one device, the CPU: numpy computes there, so `device=` can only say "cpu".

PyTorch programs name a device everywhere (`torch.zeros(3, device=device)`, `x.to(device)`,
`torch.device("cpu")`), and a program meant for a GPU picks "cpu" where none is found. So every
factory and `to()` take `device=`: "cpu", "cpu:0" and `gf.device("cpu")` change nothing, and any
other device (cuda, mps, ...) is refused in one line naming the op and the device, rather than
computing somewhere else than the program asked.
"""


class device:
    """A device, as PyTorch's torch.device: only the CPU here. device("cpu"), device("cpu:0"),
    device("cpu", 0) and device(other_device) are the same device; str() of it is "cpu"."""

    def __init__(self, type, index=None):
        name = str(type) if index is None else f"{type}:{index}"
        on_cpu("device", name)
        self.type, self.index = "cpu", None

    def __str__(self):
        return "cpu"

    def __repr__(self):
        return "device(type='cpu')"

    def __eq__(self, other):
        return isinstance(other, device) or (isinstance(other, str) and other in ("cpu", "cpu:0"))

    def __hash__(self):
        return hash("cpu")


def on_cpu(op, where):
    """Check that `where` (a device=, a string, a gf.device, or None for "not said") is the CPU, the
    one device gradflow computes on; anything else is refused in one line naming op and device."""
    if where is None or isinstance(where, device) or str(where) in ("cpu", "cpu:0"):
        return
    raise ValueError(f"{op}: gradflow runs on numpy on the CPU; there is no device {str(where)!r}")


CPU = device("cpu")
