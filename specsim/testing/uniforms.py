"""Random draws routed through injected uniforms, so unmodified samplers can be certified exactly.

:func:`~specsim.testing.check_sampler_exact` and :func:`~specsim.testing.check_step_exact`
integrate an implementation's law over a vector of uniforms u.  This module hands that vector to
code written against ``numpy.random.Generator`` or torch's global generator, one random call at
a time, each call consuming a fixed number of uniforms in the order the calls are made:

=======================================  ==========================  =============================================
call                                     uniforms consumed           value returned for uniforms u
=======================================  ==========================  =============================================
``rng.random(size, dtype)``              one per value               u (float32: rounded down to the 2^-24 lattice)
``rng.uniform(low, high, size)``         one per value               low + (high - low) u
``rng.integers(low, high, size)``        one per value               low + floor(u (high - low))
``rng.choice(a, size, p=p)``             one per value               ``cdf = cumsum(p); cdf /= cdf[-1]``;
                                                                     ``cdf.searchsorted(u, side="right")``
``rng.choice(a, size)`` (no ``p``)       one per value               floor(u len(a))
``torch.rand``, ``rand_like``,           one per value               u rounded down to the dtype's lattice
``Tensor.uniform_(a, b)``                                            (2^-24 for float32), then a + (b - a) u
``torch.bernoulli(p)``, ``.bernoulli``   one per entry               1 where u < p (u on p's dtype lattice)
``torch.multinomial(w, k)``, ``.multi``  one per row and sample      inverse CDF of the normalised row
``torch.randint(low, high, size)``       one per value               low + floor(u (high - low))
=======================================  ==========================  =============================================

Which of these is the library's own law.  numpy's ``choice(p=...)`` is, exactly: numpy draws one
double with ``random()`` and runs the same cumsum / searchsorted (``numpy/random/_generator.pyx``),
so for the same uniform it returns the same index (tested against numpy).  ``random`` and
``uniform`` are numpy's formulas on numpy's lattices; ``torch.rand`` and ``torch.bernoulli`` on
the CPU compare or return the same lattice values (``bernoulli(p)`` equals ``rand(...) < p`` under
the same seed; tested).  ``integers``, ``choice`` without ``p`` and ``torch.randint`` give the
uniform law on the range, the law of the library's calls (numpy's Lemire rejection is unbiased;
torch's modulo reduction is biased by at most range / 2^32), through a different map from bits to
values.  ``torch.multinomial`` is **not** an inverse CDF inside torch (its CPU path for one sample
is an exponential race): for torch samplers the certificate is of *the sampler's logic, given a
correct multinomial*, not of torch's multinomial itself.

Calls that cannot be routed raise :class:`~specsim.testing.SamplerError` naming the call: every
other Generator method (``permutation``, ``shuffle``, ``gumbel``, ``exponential``...), torch's
``randn``, ``randperm``, ``normal``, ``Tensor.exponential_`` (so Gumbel / exponential races,
one uniform per vocabulary entry, are refused: their breakpoints are not axis-aligned, use
:func:`~specsim.testing.check_sampler`), ``choice`` of more than one value without replacement,
and anything that draws from torch's global generator or numpy's legacy global state behind the
adapter's back (detected by comparing their states before and after the call; torch's CPU
generator only).  A refusal the
sampler catches still fails the run.  Not seen: generators the sampler creates itself
(``np.random.default_rng()``, its own ``torch.Generator`` used with an unrouted call), and torch
functions imported by name before the call (``from torch import rand``).
"""
from __future__ import annotations

import math

import numpy as np

from .._sampling import draw_rows
from .sampler import SamplerError

__all__ = ["UniformSource", "from_rng_sampler", "routed_torch"]

#: Generator methods that draw from the injected uniforms; every other public name is refused.
ROUTED = ("random", "uniform", "integers", "choice")


def _refusal(call: str) -> str:
    return (f"{call} cannot draw from injected uniforms (routed: rng.random, rng.uniform, rng.integers, "
            f"rng.choice, torch.rand, torch.rand_like, Tensor.uniform_, torch.bernoulli, torch.multinomial, "
            f"torch.randint); use the statistical check (check_sampler / check_step) for this code")


def _lattice(u: np.ndarray, digits: int) -> np.ndarray:
    """u rounded down to the grid k 2^-digits that a generator of that many random bits draws
    from (numpy and torch both turn the top bits of a word into k 2^-digits)."""
    return u if digits >= 53 else np.floor(u * 2.0 ** digits) / 2.0 ** digits


