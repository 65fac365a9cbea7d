"""The clip family pi(a) = clip(q, b(a) p, a p): the sorted-breakpoint solver shared by
:func:`specsim.verifiers.lossy.mentored` (and Cactus's closed form) and :mod:`lp.frontier`
(docs/theory.md §9.2).
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from specsim import _jit

__all__ = ["ClipFamily"]


def _cumsum0(x: np.ndarray, res: np.ndarray | None = None) -> np.ndarray:
    """(0, x_0, x_0 + x_1, ...): the running sum with a leading zero, in one array (``res``, if
    given, of length len(x) + 1)."""
    res = np.empty(x.size + 1) if res is None else res
    res[0] = 0.0
    np.cumsum(x, out=res[1:])
    return res


_SHARED_FAMILY: ContextVar = ContextVar("specsim_clip_family", default=None)

#: Rows at least this long are ordered by :func:`_argsort_nonneg`'s packed-key sort.
_PACKED_SORT_MIN = 4096


@functools.lru_cache(maxsize=4)
def _token_ids(n: int) -> np.ndarray:
    """0..n-1 as int64, built once per n (read-only)."""
    ids = np.arange(n, dtype=np.int64)
    ids.flags.writeable = False
    return ids


def _argsort_nonneg(r: np.ndarray, work: np.ndarray | None = None, check: bool = True) -> np.ndarray:
    """An argsort of ``r`` (entries >= 0 or +inf, no NaN; ties in any order), as int64 indices.

    For non-negative floats the IEEE bit pattern read as int64 is monotone in the value, so one
    in-place sort of int64 keys (the pattern with its low ``b`` bits replaced by the token id,
    2^b >= len(r)) gives the order; numpy sorts plain keys ~1.4x faster than it argsorts floats
    (7.6 vs 10-11 ms CPU at V = 151,936).  Entries whose patterns agree above those ``b`` bits
    (relative gap < 2^(b - 52)) come out in id order instead; a pass over the sorted values finds
    any such inversion and a stable argsort of the nearly sorted values (linear on sorted runs)
    repairs it, so the order is exactly that of ``np.argsort(r)`` up to ties.  ``work``: two
    float64 rows of length >= len(r) to hold the keys and the check (the result may be a view of
    the first), so that no fresh array is needed.  ``check=False`` skips the pass over the sorted
    values: the caller then checks (and repairs) the order itself.

    >>> r = np.array([0.5, 0.25, np.inf, 0.0, 0.25 * (1 + 2.0 ** -52)])
    >>> _argsort_nonneg(r).tolist()
    [3, 1, 4, 0, 2]
    """
    n = r.size
    if n < _PACKED_SORT_MIN or n >= 2 ** 31:
        return np.argsort(r)
    b = max(int(n - 1).bit_length(), 1)
    if work is None:
        work = np.empty((2, n))
    key = np.add(r, 0.0, out=work[0, :n]).view(np.int64)    # + 0.0 turns -0.0 into +0.0
    key >>= b
    key <<= b
    key |= _token_ids(n)
    key.sort()
    key &= (1 << b) - 1
    if not check:
        return key
    rs = np.take(r, key, out=work[1, :n])
    if (rs[1:] < rs[:-1]).any():                    # patterns tied above the low b bits
        key = key[np.argsort(rs, kind="stable")]
    return key


class ClipFamily:
    """pi(a) = clip(q, b(a) p, a p) with b(a) solving sum_v clip(q_v, b p_v, a p_v) = 1 (docs/theory.md §9.2).

    Sorting the breakpoints r_v = q_v / p_v once (p_v > 0) makes b(a) an O(log V) search: with
    prefix sums P_j, Q_j of p and q in ratio order, sum clip = b P_lo + (Q_hi - Q_lo) + a (1 - P_hi)
    where lo = #{r < b}, hi = #{r <= a}.  Tokens with p_v = 0 get pi_v = 0.  The sort is the
    only O(V log V) step of a certificate: ``with fam.shared():`` lets rule closed forms that need
    it (mentored, Cactus) reuse ``fam`` through :meth:`of` instead of sorting again.

    With numba (specsim._jit) the set-up is three compiled passes around numpy's sort of the
    packed keys (:mod:`specsim.verifiers._clip_kernels`), giving the same arrays bit for bit.

    Parameters: ``p`` (target) and ``q`` (draft), float64 distributions of one size (trusted:
    callers validate them); ``ValueError`` when q/p overflows.

    Returns (methods): :meth:`b` the lower level b(a), :meth:`pi` the clipped law pi(a).

    >>> import numpy as np
    >>> fam = ClipFamily(np.array([0.05, 0.15, 0.25, 0.55]), np.array([0.55, 0.25, 0.15, 0.05]))
    >>> round(fam.b(1 / 0.6), 6), fam.pi(1 / 0.6).round(6).tolist()   # mentored(0.6)'s output law
    (0.833333, [0.083333, 0.25, 0.208333, 0.458333])
    """

    #: rows of the one work block (see __init__); the last ones are lent out by :meth:`spare_row`
    _ROWS = ("r_in", "key", "check", "ps", "qs", "r", "Pc", "Qc", "Psuf", "Qsuf", "G", "logr")
    _SPARE = 3

    def __init__(self, p: np.ndarray, q: np.ndarray):
        self.p, self.q = p, q
        n = p.size
        # Every O(V) array is a row of one block: at V ~ 1e5 each fresh 1.2 MB array is a new
        # mapping whose first touch page-faults (ten of them cost ~6 ms CPU, as much as the sort),
        # while one large block is mapped once (numpy asks for huge pages).  Untouched rows cost nothing.
        self._block = block = np.empty((len(self._ROWS) + self._SPARE, n + 1))
        self._spare: dict = {}
        row = dict(zip(self._ROWS, block))
        if _jit.enabled():
            pos, n0 = None, self._setup_compiled(p, q, n, row, block)
        else:
            pos, n0 = p > 0, None
            self._setup_numpy(p, q, n, pos, row, block)
        m = self.r.size
        #: draft mass where p = 0, summed directly (clip puts nothing there)
        if m < n:
            pos = p > 0 if pos is None else pos
            self.q0 = float(q[~pos].sum())
        else:
            self.q0 = 0.0
        self.a_max = float(self.r[-1]) if self.r.size else 1.0
        #: tokens with q = 0 < p: the first n0 in ratio order (r = 0)
        self.n0 = int(np.searchsorted(self.r, 0.0, "right")) if n0 is None else int(n0)
        self._logr = None
        self._logr_row = row["logr"][:m]

    def _setup_numpy(self, p, q, n, pos, row, block):
        """Ratio order and prefix sums by numpy (the reference; the path without numba)."""
        m = int(np.count_nonzero(pos))
        r_in = row["r_in"][:n]
        if m == n:
            with np.errstate(over="ignore"):  # reported below as a ValueError
                np.divide(q, p, out=r_in)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                r_in[:] = np.where(pos, q / np.where(pos, p, 1.0), np.inf)
        #: q/p in token order (inf where p = 0)
        self.r_tokens = r_in
        order = _argsort_nonneg(r_in, block[1:3], check=False)[:m]  # p = 0 sorts last (r = inf): dropped
        # q/p is elementwise, so qs/ps equals r[order] bit for bit: the order is checked on it
        self.ps, self.qs = np.take(p, order, out=row["ps"][:m]), np.take(q, order, out=row["qs"][:m])
        with np.errstate(over="ignore"):
            self.r = np.divide(self.qs, self.ps, out=row["r"][:m])
        if m > 1 and (self.r[1:] < self.r[:-1]).any():  # keys tied above the id bits: repair
            fix = np.argsort(self.r, kind="stable")
            order = order[fix]
            self.ps[:], self.qs[:], self.r[:] = self.ps[fix], self.qs[fix], self.r[fix]
        self.idx = order
        self._check_finite()
        self.Pc, self.Qc = _cumsum0(self.ps, row["Pc"][:m + 1]), _cumsum0(self.qs, row["Qc"][:m + 1])
        self.Ptot = self.Pc[-1]
        #: suffix sums of p and q in ratio order (a * p-mass above a must not come from 1 - prefix)
        self.Psuf = _cumsum0(self.ps[::-1], row["Psuf"][:m + 1])[::-1]
        self.Qsuf = _cumsum0(self.qs[::-1], row["Qsuf"][:m + 1])[::-1]
        # G_j = r_j P_j - Q_j is nondecreasing in j: sum clip at b = r_j, minus its a-part
        self.G = np.multiply(self.r, self.Pc[:-1], out=row["G"][:m])
        self.G -= self.Qc[:-1]

    def _setup_compiled(self, p, q, n, row, block) -> int:
        """:meth:`_setup_numpy`'s arrays by three compiled passes around numpy's sort of the packed
        keys (the same values bit for bit: same order, sequential running sums); returns n0."""
        from . import _clip_kernels as K

        r_in = row["r_in"][:n]
        pack = _PACKED_SORT_MIN <= n < 2 ** 31
        b = max(int(n - 1).bit_length(), 1)
        key = block[1, :n].view(np.int64)
        p, q = np.ascontiguousarray(p), np.ascontiguousarray(q)   # one compiled signature
        with np.errstate(over="ignore"):
            m = K.ratio_keys(p, q, r_in, key, b, pack)
        self.r_tokens = r_in
        if pack:
            key.sort()
            mask = (1 << b) - 1
        else:
            key[:] = np.argsort(r_in)
            mask = -1
        self.ps, self.qs, self.r = row["ps"][:m], row["qs"][:m], row["r"][:m]
        order = key[:m]
        if (not K.gather(key, m, mask, p, q, self.ps, self.qs, self.r)    # keys tied above the id bits
                and not K.repair_order(self.r, self.ps, self.qs, order, 4 * m)):
            fix = np.argsort(self.r, kind="stable")
            order = order[fix]
            self.ps[:], self.qs[:], self.r[:] = self.ps[fix], self.qs[fix], self.r[fix]
        self.idx = order
        self._check_finite()
        self.Pc, self.Qc = row["Pc"][:m + 1], row["Qc"][:m + 1]
        self.Psuf, self.Qsuf = row["Psuf"][:m + 1], row["Qsuf"][:m + 1]
        self.G = row["G"][:m]
        self.Ptot = 0.0
        n0 = K.prefix_sums(self.ps, self.qs, self.r, self.Pc, self.Qc, self.Psuf, self.Qsuf, self.G)
        self.Ptot = self.Pc[-1]
        return n0

    def _check_finite(self):
        if self.r.size and not np.isfinite(self.r[-1]):  # p_v subnormal under draft mass: q/p overflows
            v = int(self.idx[-1])
            p, q = self.p, self.q
            raise ValueError(f"q/p overflows at token {v} (p = {p[v]!r}, q = {q[v]!r}): the likelihood "
                             "ratio is not representable; set such p entries to 0 or floor them")

    def spare_row(self, name: str, size: int) -> tuple[np.ndarray, bool]:
        """A row of the family's work block for a per-family array (``size`` <= len(r) + 1), as
        ``(row, fresh)``: the same row for the same ``name`` (``fresh`` True only the first time,
        when the caller fills it), a new array once the spare rows are used up."""
        if name in self._spare:
            return self._spare[name], False
        k = len(self._spare)
        out = self._block[len(self._ROWS) + k, :size] if k < self._SPARE else np.empty(size)
        self._spare[name] = out
        return out, True

    @property
    def logr(self) -> np.ndarray:
        """log r in ratio order, 0 (not -inf) on the first n0 tokens (r = 0); computed once."""
        if self._logr is None:
            with np.errstate(divide="ignore"):
                self._logr = np.log(self.r, out=self._logr_row)
            self._logr[:self.n0] = 0.0
        return self._logr

    @classmethod
    def of(cls, p: np.ndarray, q: np.ndarray) -> "ClipFamily":
        """The family of (p, q): the one :meth:`shared` is scoping when it was built from these very
        arrays (identity, not equality), else a new one.  Lets a certificate sort q/p once for the
        rule's closed form (mentored, Cactus) and both KL frontiers."""
        fam = _SHARED_FAMILY.get()
        if fam is not None and fam.p is p and fam.q is q:
            return fam
        return cls(p, q)

    @contextmanager
    def shared(self):
        """``with fam.shared():`` makes :meth:`of` return ``fam`` for its own (p, q) in this block."""
        token = _SHARED_FAMILY.set(self)
        try:
            yield self
        finally:
            _SHARED_FAMILY.reset(token)

    def segments(self, a: float, b: float) -> tuple[int, int]:
        """(lo, hi) = (#{r < b}, #{r <= a}) in ratio order."""
        return int(np.searchsorted(self.r, b, "left")), int(np.searchsorted(self.r, a, "right"))

    def b(self, a: float, mass: float = 1.0) -> float:
        """The lower clip level b(a) in [0, 1] for a >= 1: sum_v clip(q_v, b p_v, a p_v) = ``mass``.

        The mass b p must add below q is c = mass - sum_v min(q_v, a p_v) = (mass - 1) + the
        excess sum_v (q_v - a p_v)_+ (q normalised), and the excess is summed from its own terms
        (the tokens with r > a and those with p = 0): 1 - sum min(q, a p) would leave the ~1e-16
        rounding of sum q as a fake excess, and a b > 0 with support where the law has none (q = 0
        < p) when every draft is accepted (a >= max r, pi = q).

        >>> q = np.array([0.35, 0.35, 0.3, 0.0])
        >>> fam = ClipFamily(np.full(4, 0.25), q)   # sum q = 1 - 2^-54; q/p <= 1.4 < a = 2.5
        >>> fam.b(2.5), bool(np.array_equal(fam.pi(2.5), q))
        (0.0, True)
        """
        hi = int(np.searchsorted(self.r, a, "right"))
        excess = self.q0
        if hi < self.r.size:  # r > a on some tokens: true excess > 0, at least the top token's
            excess += max(self.Qsuf[hi] - a * self.Psuf[hi], self.qs[-1] - a * self.ps[-1], 0.0)
        c = (mass - 1.0) + excess
        if c <= 0.0:  # sum min(q, a p) = 1: pi = q, any b <= min r works
            return float(min(1.0, self.r[0])) if self.r.size else 1.0
        j = min(int(np.searchsorted(self.G, c, "left")), hi)
        if j == 0:
            return float(min(1.0, self.r[0]))
        return float(min(max((c + self.Qc[j]) / self.Pc[j], 0.0), 1.0, a))

    def pi(self, a: float, b: float | None = None) -> np.ndarray:
        """pi(a) = clip(q, b p, a p) (pi_v = 0 where p_v = 0)."""
        b = self.b(a) if b is None else b
        res = np.multiply(self.p, b)  # clip(q, b p, a p) = min(max(q, b p), a p) as b <= a
        np.maximum(res, self.q, out=res)
        return np.minimum(res, np.multiply(self.p, a, out=np.empty_like(res)), out=res)
