"""No import cycles in ``specsim``, ``lp``, ``reference_gpu``, and every module imports on its own.

The graph is read from the source with ``ast``: every ``import`` and ``from ... import`` of a
module counts, those inside functions included (an import inside a function is how a cycle hides
from a plain ``import``), with relative imports resolved against the module's package.  An edge
goes to the module named and to each of its packages that is not a package of the importer
(importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first; the importer's own packages
are already being imported).  ``from pkg import name`` points at ``pkg.name`` when that is a
module, else at ``pkg``.  A cycle in this graph fails the test with the modules on it.

The second test imports each module in a fresh interpreter, so no module relies on another one
having been imported first.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("specsim", "lp", "reference_gpu")


def module_files(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` file under the packages."""
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _packages_of(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in its source), as described above."""
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in files else base)
        own = set(_packages_of(name))
        edges = set()
        for target in targets:
            for mod in (*_packages_of(target), target):
                if mod in files and mod != name and mod not in own:
                    edges.add(mod)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a list of modules (first = last), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state and (found := visit(v)):
                return found
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (found := visit(u)):
            return found
    return None


def test_no_import_cycle_in_the_packages():
    files = module_files(ROOT)
    assert {"specsim", "specsim.exact", "specsim.verifiers.registry", "lp.coupling", "reference_gpu.api"} <= set(files)
    graph = import_graph(files)
    assert "specsim.verifiers.base" in graph["specsim.exact"]      # the reader sees ordinary edges
    assert "specsim.verifiers" in graph["specsim.exact"]           # ... and the package an import runs
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_core_does_not_import_the_testing_suite():
    """specsim.testing sits above the core: no core module imports it, not even inside a function."""
    graph = import_graph(module_files(ROOT))
    upward = {(u, v) for u, vs in graph.items() for v in vs
              if u.startswith("specsim") and not u.startswith(("specsim.testing", "specsim.cli"))
              and v.startswith("specsim.testing")}
    assert not upward, f"core modules importing specsim.testing: {sorted(upward)}"


def test_the_reader_finds_a_cycle_closed_inside_a_function(tmp_path):
    """Negative control: a.x imports a.y at the top, a.y imports a.x inside a function (relative)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "__init__.py").write_text("")
    (tmp_path / "a" / "x.py").write_text("from .y import f\n")
    (tmp_path / "a" / "y.py").write_text("def f():\n    from . import x\n    return x\n")
    (tmp_path / "a" / "z.py").write_text("import a.x\n")
    graph = import_graph(module_files(tmp_path, ("a",)))
    assert graph["a.y"] == {"a.x"} and graph["a.z"] == {"a.x"}
    assert find_cycle(graph) in (["a.x", "a.y", "a.x"], ["a.y", "a.x", "a.y"])
    (tmp_path / "a" / "y.py").write_text("def f():\n    return 1\n")   # the cycle removed
    assert find_cycle(import_graph(module_files(tmp_path, ("a",)))) is None


def test_a_package_import_is_an_edge_to_its_init(tmp_path):
    """b/__init__ imports b.core; a.m imports b.core.f: a.m depends on b (its __init__) too."""
    for pkg, files in {"a": {"__init__.py": "", "m.py": "from b.core import f\n"},
                       "b": {"__init__.py": "from .core import f\nfrom a import m\n", "core.py": "f = 1\n"}}.items():
        (tmp_path / pkg).mkdir()
        for fname, text in files.items():
            (tmp_path / pkg / fname).write_text(text)
    graph = import_graph(module_files(tmp_path, ("a", "b")))
    assert graph["a.m"] == {"b", "b.core"} and graph["b.core"] == set()
    assert find_cycle(graph) is not None   # a.m -> b -> a.m


#: modules whose import needs an optional package (skipped when it is missing)
OPTIONAL = {"reference_gpu.kernels": "triton", "reference_gpu.api": "triton",
            "specsim.verifiers._chain_kernels": "numba", "specsim.verifiers._clip_kernels": "numba",
            "lp._race_kernels": "numba", "lp._bound_kernels": "numba",
            "specsim._kl_kernels": "numba", "specsim._validate_kernels": "numba"}

OPTIONAL["specsim._exact_kernels"] = "numba"


@pytest.mark.slow
def test_every_module_imports_alone_in_a_fresh_interpreter():
    import importlib.util

    names = [n for n in module_files(ROOT) if importlib.util.find_spec(OPTIONAL.get(n, "numpy")) is not None]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    # a few interpreters at a time: each imports one module first, then exits
    failures, running = [], []
    for name in names + [None] * 4:
        if name is not None:
            running.append((name, subprocess.Popen([sys.executable, "-c", f"import {name}"], cwd=ROOT, env=env,
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
        while len(running) >= 4 or (name is None and running):
            mod, proc = running.pop(0)
            _, err = proc.communicate(timeout=300)
            if proc.returncode:
                failures.append(f"{mod}: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}")
            if name is not None:
                break
    assert not failures, "modules that do not import on their own:\n" + "\n".join(failures)
