#!/usr/bin/env bash
# Source me: engine_venv DIR  -> a throwaway venv at DIR that sees the *project's* environment.
# `python -m venv --system-site-packages` run from inside a venv links the base interpreter's
# site-packages, not the venv's (the project's specsim, torch, transformers would be invisible).
# So the new venv gets a .pth that adds the project interpreter's site-packages as a site dir
# (processing their own .pth files, editable installs included).  PROJECT_PYTHON: the project's
# interpreter (default: the `python` on PATH).
engine_venv() {
  local dir="$1" py="${PROJECT_PYTHON:-python}"
  [ -x "$dir/bin/python" ] || "$py" -m venv --system-site-packages "$dir"
  local site
  site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$py" - "$site/_specsim_project_env.pth" <<'PY'
import site, sys, sysconfig
dirs = [d for d in dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                  *site.getsitepackages()])]
with open(sys.argv[1], "w") as f:
    f.write("import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs) + "\n")
PY
}
