"""Shared helpers of the verifier tests (fixtures, so no test file imports another)."""
import numpy as np
import pytest


def _outcome_table(outcomes, n_accept: int, V: int) -> np.ndarray:
    """Row k = P(accepted = k) * law of the emitted token given k: the outcome law as a table."""
    table = np.zeros((n_accept, V))
    for o in outcomes:
        table[o.accepted] += o.prob * np.asarray(o.next_dist)
    return table


@pytest.fixture(scope="session")
def outcome_table():
    """``outcome_table(outcomes, n_accept, V)`` -> [n_accept, V] array of P(accepted, token)."""
    return _outcome_table
