"""Optional compiled kernels: numba (the ``fast`` extra, ``pip install specsim[fast]``).

A few O(V) loops (the bucketed multi-draft bound, the fused passes of a lossy certificate) are
faster as one compiled pass over the row than as a chain of numpy calls, each of which reads and
writes the whole row.  Each such loop has a numpy implementation too: it is the reference the
compiled one is tested against, and the path taken when numba is absent or switched off.

- :func:`enabled` says whether compiled kernels are used: numba importable and neither the
  environment variable ``SPECSIM_JIT=0`` nor :func:`disabled` says otherwise.
- :func:`njit` is ``numba.njit(cache=True, nogil=True, error_model="numpy")``: compiled on first call, cached on
  disk for later processes.  It imports numba, so the modules that hold kernels
  (``lp/_bound_kernels.py``, ...) are imported only inside the fast paths: ``import numba`` alone
  takes ~0.2 s, which the CLI's start-up does not pay.

Kernels are compiled without ``fastmath``: IEEE semantics (no reassociation, no flushed
subnormals) are what the exactness tests rely on.  ``error_model="numpy"``: a float division by
zero gives inf or NaN as in numpy (the reference) instead of raising, which drops the check
Python's semantics put before every division and lets loops with divisions vectorise (a plain
``t[i] = p[i] / q[i]`` loop compiled to scalar divisions before).  numba's disk cache does not
key on these options: after changing them, delete the ``*.nbi``/``*.nbc`` files under
``__pycache__`` (a kernel whose source is unchanged would load the old build).

>>> enabled() == (_have_numba() and os.environ.get("SPECSIM_JIT", "1") != "0")
True
>>> with disabled():
...     enabled()
False
"""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
import threading
from contextlib import contextmanager

__all__ = ["enabled", "disabled", "njit", "work_block"]

_switched_off = os.environ.get("SPECSIM_JIT", "1").strip() == "0"


@functools.lru_cache(maxsize=1)
def _have_numba() -> bool:
    return importlib.util.find_spec("numba") is not None


def enabled() -> bool:
    """True when compiled kernels are used (numba installed, not switched off)."""
    return not _switched_off and _have_numba()


@contextmanager
def disabled():
    """Within the block the numpy reference paths are taken (tests and benchmarks compare the two)."""
    global _switched_off
    before, _switched_off = _switched_off, True
    try:
        yield
    finally:
        _switched_off = before


def njit(fn):
    """``fn`` compiled by numba on its first call (cached on disk when it lives in a file)."""
    import numba
    return numba.njit(cache=os.path.isfile(fn.__code__.co_filename), nogil=True, error_model="numpy")(fn)


_WORK = threading.local()


def work_block(name: str, rows: int, cols: int, dtype=float):
    """A (rows, cols) view of a work block kept per thread under ``name``, reused while nothing
    holds a view of it: for the compiled paths' O(V) scratch rows.

    A fresh block per call (megabytes at V = 151,936) is a fresh mapping whose every page faults
    on first touch, as costly as the arithmetic of a pass.  A block is reused only when its
    reference count says no view of it is alive (a result or an object keeping a view pins it),
    so two users never share one.  The block is one column wider than asked, so that the view
    has the same (non-contiguous) layout every time: one compiled signature per kernel."""
    import numpy as np

    blk = getattr(_WORK, name, None)
    # references: _WORK's, blk's and getrefcount's argument; any live view adds one
    if blk is None or blk.shape[1] < cols + 1 or blk.shape[0] < rows or blk.dtype != dtype \
            or sys.getrefcount(blk) > 3:
        blk = np.empty((rows, cols + 1), dtype=dtype)
        setattr(_WORK, name, blk)
    return blk[:rows, :cols]