def _count(size) -> int:
    if size is None:
        return 1
    if isinstance(size, (int, np.integer)):
        return int(size)
    return int(np.prod(tuple(size), dtype=np.int64))


def _scalar(x, what: str):
    if np.ndim(x) != 0:
        raise SamplerError(f"{what} with array bounds cannot draw from injected uniforms (scalar bounds only)")
    return x


class UniformSource(np.random.Generator):
    """A ``numpy.random.Generator`` whose draws are the next uniforms of a fixed vector u in [0,1)^m.

    ``random``, ``uniform``, ``integers`` and ``choice`` consume one uniform per value they return,
    in the order asked for (the module docstring gives each map); ``used`` counts the uniforms
    consumed.  Every other public method raises :class:`~specsim.testing.SamplerError` naming it
    (its draws would not be integrated) and is recorded in ``refused`` (so a sampler that catches
    the error still fails), as does asking for more than m uniforms.  It is a real Generator so
    that code checking the type accepts it; its bit generator is never drawn from.

    >>> from specsim.testing.uniforms import UniformSource
    >>> src = UniformSource([0.25, 0.5, 0.75, 0.9])
    >>> src.random(), src.random(2).tolist(), src.choice(3, p=[0.5, 0.25, 0.25])
    (0.25, [0.5, 0.75], 2)
    """

    def __init__(self, u):
        super().__init__(_NO_BITS)
        self._u = np.asarray(u, dtype=np.float64).ravel()
        self._n = self._u.size
        self._floats = self._u.tolist()  # scalar draws read Python floats (no numpy scalar per draw)
        self.used = 0
        self.refused = None  # the first refused call's message

    def __getattr__(self, name):  # reached only for names Generator does not have either
        if name.startswith("_"):
            raise AttributeError(name)
        raise self._refuse(f"rng.{name}")

    def _refuse(self, call: str) -> SamplerError:
        msg = f"the sampler called {call}; {_refusal(call)}"
        if self.refused is None:
            self.refused = msg
        return SamplerError(msg)

    def _short(self, total: int):
        """The code asked for ``total`` uniforms, more than u holds."""
        raise _too_many(self._n)

    def take(self, k: int) -> np.ndarray:
        """The next ``k`` uniforms (float64 array), consumed."""
        i = self.used
        if i + k > self._n:
            self._short(i + k)
        self.used = i + k
        return self._u[i:i + k].copy()

    def random(self, size=None, dtype=np.float64, out=None):
        dt = np.dtype(dtype)
        if dt not in (np.float64, np.float32):
            raise TypeError(f"rng.random: unsupported dtype {dt} (float64 or float32)")
        if out is not None:
            if size is not None and tuple(np.atleast_1d(size)) != out.shape:
                raise ValueError(f"rng.random: size {size} does not match out.shape {out.shape}")
            size = out.shape
        if size is None and out is None and dt == np.float64:  # the common scalar draw, kept cheap
            i = self.used
            if i >= self._n:
                self._short(i + 1)
            self.used = i + 1
            return self._floats[i]
        vals = self.take(_count(size))
        vals = vals if dt == np.float64 else _lattice(vals, 24).astype(np.float32)
        if size is None:
            return vals[0]
        vals = vals.reshape(size)
        if out is not None:
            out[...] = vals
            return out
        return vals

    def uniform(self, low=0.0, high=1.0, size=None):
        low, high = float(_scalar(low, "rng.uniform")), float(_scalar(high, "rng.uniform"))
        if not math.isfinite(high - low):
            raise OverflowError("rng.uniform: high - low is not finite")
        vals = low + (high - low) * self.take(_count(size))
        return float(vals[0]) if size is None else vals.reshape(size)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        low, high = _scalar(low, "rng.integers"), _scalar(high, "rng.integers")
        if high is None:
            low, high = 0, low
        lo, span = int(low), int(high) - int(low) + bool(endpoint)
        if span <= 0:
            raise ValueError(f"rng.integers: low >= high (low = {low}, high = {high}, endpoint = {endpoint})")
        vals = lo + np.minimum(np.floor(self.take(_count(size)) * span), span - 1).astype(np.int64)
        vals = vals.astype(dtype)
        return vals[0] if size is None else vals.reshape(size)

    def choice(self, a, size=None, replace=True, p=None, axis=0, shuffle=True):
        if isinstance(a, (int, np.integer)):
            pop, pool = int(a), None
        else:
            pool = np.asarray(a)
            if pool.ndim == 0:
                raise ValueError("rng.choice: a must be a sequence or an integer, not a 0-d array")
            pool = np.moveaxis(pool, axis, 0)
            pop = pool.shape[0]
        if pop <= 0:
            raise ValueError(f"rng.choice: a must be a positive integer or a non-empty sequence, got {a!r}")
        k = _count(size)
        if not replace and k > 1:  # numpy draws distinct values by rejection / permutation: not routed
            raise self._refuse("rng.choice(..., replace=False) of more than one value")
        if p is not None:
            # numpy's checks and its inverse CDF (numpy/random/_generator.pyx, Generator.choice)
            atol = np.sqrt(np.finfo(np.float64).eps)
            if isinstance(p, np.ndarray) and np.issubdtype(p.dtype, np.floating):
                atol = max(atol, np.sqrt(np.finfo(p.dtype).eps))
            w = np.asarray(p, dtype=np.float64)
            if w.ndim != 1 or w.size != pop:
                raise ValueError(f"rng.choice: p must be 1-D of length {pop}, got shape {w.shape}")
            total = math.fsum(w.tolist())
            if np.isnan(total):
                raise ValueError("rng.choice: probabilities contain NaN")
            if np.any(w < 0):
                raise ValueError("rng.choice: probabilities are not non-negative")
            if abs(total - 1.0) > atol:
                raise ValueError(f"rng.choice: probabilities do not sum to 1 (sum = {total!r})")
            cdf = w.cumsum()
            cdf /= cdf[-1]
            idx = cdf.searchsorted(self.take(k), side="right")
        else:
            idx = np.minimum(np.floor(self.take(k) * pop), pop - 1).astype(np.int64)
        if pool is None:
            return int(idx[0]) if size is None else idx.reshape(size)
        return pool[idx[0]] if size is None else pool[idx].reshape(np.shape(np.empty(size)) + pool.shape[1:])


