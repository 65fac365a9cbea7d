"""scripts/stopping_smollm2.py's pieces: the first-draw chain of a stored tree is a chain of the
drafter with consistent rows, and the prompt-clustered ratio interval is the ratio of sums."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("stopping_smollm2", ROOT / "scripts" / "stopping_smollm2.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_first_draw_chain_follows_the_first_draws(script):
    from specsim import real_trees
    from specsim.structure.stopping import chain_values
    from specsim.verifiers import token

    ds = real_trees.load_trees(real_trees.committed_trees())
    for n in (0, 100, 383):
        tree = ds[n].tree
        draft, p, q = script.first_draw_chain(tree)
        assert len(draft) == ds.manifest["L"] and p.shape[0] == len(draft) + 1 and q.shape[0] == len(draft)
        assert draft[0] == tree.draws[0][0] and all(q[i, t] > 0 for i, t in enumerate(draft))
        T, A = chain_values(token, draft, p, q)
        assert T[0] == 1.0 and np.all(np.diff(T) >= -1e-12) and np.all(np.diff(A) <= 1e-12)


def test_ratio_interval_is_the_ratio_of_sums_with_a_symmetric_interval(script):
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(6), 5)
    T, C = rng.uniform(1, 3, 30), rng.uniform(1, 1.2, 30)
    R, lo, hi, z = script.ratio_interval(T, C, groups)
    assert R == pytest.approx(T.sum() / C.sum()) and lo < R < hi and (R - lo) == pytest.approx(hi - R)
    assert z.sum() == pytest.approx(0.0, abs=1e-12)
    R2, lo2, hi2, _ = script.ratio_interval(2 * C, C, groups)      # every cluster at ratio 2: no spread
    assert R2 == pytest.approx(2.0) and hi2 - lo2 == pytest.approx(0.0, abs=1e-12)
