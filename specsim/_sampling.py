"""The one inverse-CDF draw used by every sampler in the package (verifiers and test samplers).

Token i is returned for a uniform U when C_{i-1} <= U * C_{V-1} < C_i, with C the running sum of
the (clipped, possibly unnormalised) weights.  A token with weight 0 never satisfies the strict
inequality, and the one case rounding can reach, U * C_{V-1} = C_{V-1}, is sent to the last
token of positive weight, so a zero-probability token is never returned.
"""
from __future__ import annotations

import numpy as np

__all__ = ["draw_token", "draw_rows"]


def draw_rows(rows, rng: np.random.Generator) -> np.ndarray:
    """One token per row by inverse CDF, with one fresh uniform per row.

    y_n = min{i : C_n(i) > U_n C_n(V-1)},  C_n(i) = sum_{v <= i} max(w_n(v), 0),  U_n ~ U[0, 1);
    the result is capped at the row's last token of positive weight (reached only when
    U_n C_n(V-1) rounds up to C_n(V-1)).

    Parameters: ``rows`` [N, V] nonnegative weights (normalisation not required; negative rounding
    noise is clipped to 0); ``rng`` a ``numpy.random.Generator`` (consumes N doubles).

    Returns: an ``int64`` array [N] of token ids, each with positive weight in its row;
    ``ValueError`` when a row has no positive weight.

    >>> import numpy as np
    >>> draw_rows([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]], np.random.default_rng(0)).tolist()
    [1, 0]
    """
    w = np.maximum(np.asarray(rows, dtype=np.float64), 0.0)
    if w.ndim != 2 or w.shape[1] < 1:
        raise ValueError(f"rows must be a 2-D array [N, V] of weights, got shape {w.shape}")
    c = np.cumsum(w, axis=1)
    total = c[:, -1]
    if not np.all(total > 0):
        bad = int(np.flatnonzero(~(total > 0))[0])
        raise ValueError(f"rows[{bad}] has no positive weight: nothing to draw")
    u = rng.random(w.shape[0]) * total
    y = (c <= u[:, None]).sum(axis=1)  # first index with C > u C(V-1), or V when u C rounds up to C(V-1)
    rounded = np.flatnonzero(y == w.shape[1])
    if rounded.size:  # only then can y miss the support: take the row's last token of positive weight
        y[rounded] = w.shape[1] - 1 - np.argmax(w[rounded, ::-1] > 0, axis=1)
    return y


def draw_token(dist, rng: np.random.Generator) -> int:
    """One token from a single row of weights: :func:`draw_rows` on that row.

    Parameters: ``dist`` [V] nonnegative weights; ``rng`` a ``numpy.random.Generator`` (one double).

    Returns: the token id (``int``), never one of weight 0.

    >>> import numpy as np
    >>> draw_token([0.0, 0.25, 0.0, 0.75], np.random.default_rng(1))
    3
    """
    w = np.maximum(np.asarray(dist, dtype=np.float64), 0.0)
    c = np.cumsum(w)
    if not (w.ndim == 1 and w.size and c[-1] > 0):  # draw_rows raises its error (before drawing)
        return int(draw_rows(w[None, :], rng)[0])
    # draw_rows on one row without its [N, V] broadcasting: about 3x faster on the small rows of
    # the exact step checks, which draw once per evaluated point (same uniform, same comparisons)
    y = int(np.count_nonzero(c <= rng.random(1)[0] * c[-1]))
    return y if y < w.size else int(np.flatnonzero(w > 0)[-1])
