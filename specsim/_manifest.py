"""One validation for the two real-data formats: ``specsim-real-v1`` (:func:`specsim.real.load_dataset`)
and ``specsim-real-trees-v1`` (:func:`specsim.real_trees.load_trees`).

Both formats are a folder with ``manifest.json`` and one ``.npz`` file; both store probability
rows the same way (``ids``, ``vals``, ``offsets``, ``remainder``: row r keeps the token ids
``ids[offsets[r]:offsets[r+1]]``, strictly increasing in [0, V), with values vals >= 0, and a
remainder mass in [0, tail] spread over the other tokens, so that kept mass + remainder = 1) and
the prompt contexts the same way (``contexts``, ``context_offsets``).  A stored file is data, not
an argument: every problem with it is a ``ValueError`` naming the file (a field or an array of the
wrong type included), never a foreign exception (``zipfile.BadZipFile``, ``int()``'s message) and
never a silent acceptance (a NaN tail that disables the remainder check).

The checks of a single value reuse :mod:`specsim._validate`; a list of names (drafts, processes,
verifiers) goes through :func:`check_names`, where a bare string is one name.

>>> from specsim._manifest import check_names
>>> check_names("topk:2", "drafts")
('topk:2',)
>>> check_names(["a", "a"], "verifiers")
Traceback (most recent call last):
...
ValueError: verifiers: duplicate name in ('a', 'a')
"""
from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from ._validate import check_int, check_real

#: A sha256 digest as written in a manifest.
SHA256 = re.compile(r"[0-9a-f]{64}")

def check_names(values, name: str, parse: Callable | None = None, example: str = "") -> tuple[str, ...]:
    """A non-empty tuple of distinct names; a bare string is one name (never read letter by letter).

    Parameters: ``values`` (a string or an iterable of strings), ``name`` (the argument, used in
    messages), ``parse`` (called on each name; its ``ValueError`` names the bad one), ``example``
    (a valid name, shown when an entry is not a string).

    Returns: the names as a tuple; ``TypeError`` for bytes, a non-iterable or a non-string entry
    (``name[i] must be a string``), ``ValueError`` for none, a duplicate or one ``parse`` refuses.

    >>> check_names(("chain", "iid:2"), "processes")
    ('chain', 'iid:2')
    >>> check_names([3], "drafts", example="topk:20")
    Traceback (most recent call last):
    ...
    TypeError: drafts[0] must be a string such as 'topk:20', got 3
    """
    if isinstance(values, str):
        values = (values,)
    if isinstance(values, (bytes, bytearray, Mapping)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a name or a list of names, got {type(values).__name__}")
    values = tuple(values)
    for i, v in enumerate(values):
        if not isinstance(v, str):
            such = f" such as {example!r}" if example else ""
            raise TypeError(f"{name}[{i}] must be a string{such}, got {v!r}"[:400])
    if not values:
        raise ValueError(f"{name}: give at least one name")
    if len(set(values)) != len(values):
        raise ValueError(f"{name}: duplicate name in {values}"[:400])
    if parse is not None:
        for v in values:
            parse(v)
    return values


# ----------------------------------------------------------------------------------------------
# manifest fields
# ----------------------------------------------------------------------------------------------

class Fields:
    """Checks of the fields of one manifest ``m`` read from ``mpath``; each failure is a
    ``ValueError`` starting with the manifest's path and naming the field."""

    def __init__(self, m: dict, mpath: Path):
        self.m, self.mpath = m, mpath

    def bad(self, key: str, expected: str):
        raise ValueError(f"{self.mpath}: manifest field {key!r} must be {expected}, got {self.m.get(key)!r}"[:400])

    def require(self, keys) -> None:
        for key in keys:
            if key not in self.m:
                raise ValueError(f"{self.mpath}: manifest has no {key!r}")

    def _numeric(self, check, key, *bounds, **ends):
        # a wrong type in a file is a bad value: check_int/check_real's TypeError becomes a ValueError
        try:
            return check(self.m[key], f"{self.mpath}: manifest field {key!r}", *bounds, **ends)
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)[:400]) from None   # the value may be a long JSON list

    def integer(self, key: str, minimum: int) -> int:
        return self._numeric(check_int, key, minimum)

    def real(self, key: str, lo: float, hi: float, **ends) -> float:
        return self._numeric(check_real, key, lo, hi, **ends)

    def names(self, key: str, parse: Callable, what: str) -> tuple[str, ...]:
        """A list (not a bare string: a file states its lists) of distinct strings ``parse`` accepts."""
        v = self.m[key]
        if not isinstance(v, list) or not all(isinstance(d, str) for d in v):
            self.bad(key, f"a list of {what}")
        try:
            return check_names(v, key, parse)
        except ValueError as exc:
            raise ValueError(f"{self.mpath}: manifest field {key!r}: {exc}"[:400]) from None

    def common(self, fmt: str, required, parse_drafter: Callable, model_required: bool) -> tuple[int, tuple, float]:
        """The fields both formats share: the format tag, ``required`` keys, ``format_doc``,
        ``data_file`` (a plain name inside the folder), ``data_sha256``, ``V`` >= 2, ``drafts``,
        ``tail`` in [0, 1), ``prompts`` (strings or token-id lists in [0, V)), ``settings`` (a
        mapping), ``whole_below`` >= 0 when present and ``model`` (``None`` unless
        ``model_required``, or a file name with its sha256).  Returns ``(V, drafts, tail)``."""
        m = self.m
        if m.get("format") != fmt:
            raise ValueError(f"{self.mpath}: format is {m.get('format')!r}, expected {fmt!r}"[:400])
        self.require(("data_file", "data_sha256", "V", "drafts", "tail", "prompts") + tuple(required))
        if not isinstance(m.get("format_doc", ""), str):
            self.bad("format_doc", "a string")
        name = m["data_file"]
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            self.bad("data_file", "a file name in the dataset folder")
        if not isinstance(m["data_sha256"], str) or not SHA256.fullmatch(m["data_sha256"]):
            self.bad("data_sha256", "a sha256 digest (64 lowercase hex characters)")
        V = self.integer("V", 2)
        if "whole_below" in m:
            self.integer("whole_below", 0)
        drafts = self.names("drafts", parse_drafter, "draft specs")
        tail = self.real("tail", 0.0, 1.0, hi_open=True)
        prompts = m["prompts"]
        if not isinstance(prompts, list) or not prompts:
            self.bad("prompts", "a non-empty list")
        for i, s in enumerate(prompts):
            if isinstance(s, str):
                continue
            if not isinstance(s, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in s):
                raise ValueError(f"{self.mpath}: manifest prompt {i} must be a string or a list of integer token ids, "
                                 f"got {s!r}"[:400])
            if not all(0 <= t < V for t in s):
                raise ValueError(f"{self.mpath}: manifest prompt {i}: token ids must lie in [0, {V}), got {s!r}"[:400])
        if not isinstance(m.get("settings", {}), dict):
            self.bad("settings", "a mapping")
        model = m.get("model")
        if model_required and not (isinstance(model, dict) and model.get("sha256")):
            raise ValueError(f"{self.mpath}: manifest has no model hash (model.sha256)")
        if model is not None and not (isinstance(model, dict) and isinstance(model.get("file"), str)
                                      and isinstance(model.get("sha256"), str) and SHA256.fullmatch(model["sha256"])):
            self.bad("model", "null or {'file': name, 'sha256': 64 lowercase hex characters}")
        return V, drafts, tail


