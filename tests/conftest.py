"""Hypothesis profiles for the suite: ``ci`` (set CI=1: 30 examples, derandomised, so a run is
reproducible and bounded), ``dev`` (the default: 60 random examples) and ``campaign`` (dev with
240 examples, for scripts/hypothesis_campaign.sh), or any profile named by
SPECSIM_HYPOTHESIS_PROFILE.  SPECSIM_HYPOTHESIS_NO_DATABASE=1 (set by the campaign) turns off the
example database, so a failure is reported under the seed that drew it, not replayed under later
seeds.  Tests that pin ``max_examples`` with ``@settings`` keep their own count under every profile.
The doctest namespace is set in the root conftest.py.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("campaign", parent=settings.get_profile("dev"), max_examples=240)
_profile = "ci" if os.environ.get("CI") else os.environ.get("SPECSIM_HYPOTHESIS_PROFILE", "dev")
if os.environ.get("SPECSIM_HYPOTHESIS_NO_DATABASE"):
    settings.register_profile(_profile + "-nodb", parent=settings.get_profile(_profile), database=None)
    _profile += "-nodb"
settings.load_profile(_profile)


@pytest.fixture(scope="session")
def quick_figures(tmp_path_factory):
    """``python -m paper_figs --quick`` run once per session: (its output folder, its stdout, the
    files of the paper_figs package before and after).  The figure test checks what it wrote, and
    the docs build takes its figures from it instead of drawing them again.  Under pytest-xdist
    (``-n``) the workers share one run: the first draws, the others wait on a lock and read it."""
    pytest.importorskip("matplotlib")
    root = Path(__file__).resolve().parents[1]

    def package_files():
        return sorted(str(p.relative_to(root)) for p in (root / "paper_figs").rglob("*") if "__pycache__" not in p.parts)

    def draw(out):
        before = package_files()
        r = subprocess.run([sys.executable, "-m", "paper_figs", "--quick", "--out", str(out)], cwd=root,
                           capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(root)})
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout, before, package_files()

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # not distributed
        out = tmp_path_factory.mktemp("quick_figures")
        return (out, *draw(out))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # this session's folder, common to its workers
    out, record = shared / "quick_figures", shared / "quick_figures.json"
    with FileLock(str(shared / "quick_figures.lock")):
        if not record.is_file():  # a worker whose draw failed left no record: draw again, report its error
            out.mkdir(exist_ok=True)
            record.write_text(json.dumps(draw(out)))
    stdout, before, after = json.loads(record.read_text())
    return out, stdout, before, after
