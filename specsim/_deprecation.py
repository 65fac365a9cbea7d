"""Keyword renames kept working for one release, with a ``DeprecationWarning``."""
from __future__ import annotations

import functools
import warnings


def renamed_keyword(old: str, new: str):
    """Decorator: accept ``old=`` as a deprecated spelling of ``new=``.

    >>> @renamed_keyword("draft", "draft_model")
    ... def f(*, draft_model):
    ...     return draft_model
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     value = f(draft=3)
    >>> value, w[0].category.__name__
    (3, 'DeprecationWarning')
    """
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{fn.__name__}() got both {old!r} (deprecated) and {new!r}")
                warnings.warn(f"{fn.__name__}(): keyword {old!r} is deprecated, use {new!r}",
                              DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)
        return inner
    return wrap
