"""Shared fixtures for the lp tests."""
import numpy as np
import pytest


@pytest.fixture(scope="session")
def llm_like_pair():
    """(p, q) = (softmax(3 z), softmax(0.8 * 3 z + e)) for z, e ~ N(0, 1) i.i.d. at V tokens: the
    LLM-like instance of ``benchmarks/lp_bounds.py``, fixed by ``seed`` (a large-V instance, not a
    randomised test: Hypothesis cannot shrink a row of 3000 tokens to anything readable)."""
    def make(V: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        logits = 3.0 * rng.standard_normal(V)
        p = np.exp(logits - logits.max())
        q = np.exp(0.8 * logits + rng.standard_normal(V))
        return p / p.sum(), q / q.sum()
    return make