# ----------------------------------------------------------------------------------------------
# the data file and its arrays
# ----------------------------------------------------------------------------------------------

def data_path(m: dict, mpath: Path, sha256: Callable[[Path], str]) -> Path:
    """The manifest's data file (checked by :meth:`Fields.common`): present, with the recorded digest."""
    data = mpath.parent / m["data_file"]
    if not data.is_file():
        raise ValueError(f"{mpath}: data file {data} is missing")
    digest = sha256(data)
    if digest != m["data_sha256"]:
        raise ValueError(f"{data}: sha256 {digest} does not match the manifest's {m['data_sha256']}")
    return data


def read_arrays(data: Path, names, ints, floats) -> dict[str, np.ndarray]:
    """The arrays ``names`` of an ``.npz`` file, each 1-D, those in ``ints`` of an integer dtype and
    those in ``floats`` of a floating dtype; ``ValueError`` naming the file when it cannot be read
    (truncated, not an archive, pickled objects) or an array is missing or of the wrong kind."""
    try:
        with np.load(data, allow_pickle=False) as z:
            missing = [k for k in names if k not in z.files]
            a = {k: z[k] for k in names if k in z.files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as exc:
        raise ValueError(f"{data}: cannot read the arrays, the file is truncated or not an .npz archive "
                         f"({type(exc).__name__}: {exc})"[:400]) from None
    if missing:
        raise ValueError(f"{data}: missing arrays {missing}")
    for k in names:
        if a[k].ndim != 1:
            raise ValueError(f"{data}: array {k!r} must be 1-D, got shape {a[k].shape}")
    for k in ints:
        if a[k].dtype.kind not in "iu":
            raise ValueError(f"{data}: array {k!r} must hold integers, got {a[k].dtype}")
    for k in floats:
        if a[k].dtype.kind != "f":
            raise ValueError(f"{data}: array {k!r} must hold floating-point numbers, got {a[k].dtype}")
    return a


def check_sizes(a, data: Path, expect: Mapping[str, int]) -> None:
    for k, n in expect.items():
        if a[k].size != n:
            raise ValueError(f"{data}: array {k!r} has {a[k].size} entries, expected {n}")


def check_offsets(a, data: Path, key: str, end: str, strict: bool = True) -> None:
    """``a[key]`` starts at 0, increases (strictly: no empty item) and ends at ``len(a[end])``."""
    off = a[key]
    step = np.diff(off)
    if off.size == 0 or off[0] != 0 or off[-1] != a[end].size or np.any(step < 1 if strict else step < 0):
        how = "increase strictly" if strict else "never decrease"
        raise ValueError(f"{data}: {key!r} must start at 0, {how} and end at len({end}) = {a[end].size}")


def check_range(a, data: Path, key: str, lo: int, hi: int, what: str) -> None:
    """Every entry of ``a[key]`` in [lo, hi)."""
    x = a[key]
    out = (x < lo) | (x >= hi)
    if np.any(out):
        i = int(np.flatnonzero(out)[0])
        raise ValueError(f"{data}: {key} out of range: {what} must lie in [{lo}, {hi}), entry {i} is {x[i]!r}")


def check_rows(a, data: Path, V: int, tail: float, atol: float) -> None:
    """The stored rows (``ids``, ``vals``, ``offsets``, ``remainder``; sizes checked by the caller):
    offsets strictly increasing, ids strictly increasing per row in [0, V), kept values finite and
    >= 0 with a positive sum, remainder in [0, tail] and 0 when the row keeps every token, and
    |kept mass + remainder - 1| <= atol; so every densified row (:func:`dense_row`) is a
    probability vector."""
    check_offsets(a, data, "offsets", "ids")
    off, ids, rem = a["offsets"], a["ids"], a["remainder"]
    check_range(a, data, "ids", 0, V, "token ids")
    vals = a["vals"].astype(np.float64)
    if not np.all(np.isfinite(vals)) or np.any(vals < 0):
        raise ValueError(f"{data}: kept probabilities must be finite and >= 0")
    ok = np.isfinite(rem) & (rem >= 0) & (rem <= tail + 1e-12)
    if not np.all(ok):
        bad = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"{data}: row {bad} remainder {rem[bad]!r} outside [0, tail = {tail:g}]")
    kept = np.add.reduceat(vals, off[:-1])
    sums = kept + rem
    if np.any(np.abs(sums - 1.0) > atol):
        bad = int(np.argmax(np.abs(sums - 1.0)))
        raise ValueError(f"{data}: row {bad} kept mass + remainder = {sums[bad]!r}, not 1 (tolerance {atol:g})")
    # strictly increasing ids within each row: a step <= 0 that is not a row boundary
    inner = np.ones(max(ids.size - 1, 0), bool)
    inner[off[1:-1] - 1] = False
    bad_step = np.flatnonzero((np.diff(ids.astype(np.int64)) <= 0) & inner)
    if bad_step.size:
        bad = int(np.searchsorted(off, bad_step[0], side="right") - 1)
        raise ValueError(f"{data}: row {bad} token ids must be strictly increasing")
    full = np.flatnonzero((np.diff(off) == V) & (rem > 0))
    if full.size:
        raise ValueError(f"{data}: row {int(full[0])} keeps every token but records remainder {rem[full[0]]!r}")
    if np.any(kept <= 0):
        raise ValueError(f"{data}: row {int(np.flatnonzero(kept <= 0)[0])} keeps no probability mass")
    # with the checks above every densified row (:func:`dense_row`) is a probability vector: its
    # entries are finite and >= 0 and they sum to (1 - remainder) + remainder = 1, so the rows
    # need not be densified here (1983 rows of V = 49,152 took a second)


def dense_row(a: Mapping[str, np.ndarray], r: int, V: int) -> np.ndarray:
    """Row ``r`` as a float64 vector of length V: the kept values rescaled to 1 - remainder, the
    remainder spread uniformly over the tokens not kept."""
    lo, hi = a["offsets"][r], a["offsets"][r + 1]
    ids, vals, rem = a["ids"][lo:hi], a["vals"][lo:hi].astype(np.float64), float(a["remainder"][r])
    out = np.zeros(V)
    if ids.size < V:
        out[:] = rem / (V - ids.size)
        out[ids] = vals * ((1.0 - rem) / vals.sum())
    else:
        out[ids] = vals / vals.sum()
    return out


def check_contexts(a, data: Path, V: int) -> None:
    """The stored contexts: ``context_offsets`` strictly increasing to len(contexts) (sizes checked
    by the caller), every context token in [0, V)."""
    check_offsets(a, data, "context_offsets", "contexts")
    check_range(a, data, "contexts", 0, V, "context tokens")
