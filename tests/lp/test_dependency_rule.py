"""The dependency rule (docs/design.md): the core specsim never imports lp, cvxpy, torch, triton,
reference_gpu or specsim.real; lp may import specsim; specsim.cli imports lp only inside commands."""
import json
import subprocess
import sys

import pytest

HEAVY = ("lp", "cvxpy", "torch", "triton", "reference_gpu", "specsim.real")


def _loaded_after(statement: str) -> list[str]:
    """Modules among HEAVY (or inside them) that a fresh interpreter has loaded after ``statement``."""
    code = (f"import json, sys\n{statement}\n"
            f"heavy = {HEAVY!r}\n"
            "print(json.dumps(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in heavy))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("statement", ["import specsim", "import specsim.verifiers", "import specsim.exact",
                                       "import specsim.cli"])
def test_core_imports_nothing_heavy(statement):
    assert _loaded_after(statement) == []


def test_lp_imports_no_solver_until_a_program_is_solved():
    """``import lp.coupling, lp.frontier, ...`` loads no cvxpy: the closed forms need numpy only."""
    loaded = _loaded_after("import lp.coupling, lp.frontier, lp.certificates, lp.radius, lp.tables, "
                           "lp.verification, lp.real_tables")
    assert "cvxpy" not in loaded and "torch" not in loaded and "specsim.real" not in loaded
