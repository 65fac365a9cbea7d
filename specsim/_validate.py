"""Boundary checks shared by every public function (internals trust their inputs).

A public function checks its arguments once, here, and raises ``ValueError`` (a bad value) or
``TypeError`` (a bad type) naming the argument and what was expected; the code behind it then
trusts them.  The contract is written out in docs/design.md, "The input contract":

- a probability row may be a list or an array of float16, bfloat16, float32 or float64 (a torch
  tensor is converted through numpy); it is accepted when its entries are finite and >= 0 and
  |sum - 1| <= :func:`sum_tolerance` (dtype, V) = max(1e-8, min(4 V eps(dtype), 1e-2)), and it is
  returned renormalised once, in float64, so nothing downstream sees a row whose sum differs
  from 1 by more than float64 rounding (checked by numpy's ``sum`` and ``min``, see
  :func:`_row_sum`; rows of >= :data:`JIT_MIN_V` entries scaled in one compiled pass when numba
  is installed, :mod:`specsim._validate_kernels`, bit for bit the same result; a caller that
  reads each entry once can take the checked rows and their sums instead, :func:`pair_sums`);
- token ids are Python or numpy integers (not ``bool``, not floats) in 0..V-1;
- numeric parameters are finite numbers in their documented range (:func:`check_real`,
  :func:`check_int`).

>>> import numpy as np
>>> from specsim._validate import as_distribution
>>> row = as_distribution(np.array([0.1, 0.2, 0.7], dtype=np.float32))   # float32: accepted, renormalised
>>> row.dtype, abs(float(row.sum()) - 1) < 1e-15
(dtype('float64'), True)
>>> as_distribution([0.5, 0.6], "p")
Traceback (most recent call last):
...
ValueError: p: entries sum to 1.1, not 1 (tolerance 1e-08)
"""
from __future__ import annotations

import sys

import numpy as np

from specsim import _jit

#: Floor of the row-sum tolerance: what a float64 row may miss 1 by.
SUM_ATOL = 1e-8
#: Ceiling of the row-sum tolerance, whatever the dtype and V (a coarse row summing to 2 is refused).
SUM_ATOL_MAX = 1e-2
#: Machine epsilon of bfloat16 (8 significant bits), which numpy's ``finfo`` does not know.
BFLOAT16_EPS = 2.0 ** -7
#: Rows at least this long are scaled in one compiled pass when numba is installed
#: (:mod:`specsim._validate_kernels`); shorter rows never import numba.
JIT_MIN_V = 4096


def sum_tolerance(eps: float, V: int) -> float:
    """The row-sum tolerance of the input contract: max(1e-8, min(4 V eps, 1e-2)).

    A row of V entries rounded to a format with machine epsilon ``eps`` (and summed in that
    format, as a softmax does) misses 1 by at most about V eps / 2; four times V eps leaves room
    for the producer's own rounding, the floor is the float64 tolerance and the ceiling keeps
    coarse formats at large V from accepting rows that are not distributions.

    Parameters: ``eps`` (machine epsilon of the caller's dtype), ``V`` (row length).

    Returns: the tolerance on |sum - 1|, a ``float``.

    >>> import numpy as np
    >>> from specsim._validate import sum_tolerance
    >>> sum_tolerance(np.finfo(np.float64).eps, 50_000), sum_tolerance(np.finfo(np.float32).eps, 4)
    (1e-08, 1.9073486328125e-06)
    """
    return float(max(SUM_ATOL, min(4.0 * V * float(eps), SUM_ATOL_MAX)))