#: The bit generator every UniformSource is built on; never drawn from (only the routed methods
#: are reachable, and they read u), so one instance serves all and none is seeded per call.
_NO_BITS = np.random.PCG64(0)


def _refuse_property(name: str) -> property:
    def get(self):
        raise self._refuse(f"rng.{name}")
    return property(get)


# every other public Generator attribute raises on access (cheaper than a __getattribute__ hook,
# which every attribute read inside the routed methods would pay)
for _name in dir(np.random.Generator):
    if not _name.startswith("_") and _name not in ROUTED:
        setattr(UniformSource, _name, _refuse_property(_name))
del _name


def _too_many(n_uniforms: int) -> SamplerError:
    return SamplerError(f"the code asked for more than n_uniforms = {n_uniforms} uniforms (pass a larger "
                        f"n_uniforms: the most uniforms one call consumes)")


# ----------------------------------------------------------------------------- torch
_MISSING = object()


class routed_torch:
    """Context manager: while active, torch's random functions draw from ``source`` (a
    :class:`UniformSource`) as the module docstring's table says; the unrouted ones (``randn``,
    ``randperm``, ``normal``, ``Tensor.exponential_``, ...) raise
    :class:`~specsim.testing.SamplerError` naming the call.  On exit everything is restored, and a
    draw from torch's global generator during the block (a call reached some other way) raises.
    Not thread-safe: it patches module and ``torch.Tensor`` attributes.

    >>> import torch
    >>> from specsim.testing.uniforms import UniformSource, routed_torch
    >>> src = UniformSource([0.3, 0.9, 0.5])
    >>> with routed_torch(src):
    ...     r = torch.rand(2, dtype=torch.float64)
    ...     y = torch.multinomial(torch.tensor([0.25, 0.5, 0.25]), 1)
    >>> r.tolist(), y.tolist()
    ([0.3, 0.9], [1])
    """

    _REFUSED = ("randn", "randn_like", "randint_like", "randperm", "normal", "poisson", "binomial")
    _REFUSED_METHODS = ("exponential_", "normal_", "random_", "geometric_", "cauchy_", "log_normal_")

    def __init__(self, source: UniformSource):
        import torch

        self._torch = torch
        self._src = source
        self._saved: list = []

    # --- the routed calls
    def _values(self, n: int, dtype):
        torch = self._torch
        dt = dtype or torch.get_default_dtype()
        if not dt.is_floating_point:
            raise TypeError(f"torch.rand: dtype must be floating, got {dt}")
        digits = _DIGITS.get(str(dt), 53)
        return torch.as_tensor(_lattice(self._src.take(n), digits), dtype=torch.float64).to(dt)

    def rand(self, *size, generator=None, dtype=None, device=None, requires_grad=False, out=None, **kw):
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
        shape = tuple(kw.pop("size", shape))
        if kw:
            raise TypeError(f"torch.rand: unexpected arguments {sorted(kw)}")
        vals = self._values(_count(shape), dtype if out is None else out.dtype).reshape(shape)
        if out is not None:
            out.resize_(shape).copy_(vals)
            return out
        return (vals.to(device) if device is not None else vals).requires_grad_(requires_grad)

    def rand_like(self, t, dtype=None, device=None, **kw):
        vals = self._values(t.numel(), dtype or t.dtype).reshape(t.shape)
        return vals.to(device if device is not None else t.device)

    def uniform_(self, t, from_=0.0, to=1.0, generator=None):
        vals = self._values(t.numel(), t.dtype).reshape(t.shape)
        with self._torch.no_grad():
            t.copy_(vals * (to - from_) + from_)
        return t

    def bernoulli(self, probs, p=None, generator=None, out=None):
        torch = self._torch
        P = torch.full_like(probs, float(p)) if p is not None else probs
        if not P.is_floating_point():
            raise TypeError(f"torch.bernoulli: probabilities must be floating, got {P.dtype}")
        if bool(((P < 0) | (P > 1) | torch.isnan(P)).any()):
            raise ValueError("torch.bernoulli: probabilities must lie in [0, 1]")
        u = self._values(P.numel(), P.dtype).reshape(P.shape).to(P.device)
        res = (u < P).to(probs.dtype)
        if out is not None:
            out.copy_(res)
            return out
        return res

    def multinomial(self, w, num_samples, replacement=False, generator=None, out=None):
        torch = self._torch
        if w.dim() not in (1, 2):
            raise ValueError(f"torch.multinomial: expected a 1-D or 2-D tensor of weights, got {w.dim()}-D")
        k = int(num_samples)
        if k < 1:
            raise ValueError(f"torch.multinomial: num_samples must be >= 1, got {k}")
        if k > 1 and not replacement:  # torch draws distinct values by an exponential race: not routed
            raise self._src._refuse("torch.multinomial(..., replacement=False) of more than one sample")
        rows = w.detach().to("cpu", torch.float64).reshape(-1, w.shape[-1]).numpy()
        if not np.all(np.isfinite(rows)) or np.any(rows < 0):
            raise ValueError("torch.multinomial: weights must be finite and >= 0")
        bad = np.flatnonzero(~(rows.sum(axis=1) > 0))
        if bad.size:
            raise ValueError(f"torch.multinomial: row {int(bad[0])} has no positive weight (sum of probabilities <= 0)")
        ids = draw_rows(np.repeat(rows, k, axis=0), self._src)  # row 0's k samples first, then row 1's
        res = torch.as_tensor(ids, dtype=torch.long, device=w.device).reshape(w.shape[:-1] + (k,))
        if out is not None:
            out.copy_(res)
            return out
        return res

    def randint(self, *args, size=None, generator=None, dtype=None, device=None, **kw):
        torch = self._torch
        if size is None:  # randint(high, size) or randint(low, high, size)
            *bounds, size = args
        else:
            bounds = list(args)
        low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
        span = int(high) - int(low)
        if span <= 0:
            raise ValueError(f"torch.randint: low >= high (low = {low}, high = {high})")
        shape = tuple(size)
        vals = int(low) + np.minimum(np.floor(self._src.take(_count(shape)) * span), span - 1).astype(np.int64)
        return torch.as_tensor(vals.reshape(shape), dtype=dtype or torch.long, device=device)

    # --- patching
    def _set(self, owner, name, value):
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING) if isinstance(owner, type)
                            else getattr(owner, name)))
        setattr(owner, name, value)

    def __enter__(self):
        torch = self._torch
        T = torch.Tensor
        self._state = torch.get_rng_state()
        for name in ("rand", "rand_like", "bernoulli", "multinomial", "randint"):
            self._set(torch, name, getattr(self, name))
        self._set(T, "uniform_", lambda t, *a, **k: self.uniform_(t, *a, **k))
        self._set(T, "bernoulli", lambda t, *a, **k: self.bernoulli(t, *a, **k))
        self._set(T, "multinomial", lambda t, *a, **k: self.multinomial(t, *a, **k))
        for name in self._REFUSED:
            self._set(torch, name, self._refuser(f"torch.{name}"))
        for name in self._REFUSED_METHODS + ("bernoulli_",):
            self._set(T, name, self._refuser(f"Tensor.{name}"))
        return self

    def _refuser(self, call: str):
        def refuse(*args, **kw):
            raise self._src._refuse(call)
        return refuse

    def __exit__(self, *exc):
        torch = self._torch
        for owner, name, old in reversed(self._saved):
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        self._saved.clear()
        if exc[0] is None and not torch.equal(self._state, torch.get_rng_state()):
            raise self._src._refuse("a torch random function not routed here (torch's global generator "
                                    "was drawn from)")
        return False


