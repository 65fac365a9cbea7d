"""Reference GPU implementation of speculative-decoding verification (docs/theory.md §11).

``reference_gpu.api``: validated entry points (ragged and dense chain verification, tree RRS,
noise drawing); ``reference_gpu.reference``: the pure-torch semantics; ``reference_gpu.kernels``:
the Triton kernels; ``python benchmarks/kernels.py``: the benchmark.  Importing this package
needs torch; Triton is imported lazily by the API.
"""
