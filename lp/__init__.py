"""Optimal acceptance bounds: LP / optimal-transport programs and their closed forms.

Submodules (import them directly; this package imports nothing heavy):

- :mod:`lp.coupling` -- maximal coupling, the multi-draft OT primal (``multidraft_lp``) and its
  exact dual bound by the sorted-prefix rule (``multidraft_bound``), docs/theory.md §3 and 6.6.
- :mod:`lp.verification` -- the information-agnostic LP over all lossless verifiers with the
  standard output format, for any draft process (chains and trees), docs/theory.md §5.
- :mod:`lp.tables` -- gap tables: each multi-draft verifier's acceptance next to the optimum.
- :mod:`lp.frontier` -- the acceptance-vs-divergence frontier beta*(eps) (closed forms, cvxpy check),
  docs/theory.md §9.
- :mod:`lp.certificates` -- exact certificates of lossy rules (one token and several), docs/theory.md §10.1.
- :mod:`lp.radius` -- deterministic relaxed acceptance rules and their acceptance radii, docs/theory.md §10.2.
- :mod:`lp.real_tables` -- the same quantities averaged over real next-token distributions.

Every public function checks its inputs once, under the input contract of docs/design.md:
probability rows may be float16, bfloat16, float32 or float64 arrays or lists, are accepted within
a dtype-aware tolerance and renormalised once in float64; numeric parameters (K, budgets, steps,
tolerances, solver names, ...) must be of the right type and in range, else ``TypeError`` or
``ValueError`` naming the argument.  Quantities of the form 1 - P with P near 1 are computed as
sums of positive terms (docs/theory.md §6.6), so peaked and subnormal rows are answered exactly.

Timings at real vocabulary sizes: ``python benchmarks/lp_bounds.py`` (outside the package).

``lp`` may import :mod:`specsim`; the core :mod:`specsim` never imports ``lp`` or cvxpy (only the
application layer, :mod:`specsim.cli`, does).
"""
