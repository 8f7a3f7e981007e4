"""Keep freed memory for reuse, instead of handing it back to the operating system after every op.
Opt-in: importing gradflow leaves malloc alone; the Trainer (its hook KeepFreedMemory, training/hooks.py)
and the benchmarks call tune_malloc().

Why: a training step creates and frees hundreds of arrays of the same few sizes (a transformer's
activations and their gradients, a megabyte or more each). By default glibc's malloc serves
every request above 128 KiB (a threshold it raises as it goes) with a fresh mmap, and gives freed
memory at the top of its heap back to the system; the next array of that size then takes one
page fault per 4 KiB page when numpy first writes to it. On the baby GPT that was over 4,000
page faults per step, about 10 ms of a 75 ms step spent in the kernel, in no op's code.

With both thresholds raised, freed arrays stay in malloc's heap and the next array of that size
reuses them without a fault. Peak memory is unchanged: the same arrays are alive at the peak; the
process just keeps the high-water mark instead of returning it between steps. Arrays larger than
MMAP_ABOVE (up to glibc's own 32 MiB limit) still get their own mmap, returned when freed.

It is a setting of the C library for the whole process (a notebook's kernel included, which is
why importing gradflow does not make it); on a system without glibc (macOS, Windows, musl) it
does nothing.
"""

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers, from glibc's malloc.h
MMAP_ABOVE = 32 * 1024 * 1024  # arrays at least this large still get (and return) their own mmap
TRIM_ABOVE = 256 * 1024 * 1024  # free memory at the heap's top is returned beyond this much


def tune_malloc():
    """Ask glibc's malloc to keep freed memory for reuse, for the rest of the process; True if it
    agreed, False where there is no glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_ABOVE)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_ABOVE))
