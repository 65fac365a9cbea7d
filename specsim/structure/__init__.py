"""Draft structure: what is drafted, when drafting stops, and what an iteration costs.

The rest of ``specsim`` certifies a verifier on given drafts; this subpackage asks which drafts
to make.  :mod:`specsim.structure.cost` holds the cost model every throughput figure here is
measured in (docs/theory.md, "Draft structure").
"""
from .cost import CostModel, leviathan_speedup

__all__ = ["CostModel", "leviathan_speedup"]
