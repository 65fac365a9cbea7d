"""Bad input to specsim.structure: each a ValueError / TypeError naming the argument."""
import numpy as np
import pytest

from specsim.models import random_model
from specsim.structure import (CostModel, optimal_budget, optimal_tree, ranked_tree, search_shapes, search_space,
                               sequoia_shape, speed_of_light)
from specsim.verifiers import TREE_VERIFIERS, specinfer

T, D = random_model(3, 0), random_model(3, 1)

CASES = [
    ("budget 0", lambda: optimal_tree(T, D, 0), ValueError, "budget"),
    ("budget float", lambda: optimal_tree(T, D, 2.0), TypeError, "budget"),
    ("budget negative, sampled", lambda: search_shapes(specinfer, T, D, -1, 2), ValueError, "budget"),
    ("cost table decreasing", lambda: CostModel(target=[1.0, 0.9]), ValueError, "non-decreasing"),
    ("cost table not positive", lambda: CostModel(target=[0.0, 1.0]), ValueError, "positive"),
    ("cost table NaN", lambda: CostModel(draft=[0.1, float("nan")]), ValueError, "positive finite"),
    ("cost not a CostModel", lambda: optimal_budget(T, D, 0.3), TypeError, "cost"),
    ("cost table too short", lambda: optimal_tree(T, D, 4, cost=CostModel(target=[1.0, 1.1])), ValueError,
     "covers 1..2"),
    ("specinfer on deterministic trees", lambda: optimal_tree(T, D, 3, specinfer), ValueError, "does not apply"),
    ("greedy_multidraft sampled", lambda: optimal_tree(T, D, 3, "greedy_multidraft", "sampled", L=2),
     ValueError, "does not apply"),
    ("chain verifier on trees", lambda: optimal_tree(T, D, 3, "token"), ValueError, "verifier"),
    ("unknown family", lambda: optimal_tree(T, D, 3, family="dynamic"), ValueError, "family"),
    ("unknown method", lambda: optimal_tree(T, D, 3, method="medusa"), ValueError, "method"),
    ("sampled without L", lambda: optimal_tree(T, D, 3, "specinfer", "sampled"), ValueError, "L"),
    ("search space too many shapes", lambda: search_shapes(specinfer, T, D, 60, 3), ValueError,
     r"search space holds \d+ shapes.*max_shapes=400.*sequoia_shape"),
    ("search space too many trees", lambda: search_shapes(specinfer, T, D, 12, 2), ValueError,
     r"search space holds \d+ shapes.*V\^12.*max_trees.*sequoia_shape"),
    ("bad mode", lambda: search_space(3, 2, mode="topk"), ValueError, "mode"),
    ("threshold negative", lambda: optimal_tree(T, D, 3, method="opt_tree", threshold=-1.0), ValueError, "threshold"),
    ("max_depth 1", lambda: optimal_tree(T, D, 3, method="opt_tree", max_depth=1), ValueError, "max_depth"),
    ("L zero", lambda: ranked_tree(T, 3, 0), ValueError, "L"),
    ("P zero", lambda: speed_of_light(T, 0, 2), ValueError, "P"),
    ("budgets empty", lambda: optimal_budget(T, D, CostModel(), budgets=()), ValueError, "budgets"),
    ("budgets string", lambda: optimal_budget(T, D, CostModel(), budgets="48"), TypeError, "budgets"),
    ("sequoia DP for gbv", lambda: sequoia_shape(T, D, 3, 2, TREE_VERIFIERS["gbv"]), ValueError, "does not apply"),
]


@pytest.mark.parametrize("name,call,exc,match", CASES, ids=[c[0] for c in CASES])
def test_bad_input(name, call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_refusal_states_the_size_and_a_fallback():
    with pytest.raises(ValueError) as info:
        search_shapes(specinfer, T, D, 60, 3)
    size = len(search_space(60, 3, specinfer))
    assert str(size) in str(info.value) and "eagle2" in str(info.value)


def test_float32_rows_stay_valid():
    from specsim.models import from_function
    rows = np.array([[0.5, 0.3, 0.2]], dtype=np.float32)
    m = from_function(lambda s: rows[0], 3)
    assert optimal_tree(m, m, 3, L=2).expected_accepted > 0
