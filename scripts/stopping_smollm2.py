"""When to stop drafting on SmolLM2: fixed L vs the transformers schedule vs confidence thresholds vs
SpecDec++'s oracle rule vs a hindsight bound on the optimal stopping rule (docs/theory.md §14.6).

Data: the committed real-tree dataset (specsim/data/smollm2_trees: SmolLM2-135M-Instruct target,
drafters early_exit:24 and temperature:0.7, 6 prompts x 2 positions, depth 4).  Every stored tree,
whatever its process, contains one chain drawn from the drafter: follow the first draw at each
node (the first draw of i.i.d., without-replacement and delayed processes is a draw from q).
That gives 8 processes x 2 samples = 16 chains per (context, drafter), each with its target and
draft rows along the path.

For every chain and policy the stopping length is computed from the rows along the chain, and the
verifier's exact E[tau | x^{1:l}] + 1 (``chain_values``) gives the tokens; throughput is
E[T] / E[C] under an affine cost table (stated, not measured: a draft pass costs ``--draft``
target steps, the target call is flat in the number of query tokens).  The unit of independence
is the prompt: per-prompt sums of T and C feed a cluster-robust ratio interval (linearised,
t with G - 1 = 5 degrees of freedom), and differences against the best fixed length are paired by
prompt.

What is not possible here: the exact optimal stopping rule needs the rows of every prefix, and
only the drafted path is stored.  "hindsight" picks, per chain, the length maximising T - lambda C
with knowledge of the whole path (lambda the resulting ratio): an upper bound on every stopping
rule, optimal stopping included, so regrets against it overstate regrets against the optimum.
"cross-fitted best policy" picks, for each prompt, the best listed policy on the other five
prompts and scores it on the held-out one: a causal rule, so optimal stopping lies (in
expectation) between it and the bound.

Run: ``python scripts/stopping_smollm2.py [--verifier token|block] [--draft 0.05]``.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from scipy import stats

from specsim import real_trees
from specsim.structure import CostModel
from specsim.structure.policies import ConfidenceThreshold, FixedLength, HeuristicSchedule, SpecDecPP
from specsim.structure.stopping import chain_values, stopped_length
from specsim.verifiers import block, token


def first_draw_chain(tree):
    """(draft, p [L+1, V], q [L, V]) along the first draw of every node of a stored tree."""
    u, nodes = 0, [0]
    while tree.children[u]:
        t = tree.draws[u][0]
        u = next(c for c in tree.children[u] if tree.tokens[c] == t)
        nodes.append(u)
    draft = tuple(tree.tokens[n] for n in nodes[1:])
    return draft, tree.p[nodes], tree.q[nodes[:-1]]


def ratio_interval(T, C, groups):
    """R = sum T / sum C with a cluster-robust 95% t interval (clusters = prompts)."""
    G = np.unique(groups)
    Tg = np.array([T[groups == g].sum() for g in G])
    Cg = np.array([C[groups == g].sum() for g in G])
    R = Tg.sum() / Cg.sum()
    z = (Tg - R * Cg) / Cg.mean()
    se = np.sqrt(len(G) / (len(G) - 1) * np.sum(z ** 2)) / len(G)
    h = stats.t.ppf(0.975, len(G) - 1) * se
    return R, R - h, R + h, z


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--verifier", choices=("token", "block"), default="token")
    ap.add_argument("--draft", type=float, default=0.05, help="cost of a draft pass in target steps (default 0.05)")
    args = ap.parse_args(argv)
    verifier = {"token": token, "block": block}[args.verifier]
    cost = CostModel(draft=args.draft)
    t0 = time.perf_counter()
    ds = real_trees.load_trees(real_trees.committed_trees())
    L = int(ds.manifest["L"])
    policies = ([FixedLength(l) for l in range(1, L + 1)]
                + [ConfidenceThreshold(t) for t in (0.2, 0.4, 0.6, 0.8)]
                + [ConfidenceThreshold(t, rule="top") for t in (0.5, 0.75)]
                + [SpecDecPP(h) for h in (0.3, 0.5, 0.7, 0.9)])
    C_len = np.array([cost.iteration([1] * l, l + 1) for l in range(L + 1)])
    rows = []  # (drafter, prompt, T per policy, C per policy, T_l, A_l)
    for rec in ds:
        draft, p, q = first_draw_chain(rec.tree)
        T, A = chain_values(verifier, draft, p, q)
        lens = [stopped_length(pol, draft, p, q) for pol in policies]
        Cp = [cost.iteration([1] * (l + (1 if pol.reads_next_row and l < L else 0)), l + 1)
              for pol, l in zip(policies, lens)]
        rows.append((rec.draft, rec.prompt, np.array([T[l] for l in lens]), np.array(Cp), T, A))
    print(f"SmolLM2 stopping: {len(rows)} chains (first draws of {len(ds)} stored trees), L = {L}, "
          f"verifier {verifier.name}, cost: draft pass {args.draft:g}, target call 1 (flat), no overhead; "
          f"{time.perf_counter() - t0:.1f} s")
    print("tokens/step = E[T] per target call; tokens/time = E[T]/E[C] in plain-decoding steps (the speedup); "
          "95% intervals clustered by prompt (6 prompts, t_5)")
    for drafter in ds.manifest["drafts"]:
        sub = [r for r in rows if r[0] == drafter]
        g = np.array([r[1] for r in sub])
        Tm, Cm = np.array([r[2] for r in sub]), np.array([r[3] for r in sub])
        Tl, Al = np.array([r[4] for r in sub]), np.array([r[5] for r in sub])
        names = [pol.name + (" *" if pol.uses_target else "") for pol in policies]
        cols = [(Tm[:, i], Cm[:, i]) for i in range(len(policies))]
        # the transformers schedule: stationary length chain over 1..L with pooled A_s (docs: HeuristicSchedule)
        w = HeuristicSchedule().weights(Al[:, 1:].mean(axis=0))
        names.append("heuristic (stationary)")
        cols.append((Tl[:, 1:] @ w, np.full(len(sub), float(w @ C_len[1:]))))
        # hindsight bound: per chain argmax_l T_l - lam C_l, lam the fixed point (Dinkelbach)
        lam = 0.0
        for _ in range(100):
            pick = np.argmax(Tl - lam * C_len, axis=1)
            new = Tl[np.arange(len(sub)), pick].sum() / C_len[pick].sum()
            if abs(new - lam) < 1e-14:
                break
            lam = new
        names.append("hindsight bound")
        cols.append((Tl[np.arange(len(sub)), pick], C_len[pick]))
        # cross-fitted best policy: for each prompt, the policy (of the list above, schedule excluded)
        # with the best ratio on the other prompts, applied to that prompt -- a causal rule whose
        # choice never saw the prompt it is scored on; with the bound it brackets optimal stopping
        Tx, Cx = np.zeros(len(sub)), np.zeros(len(sub))
        chosen = []
        for gp in np.unique(g):
            out = g != gp
            best = int(np.argmax([Tm[out, i].sum() / Cm[out, i].sum() for i in range(len(policies))]))
            chosen.append(policies[best].name)
            Tx[~out], Cx[~out] = Tm[~out, best], Cm[~out, best]
        names.append("cross-fitted best policy")
        cols.append((Tx, Cx))
        results = [ratio_interval(T, C, g) for T, C in cols]
        best_fixed = int(np.argmax([r[0] for r in results[:L]]))
        top = results[names.index("hindsight bound")][0]
        print(f"\ndrafter {drafter}: {len(sub)} chains")
        print(f"{'policy':<26}{'tokens/step':>12}{'tokens/time':>13}{'95% CI':>18}{'vs best fixed':>24}"
              f"{'regret vs bound':>17}")
        zb = results[best_fixed][3]
        for name, (T, C), (R, lo, hi, z) in zip(names, cols, results):
            d = (z - zb) * 1.0
            G = len(d)
            diff = R - results[best_fixed][0]
            se = np.sqrt(G / (G - 1) * np.sum(d ** 2)) / G
            h = stats.t.ppf(0.975, G - 1) * se
            print(f"{name:<26}{T.mean():>12.4f}{R:>13.4f}   [{lo:.4f}, {hi:.4f}]   {diff:+.4f} [{diff - h:+.4f}, {diff + h:+.4f}]"
                  f"{1 - R / top:>11.2%}")
        print(f"cross-fitted choices by held-out prompt: {chosen}")
    print("\n* reads target rows (an oracle acceptance head)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