def _float_array(v, name: str) -> tuple[np.ndarray, float]:
    """``v`` as a float64 array and the machine epsilon of the precision it arrived in."""
    if type(v).__module__.split(".")[0] == "torch":  # a tensor: torch is already imported
        torch = sys.modules["torch"]
        t = v.detach().cpu()
        eps = torch.finfo(t.dtype).eps if t.dtype.is_floating_point else np.finfo(np.float64).eps
        return t.to(torch.float64).numpy(), float(eps)
    try:
        a = np.asarray(v)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: expected an array of probabilities, got {type(v).__name__} ({exc})") from None
    kind = a.dtype.kind
    if kind == "f":
        return a.astype(np.float64, copy=False), float(np.finfo(a.dtype).eps)
    if a.dtype.name == "bfloat16":  # read only off the float path: dtype.name costs microseconds
        return a.astype(np.float64), BFLOAT16_EPS
    if kind in "iu":
        return a.astype(np.float64), float(np.finfo(np.float64).eps)
    if kind == "O":
        try:
            return a.astype(np.float64), float(np.finfo(np.float64).eps)
        except (ValueError, TypeError):
            pass
    raise TypeError(f"{name}: expected real numbers (a list or a float16/bfloat16/float32/float64 array), "
                    f"got {'dtype ' + str(a.dtype) if kind != 'O' else 'non-numeric entries'}")


def _check_row(a: np.ndarray, name: str, atol: float) -> float:
    """``ValueError`` naming the first bad entry of a float64 row; its sum otherwise."""
    if not np.all(np.isfinite(a)):
        bad = int(np.flatnonzero(~np.isfinite(a))[0])
        raise ValueError(f"{name}: non-finite entry {float(a[bad])!r} at token {bad}")
    if np.any(a < 0):
        bad = int(np.flatnonzero(a < 0)[0])
        raise ValueError(f"{name}: negative entry {float(a[bad])!r} at token {bad}")
    s = float(a.sum())
    if abs(s - 1.0) > atol:
        raise ValueError(f"{name}: entries sum to {s!r}, not 1 (tolerance {atol:g})")
    return s


def _row_sum(a: np.ndarray, name: str, atol: float, signs: bool = True):
    """numpy's sum of a valid float64 row (a ``float``), or of each row of a 2-D array (1-D);
    :func:`_check_row`'s error for the first bad row (named ``name[i]`` in 2-D) otherwise.

    Two reductions: a NaN or an infinite entry makes the sum NaN or infinite (they propagate
    through every addition), so a sum within ``atol`` of 1 leaves only the sign to check, and
    ``min`` does that (-0.0 passes; ``signs=False``: left to the caller, see :func:`pair_sums`).
    A row that fails goes through :func:`_check_row`, which names the first bad entry in the
    order it always has (non-finite, negative, sum)."""
    if a.ndim == 1:                 # (Python floats: small-array numpy calls cost microseconds)
        s = float(a.sum())
        ok = abs(s - 1.0) <= atol                         # NaN fails
    else:                           # (each row's sum bit for bit: the same contiguous reduction)
        s = a.sum(axis=1)
        ok = bool((np.abs(s - 1.0) <= atol).all())
    if ok and (not signs or a.min() >= 0.0):
        return s
    if a.ndim == 1:
        return _check_row(a, name, atol)
    return np.array([_check_row(row, f"{name}[{i}]", atol) for i, row in enumerate(a)])


def _row_atol(atol, eps: float, V: int) -> float:
    return sum_tolerance(eps, V) if atol is None else check_real(atol, "atol", 0.0, 1.0)


