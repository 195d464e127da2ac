"""glibc's malloc arenas under an address-space limit (NOTE [malloc arenas under a limit]),
and what malloc holds free (NOTE [memory after an address-space error] in api.py).

NOTE [malloc arenas under a limit]
    glibc gives each thread that mallocs an arena of its own, up to 8 per core, and reserves
    64 MiB of address space for each (``/proc/self/maps``: a 64 MiB-aligned mapping, mostly
    ``---p``), used or not. MXNet starts its engine and OpenMP threads at its first operator
    (not at ``import mxnet``), and five of them get an arena that holds ~130 KB: 256 MiB of
    address space reserved for nothing. Under a 2 GiB limit (RLIMIT_AS, ``ulimit -v``) that is
    what a 19,999-level TopDownTreeLSTM chain with gradients lacked: VmPeak 1,905-1,919 MiB in
    the process with every arena, sampled from outside, 1,634 with two; two of six runs ran
    out in ``backward`` (MXNet's bad_alloc). So when gluon_cf is imported under an
    address-space limit, and again when an outermost eager recursive call starts under one,
    it caps glibc's arenas at two (``mallopt(M_ARENA_MAX, 2)``, what ``MALLOC_ARENA_MAX=2``
    in the environment does): threads that malloc from then on share the main arena and one
    other. This is process-wide and stays: under a limit the reserved space is what runs out,
    and threads that already have an arena keep it (so it helps only where no MXNet operator
    ran before gluon_cf's import or the recursion). Not under a limit, or where the user set
    ``MALLOC_ARENA_MAX``, or off glibc (macOS, musl: no ``mallopt``), nothing is changed.
"""
import ctypes
import os
from typing import Optional

MALLOC_ARENAS_UNDER_A_LIMIT = 2
_M_ARENA_MAX = -8             # glibc's malloc.h


def _glibc() -> Optional[ctypes.CDLL]:
    """The process's glibc, or None elsewhere."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        return ctypes.CDLL(None)
    except (AttributeError, ValueError, OSError):
        return None


_capped = False


def cap_arenas() -> bool:
    """Cap glibc's arenas at ``MALLOC_ARENAS_UNDER_A_LIMIT`` (once; the caller has seen an
    address-space limit); whether they are capped (NOTE [malloc arenas under a limit])."""
    global _capped
    if not _capped and "MALLOC_ARENA_MAX" not in os.environ:
        libc = _glibc()
        mallopt = getattr(libc, "mallopt", None)
        if mallopt is not None:
            _capped = mallopt(_M_ARENA_MAX, MALLOC_ARENAS_UNDER_A_LIMIT) == 1
    return _capped


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_mallinfo2 = getattr(_glibc(), "mallinfo2", None)   # glibc 2.33 and later
if _mallinfo2 is not None:
    _mallinfo2.restype = _MallInfo2
    _mallinfo2.argtypes = []


def free_bytes() -> Optional[int]:
    """Bytes free inside the heaps glibc's malloc keeps (its arenas' free chunks and tops), or
    None where that cannot be read. Walks every free chunk: ~5 ms with 70,000 of them
    (NOTE [memory after an address-space error])."""
    return None if _mallinfo2 is None else _mallinfo2().fordblks
