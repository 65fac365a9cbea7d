"""``specsim compare`` solves its optimum row with HiGHS directly (no cvxpy import: 2-3 s), and the
direct path equals the cvxpy ladder it replaced (kept as the reference: ``solver=`` given)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lp.verification import verification_lp
from specsim.exact import check_lossless
from specsim.models import random_model
from specsim.verifiers.chain import block

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import contextlib, io, sys
from specsim.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    main(sys.argv[1:])
assert "optimum" in out.getvalue() and "not computed" not in out.getvalue(), out.getvalue()
print("cvxpy" in sys.modules)
"""


@pytest.mark.parametrize("argv", [["compare", "--model", "toy", "--L", "2"],
                                  ["compare", "--V", "3", "--L", "2", "--drafting", "iid:2"]])
def test_compare_never_imports_cvxpy(argv):
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"


def test_importing_the_cli_loads_no_solver_or_plotting_stack():
    code = ("import sys, specsim.cli\n"
            "print(sorted(m for m in ('cvxpy', 'scipy', 'torch', 'matplotlib', 'transformers', 'lp', 'numba')"
            " if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("V, L, seed", [(2, 3, 0), (3, 2, 1), (3, 3, 2)])
def test_direct_highs_equals_the_cvxpy_ladder(V, L, seed):
    pytest.importorskip("cvxpy")
    target, draft_model = random_model(V, seed), random_model(V, seed + 10)
    fast = verification_lp(target, draft_model, L)              # scipy's HiGHS, no cvxpy
    ref = verification_lp(target, draft_model, L, solver="HIGHS")   # the cvxpy ladder (before issue 27)
    assert abs(fast.value - ref.value) <= 1e-8
    # chains: the optimum is block verification's E[tau], and the LP's verifier is lossless
    assert abs(fast.value - check_lossless(block, target, draft_model, L).expected_accepted) <= 1e-8
    assert check_lossless(fast.verifier, target, draft_model, L).lossless


def test_importing_the_packages_loads_no_numba():
    """The compiled kernels (specsim._jit) are imported inside their fast paths only: importing
    numba costs ~0.2 s, which no import of the packages pays."""
    code = ("import sys, specsim, specsim.exact, specsim.verifiers, lp, lp.coupling, lp.certificates, lp.frontier\n"
            "print('numba' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