def _scale(a: np.ndarray, sums, out: np.ndarray | None = None, signs: bool = False) -> tuple[np.ndarray, bool]:
    """``(a / sums + 0.0, ok)``: a checked row over its sum (a ``float``), or the rows of a 2-D
    array over theirs (1-D), as float64: the normalised copy every accepted row becomes.  The
    + 0.0 turns -0.0 into +0.0: a ratio p/q with q = -0.0 would be -inf, sorting first.

    Long, C-contiguous, writeable rows with sums > 0 are scaled in one compiled pass when numba
    is installed (:mod:`specsim._validate_kernels`, bit for bit numpy's result), into ``out``
    (C-contiguous, ``a``'s size; may be ``a``) if given, else a fresh array; otherwise numpy
    divides into a fresh array (a zero sum, accepted only with ``atol`` = 1, gives NaN and inf).
    ``ok``: False if an entry of ``a`` is < 0, which the compiled pass sees as it reads, and
    the numpy path checks (``min``) only when ``signs`` (rows checked without their signs)."""
    if a.shape[-1] >= JIT_MIN_V and a.flags.c_contiguous and a.flags.writeable and _jit.enabled():
        if a.ndim == 1:                      # (Python floats: small-array numpy calls cost microseconds)
            col = np.array([sums]) if sums > 0.0 else None
        else:
            col = sums if (sums > 0.0).all() else None
        if col is not None:
            from . import _validate_kernels
            if out is None or out.size != a.size:
                out = np.empty_like(a)
            ok = _validate_kernels.scale_rows(a.reshape(-1, a.shape[-1]), col, out.reshape(-1, a.shape[-1]))
            return out.reshape(a.shape), bool(ok)
    ok = not signs or a.min() >= 0.0
    res = a / (sums if a.ndim == 1 else sums[:, None])
    res += 0.0
    return res, ok


def as_distribution(v, name: str = "distribution", atol: float | None = None) -> np.ndarray:
    """A probability vector: v_i finite, v_i >= 0 and |sum_i v_i - 1| <= tol, returned as v / sum(v).

    tol is :func:`sum_tolerance` of the dtype ``v`` arrived in (float64 for lists) unless ``atol``
    is given.  The division happens once, in float64, so the result sums to 1 to float64 rounding.

    Parameters: ``v`` (list, numpy array of a float dtype, or torch tensor), ``name`` (used in the
    message), ``atol`` (sum tolerance; ``None``: the dtype-aware default).

    Returns: a fresh float64 1-D array, renormalised, with no negative zeros (-0.0 is a valid
    entry, but as a divisor it makes a likelihood ratio -inf); ``ValueError`` naming the first
    offending token, ``TypeError`` for non-numeric input.

    >>> from specsim._validate import as_distribution
    >>> as_distribution([0.25, 0.75])
    array([0.25, 0.75])
    >>> as_distribution([0.5 + 4e-9, 0.5 + 4e-9]).tolist()      # within 1e-8: renormalised
    [0.5, 0.5]
    >>> as_distribution([[0.5, 0.5]], "q")
    Traceback (most recent call last):
    ...
    ValueError: q: expected a 1-D probability vector, got shape (1, 2)
    """
    return _as_distribution(v, name, atol, None)


def _as_distribution(v, name: str, atol, out: np.ndarray | None) -> np.ndarray:
    """:func:`as_distribution`, long rows on the compiled path written into ``out`` if given."""
    a, s = _checked_row(v, name, atol, signs=False)
    res, ok = _scale(a, s, _own_copy(a, v) if out is None else out, signs=True)
    if not ok:                          # (a may have been scaled in place: v is checked again)
        _checked_row(v, name, atol)
    return res


def _own_copy(a: np.ndarray, v) -> np.ndarray | None:
    """``a`` when it is a float64 copy made here (from a list, float32, ...): it can be scaled in
    place; ``None`` when it is (a view of) the caller's ``v``."""
    return a if a is not v and a.flags.owndata else None


def _checked_row(v, name: str, atol, signs: bool = True) -> tuple[np.ndarray, float]:
    """(``v`` as a float64 1-D array, its numpy sum) once it meets the input contract: the one
    check behind :func:`as_distribution`, :func:`as_pair` and :func:`pair_sums`."""
    a, eps = _float_array(v, name)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D probability vector, got shape {a.shape}")
    if a.size < 1:
        raise ValueError(f"{name}: empty probability vector")
    return a, _row_sum(a, name, _row_atol(atol, eps, a.size), signs)


