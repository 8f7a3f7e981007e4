"""torch.backends.cudnn: cuDNN's switches (TensorFloat-32, benchmarking its kernels, determinism).

Remembered as set, without effect: gradflow uses no cuDNN, and its CPU results are deterministic.
"""

allow_tf32 = True
benchmark = False
deterministic = False
enabled = True


def is_available():
    """False: there is no cuDNN here."""
    return False
