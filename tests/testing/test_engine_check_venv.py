"""scripts/engine_check_venv.sh: the engine's throwaway venv sees the project's venv, not just the
base interpreter (what plain `python -m venv --system-site-packages` from inside a venv gives)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_engine_venv_sees_the_project_venv(tmp_path):
    proj = tmp_path / "proj"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(proj)], check=True)
    py = proj / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "e2_marker_pkg.py").write_text("X = 1\n")  # a package installed in the project's venv
    extra = tmp_path / "editable_src"
    extra.mkdir()
    (extra / "e2_editable_pkg.py").write_text("Y = 2\n")
    (site / "e2_editable.pth").write_text(f"{extra}\n")  # an editable install's .pth
    probe = "import e2_marker_pkg, e2_editable_pkg; print(e2_marker_pkg.X + e2_editable_pkg.Y)"
    naive = tmp_path / "naive"
    subprocess.run([str(py), "-m", "venv", "--without-pip", "--system-site-packages", str(naive)], check=True)
    assert subprocess.run([str(naive / "bin" / "python"), "-c", probe], capture_output=True).returncode != 0
    eng = tmp_path / "eng"
    (eng / "bin").mkdir(parents=True)  # pre-made without pip (fast): engine_venv keeps an existing venv
    subprocess.run([str(py), "-m", "venv", "--without-pip", "--system-site-packages", str(eng)], check=True)
    env = dict(os.environ, PROJECT_PYTHON=str(py))
    subprocess.run(["bash", "-c", f"source {ROOT / 'scripts' / 'engine_check_venv.sh'} && engine_venv {eng}"],
                   check=True, env=env)
    out = subprocess.run([str(eng / "bin" / "python"), "-c", probe], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "3"