def as_rows(a, name: str, shape: tuple[int, int] | None = None, atol: float | None = None) -> np.ndarray:
    """A 2-D array whose every row is a probability vector (:func:`as_distribution`), each row
    renormalised once in float64.

    Parameters: ``a`` (nested list, array or tensor), ``name``, ``shape`` (required
    ``(rows, V)`` or ``None``), ``atol`` (``None``: the dtype-aware default).

    Returns: a fresh float64 2-D array; ``ValueError`` naming the row (``name[i]``) otherwise, and
    naming ``name`` for rows of V = 0 entries.

    >>> import numpy as np
    >>> from specsim._validate import as_rows
    >>> as_rows(np.array([[0.5, 0.5], [1.0, 0.0]], dtype=np.float16), "q").dtype
    dtype('float64')
    >>> as_rows([[0.5, 0.5], [1.0, 0.1]], "q")
    Traceback (most recent call last):
    ...
    ValueError: q[1]: entries sum to 1.1, not 1 (tolerance 1e-08)
    >>> as_rows(np.zeros((2, 0)), "p")
    Traceback (most recent call last):
    ...
    ValueError: p: the rows are empty (shape (2, 0)): a probability row needs V >= 1 tokens (V >= 2 where a target and a draft are compared)
    """
    arr, eps = _float_array(a, name)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array of probability rows, got shape {arr.shape}")
    if arr.shape[1] == 0:  # V = 0: say so, rather than "entries sum to 0.0" for each row
        raise ValueError(f"{name}: the rows are empty (shape {arr.shape}): a probability row needs V >= 1 "
                         f"tokens (V >= 2 where a target and a draft are compared)")
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {arr.shape}")
    tol = _row_atol(atol, eps, arr.shape[1])
    if not arr.size:
        return arr.astype(np.float64)
    res, ok = _scale(arr, _row_sum(arr, name, tol, signs=False), _own_copy(arr, a), signs=True)
    if not ok:                          # (arr may have been scaled in place: a is converted again)
        _row_sum(_float_array(a, name)[0], name, tol)
    return res


