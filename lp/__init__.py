"""Optimal acceptance bounds: LP / optimal-transport programs and their closed forms.

Submodules (import them directly; this package imports nothing heavy):

- :mod:`lp.coupling` -- maximal coupling, the multi-draft OT primal (``multidraft_lp``) and its
  exact dual bound by the sorted-prefix rule (``multidraft_bound``), docs/theory.md §3 and 6.6.
- :mod:`lp.verification` -- the information-agnostic LP over all lossless verifiers with the
  standard output format, for any draft process (chains and trees), docs/theory.md §5.
- :mod:`lp.tables` -- gap tables: each multi-draft verifier's acceptance next to the optimum.
- :mod:`lp.lossy` -- acceptance-vs-divergence frontier (separate module, another owner).
- :mod:`lp.bench` -- ``python -m lp.bench``: timings at real vocabulary sizes.

``lp`` may import :mod:`specsim`; :mod:`specsim` never imports ``lp`` or cvxpy.
"""
