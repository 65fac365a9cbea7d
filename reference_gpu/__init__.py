"""Reference GPU implementation of speculative-decoding verification (docs/theory.md §11).

One verification step as a batched GPU operation: given drafts, draft rows q, target rows p and
the randomness as tensors, return each request's accepted prefix and its one extra token, so the
output is a deterministic function of the inputs and the Triton kernels can be checked bit for
bit against a pure-torch reference, and statistically against the exact law of
:mod:`specsim` (docs/theory.md §11.2).

``reference_gpu.api``: validated entry points (ragged and dense chain verification, tree RRS,
noise drawing); ``reference_gpu.reference``: the pure-torch semantics; ``reference_gpu.kernels``:
the Triton kernels; ``python benchmarks/verify_kernels.py``: the benchmark.  The submodules need torch
(the ``gpu`` extra); Triton is imported by the API only when a Triton backend is used.

>>> import torch
>>> from reference_gpu.api import draw_chain_noise, verify_chain
>>> p = torch.tensor([[1/3, 2/3]] * 3, dtype=torch.float64)      # docs/theory.md §12, R2/R3 toy, L = 2
>>> q = torch.tensor([[2/3, 1/3]] * 2, dtype=torch.float64)
>>> res = verify_chain(torch.tensor([1, 1]), torch.tensor([2]), target_probs=p, draft_probs=q,
...                    noise=draw_chain_noise([2], 2, seeds=[0]), mode="block", backend="torch")
>>> res.output_token_ids.tolist(), res.num_accepted.tolist()   # both drafts have p/q >= 1: kept
([[1, 1, 1]], [2])
"""
