"""Issue 27 (performance at the limit): each goal's subject against its baseline, INTERLEAVED.

On a shared machine a long call is pre-empted more often than a short one and the load drifts
over a run, so every round times the baseline and each subject once, in turn, and the rows report
the medians over rounds (the ratio column is subject median / baseline median, both from this run).
The metrics add the median CPU time of this process (``cpu_s``) and its ratio (``cpu_ratio``),
which other jobs on the machine disturb less than wall time (not meaningful for goal 5, whose
work runs in child processes).

1. ``multidraft_bound`` with replacement at V = 151,936 (``--quick``: 4,096), K = 2, 3, 4, 8: the
   bucketed path (no full sort; compiled when numba is installed), its numpy path
   (``specsim._jit.disabled()``, the reference) and the previous one-sort path
   (``_sorted_prefix_bound``), all from validated rows, the input check alone (``pair_sums``:
   numpy's sum of each row, and with numba nothing more, the bound's first pass checking the signs;
   no normalised copy is made) and the public call (check included; also on the numpy path, which
   checks the signs by ``min`` and normalises first), against one ``np.argsort`` of p/q
   (goal: <= 0.3x).  Without replacement
   (K = 2, 3, 4, 8; goal: <= 1.5x): the default path (the live buckets alone,
   :func:`lp.coupling._wor_bound_head`, default step :func:`lp.coupling.auto_step`; compiled
   passes of lp/_race_kernels.py when numba is installed), the same without them (numpy path), the
   previous default (the whole row permuted into the bucketed order of
   :func:`lp.coupling._wor_bucketed_order`, then summed) and the one-sort path
   (``_sorted_prefix_bound``, same step), for a uniform draft with |error| against its exact Q_sub
   (C(|H|, K) / C(V, K)) and for the LLM-like draft with the difference between the paths.
2. First call of ``check_lossless(block, random_model(V, 1), random_model(V, 2), L)`` at V = 4,
   L = 6; V = 16, L = 4; V = 4, L = 8 (goals: 0.1 s, 1 s, 1.5 s; ``--quick``: V = 3, L = 3 and
   V = 4, L = 4), against the final pass of the certificate (C from the output law and
   max |C - P|, tables already built): the old path (one ``fn`` call and one validation per
   row), the default generator stream with level-at-once rows, the ``stream="counter"`` model,
   and a repeat call on the counter models (goal: within 3x of the final pass), with the compiled
   process law and final pass (specsim._jit, the default when numba is installed; the final pass
   is then one compiled sweep that writes |C - P|, the baseline's numpy pass bit for bit) and with
   the numpy ones, with the largest difference between the two certificates' numbers.
3. ``certify`` of each lossy rule at V = 151,936 against one ``np.sort`` of p (goal: <= 3x): the
   default (with numba: the grouped clip family, which sorts only the buckets its queries land in,
   the divergence fields chunk by chunk in L2, in one pass where out has zeros
   (lp/_fields_kernels.py), compiled KL, clip-level and
   closed-form passes), its numpy path
   (``specsim._jit.disabled()``, the reference: one sort of q/p) and the pre-issue-27
   implementation (numpy; two KL passes, full frontier points), with the largest difference of
   each from the default over the certificate's number fields.
4. ``check_step_exact`` at V = 3, L = 1, 2, 3 (``--quick``: L = 1, 2) against one call of
   ``check_lossless`` of block verification at the same size.
5. CLI start-up: ``python -c "import specsim.cli"`` and ``python -m specsim.cli --help`` in fresh
   interpreters against ``python -c pass`` (goal: <= 0.8 s), and whether ``specsim compare``
   imports cvxpy.

    python benchmarks/issue27.py [--quick] [--json out.json] [--repeats N] [--only 1,2,3,4,5]
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _harness import Run, Timing, llm_like_pair  # this folder (Python puts the script's folder on sys.path)

ROOT = Path(__file__).resolve().parents[1]


def interleaved(run: Run, case: str, baseline: tuple[str, callable], subjects: list[tuple[str, callable]],
                repeats: int, params: dict | None = None, metrics: dict | None = None) -> dict:
    """Time baseline and subjects round-robin (one warm-up round), record medians; returns the rows."""
    fns = [baseline] + subjects
    for _, fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, (_, fn) in enumerate(fns):
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
            cpu[i].append(time.process_time() - c0)
    rows = {}
    base_cpu = statistics.median(cpu[0])
    base = run.record(case, baseline[0], Timing(statistics.median(times[0]), min(times[0]), repeats, 1),
                      params=params, metrics={"cpu_s": base_cpu})
    rows[baseline[0]] = base
    for (name, _), ts, cs in zip(subjects, times[1:], cpu[1:]):
        # CPU time of this process (children excluded): less disturbed by other jobs than wall time
        m = {"cpu_s": statistics.median(cs), "cpu_ratio": statistics.median(cs) / base_cpu if base_cpu > 0 else None}
        m.update((metrics or {}).get(name) or {})
        rows[name] = run.record(case, name, Timing(statistics.median(ts), min(ts), repeats, 1), baseline=base,
                                params=params, metrics=m)
    return rows


def goal_summary(run: Run, goal: str, rows: list[dict], subject: str, limit: float) -> None:
    """Print (and keep in the JSON context) the largest wall and CPU ratio of ``subject`` over the
    goal's cases against its ``limit``."""
    mine = [r[subject] for r in rows]
    wall = max(r["ratio"] for r in mine)
    cpu = max(r["metrics"]["cpu_ratio"] for r in mine)
    verdict = "met" if wall <= limit else "NOT met"
    print(f"# goal {goal}: {subject}: max ratio {wall:.3g}x wall, {cpu:.3g}x CPU over {len(mine)} cases "
          f"(goal <= {limit:g}x wall): {verdict}", flush=True)
    run.context.setdefault("goals", {})[goal] = {"subject": subject, "max_wall_ratio": wall,
                                                 "max_cpu_ratio": cpu, "limit": limit, "met": wall <= limit}


