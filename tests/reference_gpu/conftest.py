"""Shared set-up of the reference_gpu tests: the Triton interpreter, the device, batch strategies.

Without CUDA the kernels run under Triton's CPU interpreter, which must be switched on
(``TRITON_INTERPRET=1``) before ``triton.jit`` runs, i.e. before ``reference_gpu.kernels`` is
imported.  pytest imports this conftest before any test module of the folder, so it is set here;
the folder is skipped when torch (an optional dependency, the ``gpu`` extra) is not installed.

Test modules get their helpers from the session fixture ``kit`` (a :class:`Kit`): Hypothesis
strategies for ragged chain and tree batches, built from :mod:`specsim.testing.strategies` rows
so failures shrink to readable rows, the comparison ``same`` and the dense sampler adapter used
with :func:`specsim.testing.check_sampler`.  Draw from the strategies with ``st.data()``.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from hypothesis import strategies as st

from specsim.testing.strategies import distribution_pairs, distributions

if importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["test_*.py"]
    torch = None
else:
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

#: Relations of a draft row to its target row used by the batch strategies (see distribution_pairs).
RELATIONS = ("independent", "equal", "disjoint")


def _as_strategy(x):
    return x if isinstance(x, st.SearchStrategy) else st.just(x)


class Kit:
    """Helpers shared by the reference_gpu test modules (reached through the ``kit`` fixture)."""

    def __init__(self):
        self.device = "cuda" if torch.cuda.is_available() else "cpu"

    def tensor(self, rows, dtype):
        return torch.tensor(np.asarray(rows), dtype=dtype, device=self.device)

    def chain_batches(self, V, lens, relation="independent", onehot_draft=False, dtype=None):
        """Ragged chain batches (ids int32[N], cu int32[B], q [N, V] or None, p [N + B, V]).

        Every position gets its own target row from ``distributions`` (zeros, ties, near one-hot,
        generic), the draft row related to it by ``relation`` (``distribution_pairs``); the drafted
        token is drawn from the support of q, or from all of 0..V-1 for one-hot drafts (q = None).
        ``V``, ``lens``, ``relation``, ``onehot_draft``, ``dtype``: values or strategies.
        """
        @st.composite
        def build(draw):
            v, ls = draw(_as_strategy(V)), draw(_as_strategy(lens))
            rel, onehot = draw(_as_strategy(relation)), draw(_as_strategy(onehot_draft))
            dt = draw(_as_strategy(dtype if dtype is not None else torch.float32))
            P, Q, ids = [], [], []
            for L in ls:
                for _ in range(L):
                    p, q = draw(distribution_pairs(v, relations=(rel,)))
                    P.append(p)
                    Q.append(q)
                    ids.append(draw(st.integers(0, v - 1)) if onehot
                               else draw(st.sampled_from(np.flatnonzero(q > 0).tolist())))
                P.append(draw(distributions(v)))  # the bonus row
            N = sum(ls)
            q_t = None if onehot else self.tensor(np.array(Q).reshape(N, v), dt)
            return (self.tensor(ids, torch.int32), self.tensor(np.cumsum(ls), torch.int32), q_t,
                    self.tensor(np.array(P).reshape(N + len(ls), v), dt))
        return build()

    def tree_batches(self, V, shapes, dtype=None):
        """Ragged tree batches (tokens, parent, cu int32, p [M, V], q [M, V]) for parent lists
        ``shapes``; each child's token is drawn from the support of its parent's q row."""
        @st.composite
        def build(draw):
            v, par_lists = draw(_as_strategy(V)), draw(_as_strategy(shapes))
            dt = draw(_as_strategy(dtype if dtype is not None else torch.float32))
            toks, pars, P, Q = [], [], [], []
            for par in par_lists:
                base = len(toks)
                for c, pa in enumerate(par):
                    P.append(draw(distributions(v)))
                    Q.append(draw(distributions(v)))
                    pars.append(pa)
                    toks.append(-1 if c == 0 else draw(st.sampled_from(np.flatnonzero(Q[base + pa] > 0).tolist())))
            cu = np.cumsum([len(s) for s in par_lists])
            return (self.tensor(toks, torch.int32), self.tensor(pars, torch.int32), self.tensor(cu, torch.int32),
                    self.tensor(P, dt), self.tensor(Q, dt))
        return build()

    @staticmethod
    def parent_lists(max_nodes=6):
        """Parent lists of trees with 1..max_nodes nodes, parents before children."""
        @st.composite
        def build(draw):
            n = draw(st.integers(1, max_nodes))
            return [-1] + [draw(st.integers(0, c - 1)) for c in range(1, n)]
        return build()

    @staticmethod
    def same(a, b) -> bool:
        """Two kernel results are equal field by field, bit for bit."""
        return all(torch.equal(x, y) for x, y in zip(vars(a).values(), vars(b).values()))

    def dense_sampler(self, mode, backend, onehot_draft=False):
        """``fn(draft_ids, draft_probs, target_probs, generator) -> (tau, token)`` for
        :func:`specsim.testing.torch_batch_sampler`: ``reference_gpu.api.verify_chain_dense`` with
        per-request noise from ``draw_chain_noise`` seeded by the generator (``onehot_draft``: the
        kernel is told the draft is deterministic, ``draft_probs=None``)."""
        from reference_gpu import api

        def fn(draft_ids, draft_probs, target_probs, generator):
            B, L = draft_ids.shape
            noise = api.draw_chain_noise([L] * B, target_probs.shape[2], generator=generator, device=self.device)
            r = api.verify_chain_dense(draft_ids.to(self.device), target_probs=target_probs.to(self.device),
                                       draft_probs=None if onehot_draft else draft_probs.to(self.device), noise=noise,
                                       mode=mode, backend=backend)
            tau = r.num_accepted.to(torch.int64)
            return tau.cpu(), r.output_token_ids.to(torch.int64)[torch.arange(B), tau].cpu()

        fn.__name__ = f"verify_chain_dense[{mode}, {backend}{', one-hot draft' if onehot_draft else ''}]"
        return fn


@pytest.fixture(scope="session")
def kit() -> Kit:
    return Kit()


@pytest.fixture(scope="session")
def device(kit) -> str:
    return kit.device
