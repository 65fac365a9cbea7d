"""Exact evaluation of stored real draft trees (:mod:`specsim.real_trees`): per-tree E[tau], paired
comparisons with prompt-clustered intervals, the headline claims' tables.

Evaluation (:func:`evaluate_trees`) is Rao-Blackwellised: for each stored tree and verifier the
exact E[tau | tree], the verifier's own randomness integrated out by its outcome law; averages
over trees estimate E[tau] under the draft process with standard errors.  A :class:`Comparison`
pairs two verifiers on the same trees, or two processes on the same contexts (each context's
trees averaged first); its interval is a 95% t interval over prompts by default (paired
differences averaged within prompt: positions of one text are dependent), with the tree-level
interval kept beside it (:func:`claim_comparisons` collects those the headline claims need).

Example (needs nothing but the committed dataset)::

    from specsim.real_trees import committed_trees, load_trees
    from specsim.real_evaluation import evaluate_trees, format_evaluation
    print(format_evaluation(evaluate_trees(load_trees(committed_trees()))))
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._manifest import check_names
from ._validate import check_bool, check_int
from .drafts import DraftTree
from .parallel import check_workers, worker_map
from .real_trees import RealTrees, _process, committed_trees, load_trees  # noqa: F401 (the last two: doctests)
from .verifiers import TREE_VERIFIERS, verifiers_for
from .verifiers.base import Verifier
from .verifiers.chain import CHAIN_VERIFIERS

__all__ = ["VerifierSummary", "TreeEvaluation", "Comparison", "evaluate_trees", "claim_comparisons",
           "format_comparisons", "format_evaluation", "oracle_delayed"]



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
                   progress: bool | None = None, *, workers=1) -> TreeEvaluation:
    """Rao-Blackwellised block efficiency: E[tau | tree] exactly for every stored tree and verifier.

    E[tau | tree] = sum_j pi_j depth(v_j) over the verifier's outcome law on the tree, and
    P(tau >= d | tree) = sum_j pi_j [depth(v_j) >= d].  Their means over a group's trees estimate
    E[tau] and P(tau >= d) under the group's (drafter, process); block efficiency is E[tau] + 1.

    Parameters: ``ds`` (:class:`RealTrees`); ``verifiers`` (a name or a list of names; default
    every registered verifier that applies to each process, :func:`specsim.verifiers.verifiers_for`);
    ``progress``; ``workers`` (1; an int n > 1 or -1 for processes, or a map-like callable:
    :mod:`specsim.parallel`): each (group, verifier) is a task over the group's trees, and the
    summaries are the same for any number of workers.

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
    workers = check_workers(workers)
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
    groups, contexts, samples, skipped_groups, tasks = {}, {}, {}, {}, []
    for key in sorted(by_group, key=lambda k: (ds.manifest["drafts"].index(k[0]), ds.manifest["processes"].index(k[1]))):
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
        groups[key] = {}
        tasks += [(key, v, [r.tree for r in records], L) for v in vs]
    results = worker_map(workers)(_summarise, tasks)
    for (key, v, _, _), summary in zip(tasks, tqdm(results, total=len(tasks), desc="tables", unit="verifier x group",
                                                    disable=None if progress is None else not progress)):
        groups[key][v.name] = summary
    return TreeEvaluation(groups, contexts, ds.manifest, samples, skipped_groups)


def _summarise(task) -> VerifierSummary:
    """One verifier on one group's trees (a task of :func:`evaluate_trees`)."""
    _, v, trees, L = task
    per, tails = [], []
    for tree in trees:
        try:
            od = _outcome_depths(v, tree)
        except ValueError as e:
            return VerifierSummary(v.name, v.lossless, np.zeros(0), np.zeros((0, L)), str(e))
        per.append(sum(pr * d for pr, d in od))
        tails.append([sum(pr for pr, dd in od if dd >= d) for d in range(1, L + 1)])
    return VerifierSummary(v.name, v.lossless, np.asarray(per), np.asarray(tails))


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
