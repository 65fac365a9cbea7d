"""Gap tables (lp.tables): each multi-draft verifier's acceptance next to the optimum, SpecTr's rho."""
import numpy as np
from hypothesis import given, strategies as st

from lp.tables import bounds_report, gap_table, model_gap_table, spectr_rho
from specsim import random_model
from specsim.testing.strategies import distribution_pairs


def test_gap_table_rows_and_text():
    t = gap_table([0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], K_values=(1, 2, 4, 5))
    assert all(r.gap_percent >= -1e-7 for r in t.rows)
    assert any(r.name == "optimum" and not r.replacement and r.K == 4 for r in t.rows)
    assert not any(not r.replacement and r.K == 5 for r in t.rows)      # K > V: no w/o-replacement row
    text = str(t)
    assert "gap %" in text and "SpecTr K-SEQ" in text
    assert "SpecInfer RRS" in str(model_gap_table(random_model(4, 0), random_model(4, 1), (2,)))
    assert "optimum" in bounds_report(V=5, seed=2) and "optimum" in bounds_report([0.5, 0.5], [0.9, 0.1], K=2)


@given(distribution_pairs(4), st.integers(2, 3))
def test_spectr_rho_is_valid_and_in_range(pq, K):
    """rho* lies in [1, K] and is valid: p - min(q, p/rho) sum_{j<K} (1 - beta)^j >= 0."""
    p, q = pq
    rho = spectr_rho(p, q, K)
    assert 1.0 <= rho <= K
    m = np.minimum(q, p / rho)
    c = sum((1 - m.sum()) ** j for j in range(K))
    assert np.all(p - m * c >= -1e-9)