#: random bits behind a float uniform of each torch dtype (torch's CPU uniform: top bits x 2^-digits)
_DIGITS = {"torch.float64": 53, "torch.float32": 24, "torch.float16": 11, "torch.bfloat16": 8}


# ----------------------------------------------------------------------------- the adapter
def _global_numpy_state() -> bytes:
    """The raw state of the bit generator behind ``np.random.*`` (key, position and all: any draw
    changes it).  Read from its C struct, ~1 us, where ``np.random.get_state()`` builds a dict
    (~100 us, most of a routed call's cost)."""
    import ctypes

    bitgen = np.random.get_bit_generator()
    if type(bitgen) is np.random.MT19937:  # numpy's mt19937_state: 624 words of key, then the position
        return ctypes.string_at(bitgen.ctypes.state_address, 624 * 4 + 4)
    return repr(bitgen.state).encode()  # another bit generator installed by the user: the slow, general form


def from_rng_sampler(sample_fn, *, torch: bool = False, name: str | None = None):
    """The uniforms-taking sampler of :func:`~specsim.testing.check_sampler_exact` from an
    unmodified sampler ``sample_fn(draft, p, q, rng)`` (or ``sample_fn(tree, rng)``) written for
    :func:`~specsim.testing.check_sampler`.

    Each call gets a :class:`UniformSource` over the injected uniforms as its ``rng``; with
    ``torch=True`` torch's random functions draw from the same uniforms while it runs
    (:class:`routed_torch`).  Every random call consumes a fixed number of uniforms (the module
    docstring's table), so pass ``check_sampler_exact`` an ``n_uniforms`` of at least the most one
    call consumes (its default L + 1 fits a token-level rule: L coins and one draw).  A call that
    cannot be routed, more uniforms than given, or a draw from torch's global generator or numpy's
    legacy global state raises :class:`~specsim.testing.SamplerError` naming the call, even when the
    sampler catches the error; nothing falls back to real randomness.

    What the certificate means: for numpy calls, the law of the sampler as it runs with numpy
    (``choice(p=)`` is numpy's own inverse CDF); for ``torch.multinomial``, the law given a correct
    multinomial (torch's own sampler is not an inverse CDF, and is not what is certified).

    Parameters: ``sample_fn``; ``torch`` (route torch's global RNG too; imports torch);
    ``name`` (for the report; default the function's).

    Returns: ``fn(..., u) -> (accepted, token)`` for ``check_sampler_exact``.

    >>> import numpy as np
    >>> from specsim.models import random_model
    >>> from specsim.testing import check_sampler_exact, from_rng_sampler
    >>> def token_level(draft, p, q, rng):  # unmodified: rng.random and rng.choice
    ...     for i, t in enumerate(draft):
    ...         if rng.random() * q[i, t] >= p[i, t]:
    ...             r = np.maximum(p[i] - q[i], 0)
    ...             return i, int(rng.choice(len(r), p=r / r.sum()))
    ...     return len(draft), int(rng.choice(p.shape[1], p=p[-1]))
    >>> check_sampler_exact(from_rng_sampler(token_level), random_model(3, 0), random_model(3, 1), L=2).lossless
    True
    """
    if not callable(sample_fn):
        raise TypeError(f"sample_fn must be callable, got {type(sample_fn).__name__}")
    if not isinstance(torch, bool):
        raise TypeError(f"torch must be a bool, got {type(torch).__name__}")
    if not (name is None or isinstance(name, str)):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
    if torch:
        import torch as _torch  # noqa: F401 - fail here, not at the first call, when torch is missing

    def run(*args):
        *head, u = args
        src = UniformSource(u)
        legacy = _global_numpy_state()
        if torch:
            with routed_torch(src):
                out = sample_fn(*head, src)
        else:
            out = sample_fn(*head, src)
        if src.refused is not None:  # raised inside and caught by the sampler: still a failure
            raise SamplerError(src.refused)
        if _global_numpy_state() != legacy:
            raise SamplerError("the sampler drew from numpy's global random state (np.random.*); "
                               + _refusal("np.random.*"))
        return out

    run.name = name or getattr(sample_fn, "name", getattr(sample_fn, "__name__", "sampler"))
    run.__name__ = run.name if run.name.isidentifier() else "sampler"
    return run
