"""The solver ladder lp._solvers: library solves print nothing, HiGHS's C-level banner included."""
import subprocess
import sys

import pytest

pytest.importorskip("highspy")

#: The first words of the licence banner HiGHS writes to file descriptor 1 from C.
BANNER = "Running HiGHS"


def _stdout_of_fresh_process(code: str) -> str:
    """What a new interpreter running ``code`` writes to its file descriptor 1 (C output included)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_first_solve_of_a_process_prints_no_banner():
    # control: a bare Highs object in a fresh process does write the banner to fd 1, so the
    # capture below would see it
    assert BANNER in _stdout_of_fresh_process("import highspy; highspy.Highs()")
    out = _stdout_of_fresh_process(
        "import cvxpy as cp\n"
        "from lp._solvers import solve\n"
        "x = cp.Variable(2, nonneg=True)\n"
        "prob = cp.Problem(cp.Maximize(x[0] + 2 * x[1]), [cp.sum(x) == 1])\n"
        "print(solve(prob, solvers=['HIGHS']), round(float(prob.value), 6))\n"
        "import highspy; highspy.Highs()\n")   # a later Highs object stays quiet too
    assert out == "HIGHS 2.0\n"


def test_library_solve_through_a_public_function_is_quiet():
    out = _stdout_of_fresh_process(
        "from lp.verification import verification_lp\n"
        "from specsim.models import iid\n"
        "sol = verification_lp(iid([0.5, 0.3, 0.2]), iid([0.2, 0.3, 0.5]), L=1)\n")
    assert out == ""
