"""The exact engine's output law as one buffer (:func:`specsim.exact.output_law` allocates it).

``emitted[m]``, the law of the emitted strings of length m = 1..L+1, are consecutive views of one
zeroed float64 array, so compiled passes (block verification's process law, the final pass of
:func:`specsim.exact.check_lossless`) take the whole law as one argument and write it in place.
Its own module: the engine and the verifiers both read it, and neither imports the other's
module for it.

>>> law = EmittedLaw(2, 1)
>>> sorted(law), law.flat.size, flat_law(law) is law.flat, flat_law(dict(law))
([1, 2], 6, True, None)
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["EmittedLaw", "flat_law", "law_bounds"]


class EmittedLaw(dict):
    """``{m: zeros(V**m)}`` for m = 1..L+1, the arrays consecutive views of ``flat``."""

    def __init__(self, V: int, L: int):
        bounds = law_bounds(V, L)
        self.flat = flat = np.zeros(bounds[-1][1])
        self.views = tuple(flat[a:b] for a, b in bounds)
        super().__init__(zip(range(1, L + 2), self.views))

    def __reduce__(self):
        # copies and pickles are plain dicts of the arrays: the buffer is not written twice
        return dict, (dict(self),)


@functools.lru_cache(maxsize=64)
def law_bounds(V: int, L: int) -> tuple[tuple[int, int], ...]:
    """(start, end) of ``emitted[m]`` in an :class:`EmittedLaw`'s buffer, m = 1..L+1."""
    ends = [0]
    for m in range(1, L + 2):
        ends.append(ends[-1] + V ** m)
    return tuple(zip(ends, ends[1:]))


def flat_law(emitted) -> np.ndarray | None:
    """The buffer behind an :class:`EmittedLaw` whose entries are still its own views; None for
    any other mapping, or once an entry was replaced (a copied or unpickled law owns new arrays)."""
    if type(emitted) is not EmittedLaw or len(emitted) != len(emitted.views):
        return None
    flat = emitted.flat
    for m, view in enumerate(emitted.views, 1):
        if emitted.get(m) is not view or view.base is not flat:
            return None
    return flat
