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

__all__ = ["ClipFamily", "clip_family"]


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


def bisect(feasible, lo: float, hi: float) -> tuple[float, float]:
    """Largest x in [lo, hi] with feasible(x) (monotone: feasible at lo), to ~1 ulp; returns (lo, hi).

    Steps are geometric (mid = sqrt(lo hi)) while hi > 4 lo > 0: a target entry p_v ~ 1e-300 under a
    draft mass puts a_max = max q/p near 1e300, and 200 arithmetic halvings would never leave a = 1.
    """
    if feasible(hi):
        return hi, hi
    for _ in range(400):
        mid = lo * np.sqrt(hi / lo) if 0.0 < 4.0 * lo < hi else 0.5 * (lo + hi)
        if feasible(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 4e-16 * max(hi, 1e-300):
            break
    return lo, hi


class ClipFamily:
    """pi(a) = clip(q, b(a) p, a p) with b(a) solving sum_v clip(q_v, b p_v, a p_v) = 1 (docs/theory.md §9.2).

    With the breakpoints r_v = q_v / p_v (p_v > 0) in ascending order and prefix sums P_j, Q_j of
    p and q in that order, b(a) is an O(log V) search: sum clip = b P_lo + (Q_hi - Q_lo) +
    a (1 - P_hi) where lo = #{r < b}, hi = #{r <= a}.  Tokens with p_v = 0 get pi_v = 0.
    ``with fam.shared():`` lets rule closed forms (mentored, Cactus) reuse ``fam`` through
    :meth:`of` instead of building another.

    Two implementations answer the same queries: :class:`SortedClipFamily` sorts every ratio
    (numpy; the reference and the path without numba) and :class:`_GroupedClipFamily` sorts only
    the buckets its queries land in (numba); :func:`clip_family` picks one.  Queries:
    :meth:`rank`, :meth:`ranks`, :meth:`ratios_at`, :meth:`b`, :meth:`pi`, :meth:`mid`,
    :meth:`q_divergence`, :meth:`divergence`, :meth:`clip_level`, :meth:`accepted`; the prefix
    arrays ``Pc``, ``Qc``, ``Psuf``, ``Qsuf`` are read at positions a query returned.  Every family
    has ``p``, ``q``, ``m`` (#{p > 0}), ``n0`` (#{q = 0 < p}), ``q0`` (q-mass where p = 0),
    ``a_max`` (the largest ratio) and ``r_tokens`` (q/p in token order, inf where p = 0).

    >>> import numpy as np
    >>> fam = SortedClipFamily(np.array([0.05, 0.15, 0.25, 0.55]), np.array([0.55, 0.25, 0.15, 0.05]))
    >>> round(fam.b(1 / 0.6), 6), fam.pi(1 / 0.6).round(6).tolist()   # mentored(0.6)'s output law
    (0.833333, [0.083333, 0.25, 0.208333, 0.458333])
    """

    def rank(self, x: float, side: str) -> int:
        """#{r < x} (``side="left"``) or #{r <= x} (``"right"``) in ratio order."""
        raise NotImplementedError

    def ranks(self, xs: np.ndarray, side: str) -> np.ndarray:
        """:meth:`rank` of every entry of ``xs``."""
        raise NotImplementedError

    def ratios_at(self, js: np.ndarray) -> np.ndarray:
        """The ratios at positions ``js`` of the ratio order."""
        raise NotImplementedError

    def b(self, a: float, mass: float = 1.0) -> float:
        """The lower clip level b(a) in [0, 1] for a >= 1: sum_v clip(q_v, b p_v, a p_v) = ``mass``."""
        raise NotImplementedError

    def pi(self, a: float, b: float | None = None) -> np.ndarray:
        """pi(a) = clip(q, b p, a p) (pi_v = 0 where p_v = 0)."""
        raise NotImplementedError

    def mid(self, kind: str) -> np.ndarray:
        """M_j = the running sum (leading 0) of the frontier's middle terms over the first j tokens
        in ratio order: (p - q)_+ (``"tv"``), q log r (``"kl"``, KL(pi||p)), -p log r
        (``"kl_reverse"``)."""
        raise NotImplementedError

    def q_divergence(self, kind: str) -> float:
        """KL(q||p) (``"kl"``) or KL(p||q) (``"kl_reverse"``) from the family's log-ratios, before
        clipping at 0 (p, q > 0 everywhere: callers check n0 and q0)."""
        raise NotImplementedError

    def divergence(self, kind: str, a: float, mass: float = 1.0) -> float:
        """D(pi(a), p) in O(log V) from the prefix sums (``mass``: pi's total, 1 but for the
        KL(p||pi) mixing step of lp.frontier)."""
        b = self.b(a, mass)
        lo, hi = self.segments(a, b)
        low, high = self.Pc[lo], self.Psuf[hi]
        M = self.mid(kind)
        mid = M[hi] - M[lo]
        if kind == "kl":
            return (b * np.log(b) * low if b > 0 else 0.0) + mid + a * np.log(a) * high
        if kind == "kl_reverse":
            if b <= 0 and (self.n0 > 0 or low > 0):
                return np.inf
            return (-np.log(b) * low if low > 0 else 0.0) + mid - np.log(a) * high
        return (1.0 - b) * low + mid

    def build(self) -> None:
        """Build what rank and clip-level queries read, if the family builds it lazily (a caller
        that knows it will need them saves a pass the family would otherwise make first)."""

    def clip_level(self, kind: str, eps: float) -> float:
        """The upper clip level a of Algorithm 9.2: the largest a >= 1 with D(pi(a), p) <= eps."""
        if eps == 0.0:
            return 1.0
        return bisect(lambda a: self.divergence(kind, a) <= eps, 1.0, max(self.a_max, 1.0))[0]

    @classmethod
    def of(cls, p: np.ndarray, q: np.ndarray) -> "ClipFamily":
        """The family of (p, q): the one :meth:`shared` is scoping when it was built from these very
        arrays (identity, not equality), else a new one.  Lets a certificate sort q/p once for the
        rule's closed form (mentored, Cactus) and both KL frontiers."""
        fam = _SHARED_FAMILY.get()
        if fam is not None and fam.p is p and fam.q is q:
            return fam
        return clip_family(p, q)

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
        return self.rank(b, "left"), self.rank(a, "right")

    def accepted(self, a: float) -> float:
        """sum_v min(q_v, a p_v) = Q(r <= a) + a P(r > a) from the prefix sums (tokens with p = 0 add
        nothing): the acceptance of speculative sampling against pi(a) (its min(q, pi) = min(q, a p))."""
        hi = self.rank(a, "right")
        return float(self.Qc[hi] + a * self.Psuf[hi])

    def _overflow(self, v: int):
        """``ValueError`` naming the last token whose ratio overflows."""
        p, q = self.p, self.q
        raise ValueError(f"q/p overflows at token {v} (p = {p[v]!r}, q = {q[v]!r}): the likelihood "
                         "ratio is not representable; set such p entries to 0 or floor them")


class SortedClipFamily(ClipFamily):
    """:class:`ClipFamily` by one sort of every ratio (numpy): the reference and the path without
    numba.  The sort is the only O(V log V) step of a certificate.

    Parameters: ``p`` (target) and ``q`` (draft), float64 distributions of one size (trusted:
    callers validate them); ``ValueError`` when q/p overflows.
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
        pos = p > 0
        self._setup_numpy(p, q, n, pos, row, block)
        self.m = m = self.r.size
        #: draft mass where p = 0, summed directly (clip puts nothing there)
        self.q0 = float(q[~pos].sum()) if m < n else 0.0
        self.a_max = float(self.r[-1]) if self.r.size else 1.0
        #: tokens with q = 0 < p: the first n0 in ratio order (r = 0)
        self.n0 = int(np.searchsorted(self.r, 0.0, "right"))
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
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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

    def _check_finite(self):
        if self.r.size and not np.isfinite(self.r[-1]):  # p_v subnormal under draft mass: q/p overflows
            self._overflow(int(np.flatnonzero((self.r_tokens == np.inf) & (self.p > 0))[-1]))

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

    def rank(self, x: float, side: str) -> int:
        """#{r < x} (``side="left"``) or #{r <= x} (``"right"``) in ratio order."""
        return int(np.searchsorted(self.r, x, side))

    def ranks(self, xs: np.ndarray, side: str) -> np.ndarray:
        """:meth:`rank` of every entry of ``xs``."""
        return np.searchsorted(self.r, xs, side)

    def ratios_at(self, js: np.ndarray) -> np.ndarray:
        """The ratios at positions ``js`` of the ratio order."""
        return self.r[js]

    def mid(self, kind: str) -> np.ndarray:
        """M_j = the running sum (leading 0) of the frontier's middle terms over the first j tokens
        in ratio order: (p - q)_+ (``"tv"``), q log r (``"kl"``, KL(pi||p)), -p log r
        (``"kl_reverse"``); built once per kind, in a row of the family's work block."""
        M, fresh = self.spare_row("divergence " + kind, self.r.size + 1)
        if not fresh:
            return M
        M[0] = 0.0
        mid = M[1:]
        if kind == "tv":
            np.subtract(self.ps, self.qs, out=mid)
            np.maximum(mid, 0.0, out=mid)  # (p - q)_+
        elif kind == "kl":
            np.multiply(self.qs, self.logr, out=mid)  # q log r (q = 0 where r = 0)
        else:
            np.multiply(self.ps, self.logr, out=mid)
            np.negative(mid, out=mid)  # -p log r
        np.cumsum(mid, out=mid)
        return M

    def q_divergence(self, kind: str) -> float:
        """KL(q||p) (``"kl"``) or KL(p||q) (``"kl_reverse"``) from the family's log-ratios, before
        clipping at 0 (p, q > 0 everywhere: callers check n0 and q0)."""
        d = float(np.multiply(self.qs if kind == "kl" else self.ps, self.logr).sum())
        return d if kind == "kl" else -d

    def b(self, a: float, mass: float = 1.0) -> float:
        """The lower clip level b(a) in [0, 1] for a >= 1: sum_v clip(q_v, b p_v, a p_v) = ``mass``.

        The mass b p must add below q is c = mass - sum_v min(q_v, a p_v) = (mass - 1) + the
        excess sum_v (q_v - a p_v)_+ (q normalised), and the excess is summed from its own terms
        (the tokens with r > a and those with p = 0): 1 - sum min(q, a p) would leave the ~1e-16
        rounding of sum q as a fake excess, and a b > 0 with support where the law has none (q = 0
        < p) when every draft is accepted (a >= max r, pi = q).

        >>> q = np.array([0.35, 0.35, 0.3, 0.0])
        >>> fam = SortedClipFamily(np.full(4, 0.25), q)   # sum q = 1 - 2^-54; q/p <= 1.4 < a = 2.5
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


#: divergence kinds as the compiled kernels number them
_KIND_CODE = {"tv": 0, "kl": 1, "kl_reverse": 2}


class _GroupedClipFamily(ClipFamily):
    """:class:`ClipFamily` without the full sort (compiled; :mod:`specsim.verifiers._clip_kernels`).

    One pass buckets the ratios by the top bits of their IEEE pattern (monotone in the ratio;
    2^8 buckets per binade) and sums p, q and the frontier's middle terms per bucket, threading
    each bucket's tokens into a list.  Running sums are then exact at every bucket start, and a
    query (a rank, a b level, a clip-level bisection) sorts only the buckets it lands in, once
    each: a certificate sorts a few short buckets instead of the row.  The log-ratios are numpy's
    log of the row.  The construction computes only the ratios (and so finds an overflow, as the
    sorted family does); the logs and the buckets are built by the first query that needs them,
    so a certificate whose rule and frontier need at most D(q, p) never builds them.

    Sums differ from the sorted family's in rounding only (each bucket summed in token order,
    then the bucket totals in order), so queries agree with :class:`SortedClipFamily` to ~1e-16
    relative and ranks exactly.  Parameters and errors as :class:`SortedClipFamily`.
    """

    #: attributes that exist once the buckets are built (:meth:`_build`, by :meth:`__getattr__`)
    _BUILT = frozenset(("r", "ps", "qs", "Pc", "Qc", "Psuf", "Qsuf", "G", "Ptot", "_S", "_W"))

    def __init__(self, p: np.ndarray, q: np.ndarray):
        from . import _clip_kernels as K

        self._K = K
        self.p, self.q = p, q
        n = p.size
        self._pc, self._qc = (np.ascontiguousarray(x, dtype=np.float64) for x in (p, q))
        self._TK = TK = _jit.work_block("clip tokens", 2, n)
        r_in = TK[0]
        # one vectorised pass: the ratios and their range; finite positive ratios everywhere (NaN,
        # from 0/0, fails one test) mean p > 0 everywhere and no overflow, else the other pass redoes it
        m, n0, bad = n, 0, -1
        rmin, rmax = (float(x) for x in np.array(K.ratio_range(self._pc, self._qc, r_in)).view(np.float64)) \
            if n else (0.0, 0.0)
        if not (rmin > 0.0 and rmax < np.inf):  # zero, infinite or undefined ratios
            m, n0, rmin, rmax, bad = K.grouped_ratios(self._pc, self._qc, r_in)
        if bad >= 0:
            self._overflow(bad)
        #: q/p in token order (inf where p = 0)
        self.r_tokens = r_in
        self._range = (rmin, rmax)
        self._logs = False
        self._qdiv = None
        self.m, self.n0 = m, n0
        self.q0 = float(q[p <= 0].sum()) if m < n else 0.0
        self.a_max = float(rmax) if m else 1.0

    def __getattr__(self, name: str):
        # only reached for attributes not yet set: the bucketed state, built on first use
        if name in _GroupedClipFamily._BUILT:
            self._build()
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def build(self) -> None:
        if "_S" not in self.__dict__:
            self._build()

    def _log_ratios(self):
        """numpy's vectorised log of the ratios into TK[1] (r = 0 and p = 0 are never read)."""
        if not self._logs:
            with np.errstate(divide="ignore"):
                np.log(self.r_tokens, out=self._TK[1])
            self._logs = True

    def _build(self):
        K, TK, pc, qc = self._K, self._TK, self._pc, self._qc
        self._log_ratios()
        n, m, (rmin, rmax) = pc.size, self.m, self._range
        if rmax > 0.0:
            top, low = (int(np.float64(x).view(np.int64)) >> K._SHIFT for x in (rmax, rmin))
            base = max(low, top - (K._MAX_BUCKETS - 2))
            B = top - base + 2
        else:                                   # every ratio is 0 (or no p > 0): one bucket
            base, B = 0, 1
        par = np.array([base, B, m, self.n0], dtype=np.int64)
        W = _jit.work_block("clip W", 12, m + 1)
        BI = np.zeros((3, B + 1), dtype=np.int64)
        I = _jit.work_block("clip ids", 2, n, np.int64)
        D = np.zeros(2)
        BB = K.grouped_setup(W, BI, par, TK[0], TK[1], I[0], pc, qc, D)
        if self._qdiv is None:                  # the same sums q_divergence would take
            self._qdiv = D
        #: the state every compiled query takes (see _clip_kernels)
        self._S = (W, BB, BI, par, TK, I, pc, qc)
        self._W = W
        self.r, self.ps, self.qs = W[0, :m], W[1, :m], W[2, :m]
        self.Pc, self.Qc, self.Psuf, self.Qsuf, self.G = W[4], W[5], W[6], W[7], W[8, :m]
        if m:                                   # the least and the largest ratio: read by b()
            K.sort_bucket_at(*self._S, 0)
            K.sort_bucket_at(*self._S, m - 1)
        self.Ptot = float(self.Pc[-1])

    def rank(self, x: float, side: str) -> int:
        return int(self._K.rank(*self._S, float(x), side == "right"))

    def ranks(self, xs: np.ndarray, side: str) -> np.ndarray:
        return self._K.ranks(*self._S, np.ascontiguousarray(xs, dtype=np.float64), side == "right")

    def ratios_at(self, js: np.ndarray) -> np.ndarray:
        return self._K.ratios_at(*self._S, np.ascontiguousarray(js, dtype=np.int64))

    def b(self, a: float, mass: float = 1.0) -> float:
        return float(self._K.b_level(*self._S, float(a), float(mass), self.q0))

    def pi(self, a: float, b: float | None = None) -> np.ndarray:
        b = self.b(a) if b is None else b
        return self._K.clip_law(self._S[6], self._S[7], float(a), float(b), np.empty(self.p.size))

    def mid(self, kind: str) -> np.ndarray:
        return self._W[9 + _KIND_CODE[kind]]

    def q_divergence(self, kind: str) -> float:
        # summed over the tokens in blocks, by the set-up pass if the buckets are built, else by a
        # pass of its own with the same arithmetic (the rounding differs from mid(kind)[-1])
        if self._qdiv is None:
            self._log_ratios()
            self._qdiv = np.zeros(2)
            self._K.q_divergences(self._pc, self._qc, self._TK[0], self._TK[1], self._qdiv)
        return float(self._qdiv[_KIND_CODE[kind] - 1])

    def clip_level(self, kind: str, eps: float) -> float:
        # compiled: a search over bucket edges, then the same bisection (scalar logs by libm: a
        # may differ by an ulp from the generic one on the same sums)
        return float(self._K.clip_level(*self._S, _KIND_CODE[kind], float(eps), self.a_max, self.q0))


def log_ratios(p: np.ndarray, q: np.ndarray) -> np.ndarray | None:
    """log(q/p) in token order if p, q > 0 everywhere (read-only), else None: the grouped family's
    row when :meth:`ClipFamily.shared` scopes one built from these very arrays (a certificate's rule
    then shares the frontier's logs, and the family's counts answer the sign test without a pass),
    else computed; the same numpy divide and log either way, so the same bits."""
    fam = _SHARED_FAMILY.get()
    if isinstance(fam, _GroupedClipFamily) and fam.p is p and fam.q is q:
        if fam.m < p.size or fam.n0:            # p = 0 somewhere, or q = 0 < p
            return None
        fam._log_ratios()
        return fam._TK[1]
    if not ((p > 0) & (q > 0)).all():
        return None
    return np.log(np.divide(q, p))


def clip_family(p: np.ndarray, q: np.ndarray) -> ClipFamily:
    """The clip family of (p, q): grouped (no full sort) with numba, sorted by numpy without."""
    return _GroupedClipFamily(p, q) if _jit.enabled() else SortedClipFamily(p, q)