def goal1(run: Run) -> None:
    from lp.coupling import _iid_bound_bucketed, _sorted_prefix_bound, _wor_bucketed_order, auto_step, multidraft_bound
    from specsim import _jit
    from specsim._validate import as_pair, pair_sums

    def numpy_path(f, *args):                  # the same call without the compiled kernels
        with _jit.disabled():
            return f(*args)

    def bucketed_order(p, q, K):               # the previous default without replacement
        order, valid = _wor_bucketed_order(p, q, K)
        return _sorted_prefix_bound(p, q, K, K, False, auto_step(K), order, valid)

    V = 4096 if run.quick else 151_936
    run.section(f"[1] multidraft_bound at V = {V:,} vs one argsort of p/q (goals: iid <= 0.3x, "
                "without replacement <= 1.5x at K = 2..8)")
    p, q = as_pair(*llm_like_pair(V))
    r = p / q
    argsort = ("np.argsort(p/q) (baseline)", lambda: np.argsort(r))
    iid_rows, wor_rows = [], []
    def numpy_bucketed(K):                     # the bucketed path without the compiled kernel
        with _jit.disabled():
            return _iid_bound_bucketed(p, q, K)

    for K in (2, 3, 4, 8):
        new, old = _iid_bound_bucketed(p, q, K), _sorted_prefix_bound(p, q, K, K, True, 0.25)
        ref = numpy_bucketed(K)
        iid_rows.append(interleaved(run, f"V={V}, K={K}, iid", argsort,
                    [("bucketed (new)", lambda K=K: _iid_bound_bucketed(p, q, K)),
                     ("bucketed, numpy (reference)", lambda K=K: numpy_bucketed(K)),
                     ("one sort (old)", lambda K=K: _sorted_prefix_bound(p, q, K, K, True, 0.25)),
                     ("pair_sums (its check, compiled path)", lambda: pair_sums(p, q, signs=False)),
                     ("multidraft_bound (public)", lambda K=K: multidraft_bound(p, q, K)),
                     ("multidraft_bound (public), numpy path", lambda K=K: numpy_path(multidraft_bound, p, q, K))],
                    run.repeats, params={"V": V, "K": K, "replacement": True},
                    metrics={"bucketed (new)": {"alpha": new.value, "abs_diff_old": abs(new.value - old.value),
                                                "abs_diff_numpy": abs(new.value - ref.value)}}))
    goal_summary(run, "1 (with replacement)", iid_rows, "multidraft_bound (public)", 0.3)
    # without replacement: uniform draft, where Q_sub is known exactly
    qu = np.full(V, 1.0 / V)
    Pc = np.concatenate(([0.0], np.cumsum(np.sort(p))))
    h = np.arange(V + 1, dtype=np.float64)
    for K in (2, 3, 4, 8):
        qsub = np.ones(V + 1)
        for j in range(K):
            qsub *= np.maximum(h - j, 0.0) / (V - j)
        exact = float(np.min(Pc + 1.0 - qsub))
        with _jit.disabled():
            err_numpy = abs(multidraft_bound(p, qu, K, False).value - exact)
        err = {"multidraft_bound (new)": abs(multidraft_bound(p, qu, K, False).value - exact),
               "multidraft_bound, numpy path": err_numpy,
               "bucketed order (previous)": abs(bucketed_order(p, qu, K).value - exact),
               "one sort (old)": abs(_sorted_prefix_bound(p, qu, K, K, False, auto_step(K)).value - exact)}
        wor_rows.append(interleaved(
            run, f"V={V}, K={K}, w/o repl., uniform q", argsort,
            [("multidraft_bound (new)", lambda K=K: multidraft_bound(p, qu, K, False)),
             ("multidraft_bound, numpy path", lambda K=K: numpy_path(multidraft_bound, p, qu, K, False)),
             ("bucketed order (previous)", lambda K=K: bucketed_order(p, qu, K)),
             ("one sort (old)", lambda K=K: _sorted_prefix_bound(p, qu, K, K, False, auto_step(K)))],
            max(1, run.repeats // 2), params={"V": V, "K": K, "replacement": False, "draft": "uniform"},
            metrics={k: {"abs_err": v} for k, v in err.items()}))
    for K in (2, 3, 4, 8):                     # the LLM-like draft: new path against the old one
        new, old = multidraft_bound(p, q, K, False), _sorted_prefix_bound(p, q, K, K, False, auto_step(K))
        prev = bucketed_order(p, q, K)
        ref = numpy_path(multidraft_bound, p, q, K, False)
        wor_rows.append(interleaved(
            run, f"V={V}, K={K}, w/o repl., LLM-like q", argsort,
            [("multidraft_bound (new)", lambda K=K: multidraft_bound(p, q, K, False)),
             ("multidraft_bound, numpy path", lambda K=K: numpy_path(multidraft_bound, p, q, K, False)),
             ("bucketed order (previous)", lambda K=K: bucketed_order(p, q, K)),
             ("one sort (old)", lambda K=K: _sorted_prefix_bound(p, q, K, K, False, auto_step(K)))],
            max(1, run.repeats // 2), params={"V": V, "K": K, "replacement": False, "draft": "llm-like"},
            metrics={"multidraft_bound (new)": {"alpha": new.value, "abs_diff_old": abs(new.value - old.value),
                                                "abs_diff_previous": abs(new.value - prev.value),
                                                "abs_diff_numpy_path": abs(new.value - ref.value)}}))
    goal_summary(run, "1 (without replacement)", wor_rows, "multidraft_bound (new)", 1.5)


def goal2(run: Run) -> None:
    from specsim import _jit
    from specsim.exact import check_lossless, completed_law, output_law
    from specsim.models import Model, random_model
    from specsim.verifiers.chain import block

    sizes = ((3, 3), (4, 4)) if run.quick else ((4, 6), (16, 4), (4, 8))
    goal = {(4, 6): 0.1, (16, 4): 1.0, (4, 8): 1.5}
    run.section("[2] exact chain certificate, first call with random_model, vs its final pass "
                "(goals: 0.1 s / 1 s / 1.5 s; repeat call <= 3x the final pass)")

    def per_row(m):  # the pre-issue-27 path: the same rows through fn, one call and one validation each
        return Model(m._fn, m.V, m.name)

    def numpy_law(f, *args):                   # the process law without the compiled kernel
        with _jit.disabled():
            return f(*args)

    def cert(t, d, L):
        c = check_lossless(block, t, d, L)
        return c.max_abs_error, c.block_efficiency, c.worst_sequence

    rows = []
    for V, L in sizes:
        tc, dc = random_model(V, 1, stream="counter"), random_model(V, 2, stream="counter")
        law = output_law(block, tc, dc, L)
        check_lossless(block, tc, dc, L)

        def final_pass():
            C, P = completed_law(law, tc)
            return float(np.abs(C - P).max())

        same = cert(random_model(V, 1), random_model(V, 2), L) == cert(per_row(random_model(V, 1)),
                                                                      per_row(random_model(V, 2)), L)
        fast, ref = cert(tc, dc, L), numpy_law(cert, tc, dc, L)
        diff = max(abs(fast[0] - ref[0]), abs(fast[1] - ref[1]))  # compiled vs numpy law: rounding only
        subjects = [("first call, per-row rows (old path)",
                     lambda: cert(per_row(random_model(V, 1)), per_row(random_model(V, 2)), L)),
                    ("first call, generator stream (default)", lambda: cert(random_model(V, 1), random_model(V, 2), L)),
                    ("first call, counter stream", lambda: cert(random_model(V, 1, stream="counter"),
                                                                random_model(V, 2, stream="counter"), L)),
                    ("repeat call (counter stream)", lambda: cert(tc, dc, L)),
                    ("repeat call, numpy law", lambda: numpy_law(cert, tc, dc, L))]
        rows.append(interleaved(run, f"V={V}, L={L}", ("final pass (baseline)", final_pass), subjects,
                                max(1, run.repeats // 2), params={"V": V, "L": L},
                                metrics={"first call, generator stream (default)": {"same_certificate_as_per_row": same},
                                         "first call, counter stream": {"goal_s": goal.get((V, L))},
                                         "repeat call (counter stream)": {"max_field_diff_numpy": diff}}))
    if not run.quick:  # the goal is set at these sizes; at --quick's a call is mostly fixed overhead
        goal_summary(run, "2 (repeat call)", rows, "repeat call (counter stream)", 3.0)


def goal3(run: Run) -> None:
    from lp.certificates import certify
    from specsim import _jit
    from specsim.verifiers.lossy import (cactus, consultant_standin, ensemble, fuzzy, lenience, margin_standin,
                                         mentored, topk_accept, typical)
    if str(ROOT) not in sys.path:               # the frozen reference lives with the tests
        sys.path.insert(0, str(ROOT))
    from tests.lp.certify_reference import certify_reference

    def old_certify(rule, p, q):                # the pre-issue-27 certify (fields as before; numpy)
        with _jit.disabled():
            ref = certify_reference(rule, p, q)
        return tuple(ref[f] for f in ("beta", "kl_out_p", "kl_p_out", "tv", "frontier_tv", "frontier_kl",
                                      "frontier_kl_reverse"))

    def field_diff(c, o):                       # max |new - old| over the certificate's number fields
        new = (c.beta, c.kl_out_p, c.kl_p_out, c.tv, c.frontier_tv, c.frontier_kl, c.frontier_kl_reverse)
        return max(0.0 if a == b else abs(a - b) for a, b in zip(new, o))

    V = 4096 if run.quick else 151_936
    run.section(f"[3] certify at V = {V:,} vs one np.sort of p (goal: <= 3x)")
    p, q = llm_like_pair(V, draft_weight=1.0)
    rules = (("typical", typical()), ("lenience 0.8", lenience(0.8)), ("mentored 0.6", mentored(0.6)),
             ("cactus 0.05", cactus(0.05)), ("topk_accept 10", topk_accept(10)),
             ("fuzzy 0.3 js_released", fuzzy(0.3)), ("ensemble 0.6 geometric", ensemble(0.6, "geometric")),
             ("margin_standin 0.5", margin_standin(0.5)), ("consultant_standin 1e-4", consultant_standin(1e-4)))
    def numpy_certify(rule, p, q):             # the same function without the compiled kernels
        with _jit.disabled():
            return certify(rule, p, q)

    def fields(c):
        return (c.beta, c.kl_out_p, c.kl_p_out, c.tv, c.frontier_tv, c.frontier_kl, c.frontier_kl_reverse)

    rows = []
    for name, rule in rules:
        c, o, nc = certify(rule, p, q), old_certify(rule, p, q), numpy_certify(rule, p, q)
        rows.append(interleaved(run, f"V={V}, {name}", ("np.sort(p) (baseline)", lambda: np.sort(p)),
                    [("certify (new)", lambda rule=rule: certify(rule, p, q)),
                     ("certify, numpy path", lambda rule=rule: numpy_certify(rule, p, q)),
                     ("certify (old)", lambda rule=rule: old_certify(rule, p, q))],
                    run.repeats, params={"V": V, "rule": name, "compiled": _jit.enabled()},
                    metrics={"certify (new)": {"beta": c.beta, "max_field_diff_old": field_diff(c, o),
                                               "max_field_diff_numpy_path": field_diff(c, fields(nc))}}))
    goal_summary(run, "3", rows, "certify (new)", 3.0)


def goal4(run: Run) -> None:
    from specsim.exact import check_lossless
    from specsim.models import random_model
    from specsim.testing import check_step_exact, step_from_verifier
    from specsim.verifiers.chain import block

    run.section("[4] check_step_exact at V = 3 vs check_lossless(block) at the same size (goal: L = 3 <= 5 s)")
    target, draft_model = random_model(3, 1), random_model(3, 2)
    for L in (1, 2) if run.quick else (1, 2, 3):
        interleaved(run, f"V=3, L={L}", ("check_lossless(block) (baseline)",
                                         lambda L=L: check_lossless(block, target, draft_model, L)),
                    [("check_step_exact(block)", lambda L=L: check_step_exact(
                        step_from_verifier(block, L=L), target, draft_model, n_uniforms=2 * L + 1, max_tokens=L + 1))],
                    1 if L == 3 else max(1, run.repeats // 2), params={"V": 3, "L": L})


def _python(code: str, *flags: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *flags, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def goal5(run: Run) -> None:
    run.section("[5] CLI start-up in a fresh interpreter vs python -c pass (goal: <= 0.8 s)")
    cases = [("python -c pass (baseline)", lambda: _python("pass")),
             ("import numpy (the floor)", lambda: _python("import numpy")),
             ("import specsim.cli", lambda: _python("import specsim.cli")),
             ("specsim --help", lambda: _python("import sys; sys.argv = ['specsim', '--help']\n"
                                                "from specsim.cli import main\n"
                                                "try:\n    main()\nexcept SystemExit:\n    pass"))]
    probe = ("import sys\nsys.argv = ['specsim', 'compare']\nimport contextlib, io\n"
             "from specsim.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
             "    try:\n        main()\n    except SystemExit:\n        pass\n"
             "print('cvxpy' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    cvx = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else "error"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True)
    compare_s = time.perf_counter() - t0
    interleaved(run, "start-up", cases[0], cases[1:], max(3, run.repeats),
                metrics={"specsim --help": {"compare_imports_cvxpy": cvx, "compare_wall_s": compare_s}})
    for row in run.rows[-3:]:
        row["metrics"]["under_0.8s"] = row["median_s"] <= 0.8       # (in the JSON; the table printed first)


def main(argv=None) -> dict:
    run = Run(__file__, __doc__, argv, repeats=7, quick_repeats=2,
              add_arguments=lambda ap: ap.add_argument("--only", default="1,2,3,4,5",
                                                       help="comma-separated goals to run (default 1,2,3,4,5)"))
    run.banner(interleaved=True)
    goals = {g.strip() for g in run.args.only.split(",")}
    for g, fn in (("1", goal1), ("2", goal2), ("3", goal3), ("4", goal4), ("5", goal5)):
        if g in goals:
            fn(run)
    return run.finish()


if __name__ == "__main__":
    main()