def as_pair(p, q, atol: float | None = None, scratch: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A (target p, draft q) pair of probability vectors over the same V >= 2 tokens
    (:func:`as_distribution` each).

    Parameters: ``p``, ``q`` (lists, arrays or tensors), ``atol`` (``None``: dtype-aware),
    ``scratch``: for a caller that neither keeps nor returns the rows, the name of a per-thread
    work block (:func:`specsim._jit.work_block`) that long rows on the compiled path are written
    into instead of fresh arrays (fresh rows of ~1 MB page-fault on every call).

    Returns: ``(p, q)`` as renormalised float64 arrays; ``ValueError`` for a bad row, different
    sizes or V < 2.

    >>> from specsim._validate import as_pair
    >>> p, q = as_pair([0.5, 0.5], [0.9, 0.1])
    >>> p.tolist(), q.tolist()
    ([0.5, 0.5], [0.9, 0.1])
    >>> as_pair([0.5, 0.5], [0.2, 0.3, 0.5])
    Traceback (most recent call last):
    ...
    ValueError: p and q must have the same vocabulary size, got 2 and 3 tokens
    """
    a, b, sp, sq = pair_sums(p, q, atol, signs=False)      # the signs: checked as the rows are scaled
    if scratch is not None and a.size >= JIT_MIN_V and _jit.enabled():
        out = _jit.work_block(scratch, 2, a.size)
    else:
        out = _own_copy(a, p), _own_copy(b, q)
    (a, ok_a), (b, ok_b) = _scale(a, sp, out[0], signs=True), _scale(b, sq, out[1], signs=True)
    if not (ok_a and ok_b):             # as_pair's error, p's first (the rows are converted again)
        _checked_pair(p, q, atol)
    return a, b


def pair_sums(p, q, atol: float | None = None,
              signs: bool = True) -> tuple[np.ndarray, np.ndarray, float, float]:
    """:func:`as_pair` without the normalised copies, for a caller that reads each entry once
    and can divide it on the way (a copy of a long row costs a write pass and its page faults).

    The same checks and errors as :func:`as_pair`; returns ``(p, q, s_p, s_q)``: the rows as
    float64 arrays (the caller's own arrays when they already are: read them, never write),
    and numpy's sums of them, so that ``p / s_p + 0.0`` is bit for bit what :func:`as_pair`
    returns.  ``signs=False`` leaves out the one check a finite sum does not imply, that no
    entry is negative (a ``min`` pass), for a caller that reads every entry anyway: if it finds
    one < 0, or raises an error of its own before it has read them all, it must first call
    ``pair_sums(p, q, atol)`` with the original arguments, which raises :func:`as_pair`'s error.

    >>> from specsim._validate import pair_sums
    >>> pair_sums([0.25, 0.75], [1.0, 0.0])[2:]
    (1.0, 1.0)
    >>> pair_sums([0.25, 0.75], [1.5, -0.5], signs=False)[2:]     # the caller checks the signs
    (1.0, 1.0)
    """
    try:
        (p, sp), (q, sq) = _checked_pair(p, q, atol, signs)
    except (TypeError, ValueError):
        if not signs:           # p's negative entry is named before q's fault, as in as_pair
            _checked_pair(p, q, atol)
        raise
    return p, q, sp, sq


def _checked_pair(p, q, atol, signs: bool = True):
    """Both rows checked (:func:`_checked_row`) and compared: ((p, s_p), (q, s_q))."""
    p, q = _checked_row(p, "p (target)", atol, signs), _checked_row(q, "q (draft)", atol, signs)
    if p[0].shape != q[0].shape:
        raise ValueError(f"p and q must have the same vocabulary size, got {p[0].size} and {q[0].size} tokens")
    if p[0].size < 2:
        raise ValueError(f"vocabulary size must be >= 2, got {p[0].size}")
    return p, q


def check_int(value, name: str, minimum: int, maximum: int | None = None) -> int:
    """An integer argument ``minimum <= value (<= maximum)`` (Python or numpy integer; ``bool`` refused).

    Parameters: ``value``, ``name`` (used in the message), ``minimum``, ``maximum`` (or ``None``).

    Returns: ``value`` as an ``int``; ``TypeError`` for a non-integer (``bool``, a float such as
    ``2.0``, a string), ``ValueError`` for an integer out of range.

    >>> import numpy as np
    >>> from specsim._validate import check_int
    >>> check_int(np.int64(3), "L", 1)
    3
    >>> check_int(0, "L", 1)
    Traceback (most recent call last):
    ...
    ValueError: L must be >= 1, got 0
    >>> check_int(2.0, "L", 1)
    Traceback (most recent call last):
    ...
    TypeError: L must be an integer, got 2.0
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def check_real(value, name: str, lo: float = -np.inf, hi: float = np.inf,
               lo_open: bool = False, hi_open: bool = False) -> float:
    """A real parameter in [lo, hi] (an end open when asked): finite, unless hi = inf is a closed end.

    Parameters: ``value``, ``name`` (used in the message), ``lo``, ``hi``, ``lo_open``, ``hi_open``.

    Returns: ``value`` as a ``float``; ``TypeError`` for a non-number (``bool`` and strings
    included), ``ValueError`` for NaN or a value outside the interval.

    >>> from specsim._validate import check_real
    >>> check_real(1e-9, "atol", 0.0, 1.0)
    1e-09
    >>> check_real(float("nan"), "atol", 0.0, 1.0)
    Traceback (most recent call last):
    ...
    ValueError: atol must lie in [0, 1], got nan
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    bad = (not np.isfinite(v) and not (hi == np.inf and v == np.inf)) or v < lo or v > hi \
        or (lo_open and v == lo) or (hi_open and v == hi)
    if bad:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise ValueError(f"{name} must lie in {lb}{lo:g}, {hi:g}{rb}, got {value!r}")
    return v


def check_bool(value, name: str) -> bool:
    """A flag that must be ``True`` or ``False`` (a string such as ``'False'`` is refused).

    Parameters: ``value``, ``name``.  Returns: ``value``; ``TypeError`` otherwise.

    >>> from specsim._validate import check_bool
    >>> check_bool(False, "replacement")
    False
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_tokens(tokens, name: str, V: int) -> tuple[int, ...]:
    """Token ids: a sequence of Python or numpy integers (not ``bool``, not floats) in 0..V-1.

    Parameters: ``tokens`` (a sequence or 1-D integer array), ``name`` (used in the message),
    ``V`` (vocabulary size).

    Returns: the ids as a tuple of ``int``; ``TypeError`` for a non-integer id or a non-sequence,
    ``ValueError`` for an id out of range, each naming the position.

    >>> from specsim._validate import check_tokens
    >>> check_tokens([1, 0], "draft", 3)
    (1, 0)
    >>> check_tokens((0.7,), "draft", 3)
    Traceback (most recent call last):
    ...
    TypeError: draft[0] must be an integer token id, got 0.7
    """
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__iter__"):
        raise TypeError(f"{name} must be a sequence of token ids, got {type(tokens).__name__}")
    out = []
    for i, t in enumerate(tokens):
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"{name}[{i}] must be an integer token id, got {t!r}")
        if not 0 <= t < V:
            raise ValueError(f"{name}[{i}] = {int(t)} is outside 0..{V - 1}")
        out.append(int(t))
    return tuple(out)


def normalize(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """norm(v) = v / sum(v); ``fallback`` when sum(v) <= 0 (a residual that is reached only with
    probability 0 has no mass, and any row may stand in for it).  Internal: no checks.

    >>> import numpy as np
    >>> from specsim._validate import normalize
    >>> normalize(np.array([1.0, 3.0]), np.array([0.5, 0.5])).tolist()
    [0.25, 0.75]
    >>> normalize(np.zeros(2), np.array([0.5, 0.5])).tolist()
    [0.5, 0.5]
    """
    s = v.sum()
    if s <= 0.0:
        return fallback
    return v / s


def check_rng(rng, name: str = "rng") -> np.random.Generator:
    """A ``numpy.random.Generator`` (make one with ``np.random.default_rng(seed)``).

    Parameters: ``rng``, ``name``.  Returns: ``rng``; ``TypeError`` otherwise.

    >>> import numpy as np
    >>> from specsim._validate import check_rng
    >>> isinstance(check_rng(np.random.default_rng(0)), np.random.Generator)
    True
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator (np.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")
    return rng


def check_seed(seed, name: str = "seed") -> int:
    """A seed for ``numpy.random.default_rng``: a Python or numpy integer >= 0 (``bool`` refused).

    Every public ``seed`` argument goes through here (and every integer ``rng``, via
    :func:`as_rng`), so a bad seed is named before numpy sees it.

    Parameters: ``seed``, ``name`` (used in the message).

    Returns: ``seed`` as an ``int``; ``TypeError`` for a non-integer (``1.5``, ``'0'``, ``True``),
    ``ValueError`` for a negative integer.

    >>> from specsim._validate import check_seed
    >>> check_seed(7)
    7
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be >= 0, got -1
    >>> check_seed(1.5, "trial_seed")
    Traceback (most recent call last):
    ...
    TypeError: trial_seed must be an integer seed >= 0, got 1.5
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be an integer seed >= 0, got {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be >= 0, got {seed}")
    return int(seed)


def as_rng(rng, name: str = "rng") -> np.random.Generator:
    """A ``numpy.random.Generator`` from an ``rng`` argument that may also be a seed or ``None``.

    A Generator is returned as is (its stream continues); an integer seed (:func:`check_seed`)
    or ``None`` (fresh entropy) goes to ``numpy.random.default_rng``.

    Parameters: ``rng``, ``name`` (used in the message).

    Returns: a Generator; ``TypeError`` for anything else, ``ValueError`` for a negative seed.

    >>> import numpy as np
    >>> from specsim._validate import as_rng
    >>> as_rng(3).random() == np.random.default_rng(3).random()
    True
    >>> as_rng(-1)
    Traceback (most recent call last):
    ...
    ValueError: rng must be >= 0, got -1
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, (int, np.integer)):
        raise TypeError(f"{name} must be a numpy.random.Generator, an integer seed >= 0 or None, "
                        f"got {rng!r}")
    return np.random.default_rng(check_seed(rng, name))
