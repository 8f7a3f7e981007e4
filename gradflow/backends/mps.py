"""torch.backends.mps: Apple's Metal GPU, which gradflow does not use (its one device is the CPU)."""


def is_available():
    """False: gradflow computes on the CPU."""
    return False


def is_built():
    """False: gradflow is not built with Metal."""
    return False
