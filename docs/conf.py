"""Sphinx configuration for the specsim site.

Build (warnings are errors, as in CI)::

    python -m sphinx -W -b html docs docs/_build/html

The Markdown pages (theory.md, design.md, guide/*.md, results/*.md and any docs/*.md a later
change adds) are read by MyST as they are.  Three kinds of page are generated at build time into
``docs/_generated/`` (git-ignored), so they cannot go stale:

* the API reference: one page per public module that defines ``__all__`` (found by walking the
  packages), listing exactly those names through autosummary;
* the figure gallery: ``python -m paper_figs --quick`` runs during the build and each figure is
  shown with the caption its module writes (``SPECSIM_DOCS_FULL_FIGS=1`` for full sizes;
  ``SPECSIM_DOCS_FIGS_DIR=DIR`` takes figures that command already drew into DIR, as the test
  suite does to draw them once);
* the notebook pages: each ``notebooks/*.py`` with its source;
* the benchmark tables: each run committed as ``docs/results/benchmarks/NAME.json`` (the
  ``--json`` output of ``benchmarks/NAME.py``), rendered by the harness.
"""
from __future__ import annotations

import html
import importlib
import inspect
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
GENERATED = DOCS / "_generated"
sys.path.insert(0, str(ROOT))        # document this checkout, not whatever is installed

import specsim  # noqa: E402

project = "specsim"
author = "the specsim authors"
copyright = "2026, the specsim authors (MIT licence)"
version = release = specsim.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
    "numpydoc",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "_generated/figs/*.txt"]
root_doc = "index"

# MyST: heading anchors (theory.md's "## §6.3 ..." headings get stable slugs), tables, deflists.
myst_heading_anchors = 4
myst_enable_extensions = ["deflist", "colon_fence"]
# The pages link to source files of the repository (../../specsim/x.py); those are not documents.
suppress_warnings = ["myst.xref_missing"]

autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_mock_imports = ["triton", "vllm", "flashinfer", "sgl_kernel"]
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

html_theme = "furo" if importlib.util.find_spec("furo") else "alabaster"
html_title = f"specsim {release}"
html_static_path: list[str] = []

# --------------------------------------------------------------------------- the API reference
PACKAGES = ("specsim", "lp", "reference_gpu")
# Modules whose import needs an optional extra that may be absent; they are skipped with a note.
_SKIPPED: dict[str, str] = {}


def public_modules() -> list[str]:
    """Every importable public module of the packages that defines ``__all__`` (sorted)."""
    found = []
    for pkg in PACKAGES:
        names = [pkg] + [m.name for m in pkgutil.walk_packages([str(ROOT / pkg)], prefix=pkg + ".")]
        for name in names:
            if any(part.startswith("_") for part in name.split(".")) or name.endswith(("__main__", ".plugin")):
                continue
            try:
                mod = importlib.import_module(name)
            except Exception as err:          # an extra not installed: say so on the index page
                _SKIPPED[name] = f"{type(err).__name__}: {err}"
                continue
            if getattr(mod, "__all__", None):
                found.append(name)
    return sorted(set(found))


def _class_homes(modules: list[str]) -> dict[int, str]:
    """Each class exported by several documented modules gets one page: the shortest module name
    (the public front, e.g. ``specsim.Outcome`` over ``specsim.verifiers.Outcome``).  Functions may
    appear on several pages; a class documented twice is a duplicate-object warning."""
    homes: dict[int, str] = {}
    for m in sorted(modules, key=lambda m: (m.count("."), m)):
        mod = importlib.import_module(m)
        for n in mod.__all__:
            obj = getattr(mod, n, None)
            if isinstance(obj, type):
                homes.setdefault(id(obj), f"{m}.{n}")
    return homes


def write_api_pages() -> None:
    out = GENERATED / "api"
    out.mkdir(parents=True, exist_ok=True)
    modules = public_modules()
    homes = _class_homes(modules)
    index = ["API reference", "=============", "",
             "One page per public module; each lists the names in the module's ``__all__``.", "",
             ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   {m}" for m in modules]
    if _SKIPPED:
        index += ["", "Not documented in this build (an optional extra is missing):", ""]
        index += [f"* ``{m}``: {why}" for m, why in sorted(_SKIPPED.items())]
    _write(out / "index.rst", "\n".join(index) + "\n")
    for m in modules:
        mod = importlib.import_module(m)
        names = sorted(mod.__all__)
        elsewhere = {n: homes[id(getattr(mod, n))] for n in names if isinstance(getattr(mod, n, None), type)
                     and homes[id(getattr(mod, n))] != f"{m}.{n}"}
        here = [n for n in names if n not in elsewhere and not inspect.ismodule(getattr(mod, n, None))]
        # one page per module with its names documented inline (a page per name made ~600 pages,
        # and the theme's navigation tree, rebuilt for every page, took most of a 5-minute build)
        lines = [m, "=" * len(m), "", f".. automodule:: {m}", "   :no-members:", "",
                 f".. currentmodule:: {m}", "", ".. autosummary::", ""]
        lines += [f"   {n}" for n in here]
        if elsewhere:
            lines += ["", "Also exported here, documented on their first page: "
                      + ", ".join(f":class:`{n} <{home}>`" for n, home in sorted(elsewhere.items())) + "."]
        for n in here:
            obj = getattr(mod, n)
            kind = "autoclass" if inspect.isclass(obj) else "autofunction" if callable(obj) else "autodata"
            lines += ["", f".. {kind}:: {n}"] + (["   :members:"] if kind == "autoclass" else [])
        _write(out / f"{m}.rst", "\n".join(lines) + "\n")


# --------------------------------------------------------------------------- gallery and notebooks
def write_gallery() -> None:
    from paper_figs import FIGURES

    figs = GENERATED / "figs"
    figs.mkdir(parents=True, exist_ok=True)
    quick = not os.environ.get("SPECSIM_DOCS_FULL_FIGS")
    drawn = os.environ.get("SPECSIM_DOCS_FIGS_DIR")   # figures already drawn by the same command
    start = time.perf_counter()
    if drawn:
        for f in Path(drawn).iterdir():
            if f.suffix in (".png", ".txt"):
                shutil.copyfile(f, figs / f.name)
        when = "just before this build (taken from ``SPECSIM_DOCS_FIGS_DIR``)"
    else:
        cmd = [sys.executable, "-m", "paper_figs", "--out", str(figs)] + (["--quick"] if quick else [])
        subprocess.run(cmd, cwd=ROOT, check=True, env={**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"},
                       capture_output=True, text=True)
        when = f"while this site was built ({time.perf_counter() - start:.0f} s)"
    size = "quick sizes (``--quick``)" if quick else "full sizes"
    lines = ["Gallery", "=======", "",
             f"Every figure below was drawn {when}, at {size}, by "
             f"``python -m paper_figs{' --quick' if quick else ''}``.  "
             "Each is exact (enumeration or closed form) unless its "
             "caption says otherwise; the caption is the one its module writes.  "
             "``python -m paper_figs --only NAME`` redraws one figure at full size into ``paper_figs_out/``.", ""]
    for name in FIGURES:
        caption = (figs / f"{name}.txt").read_text(encoding="utf-8").strip() if (figs / f"{name}.txt").exists() else ""
        lines += [name, "-" * len(name), ""]
        if (figs / f"{name}.png").exists():
            lines += [f".. image:: figs/{name}.png", f"   :alt: {name}", "   :width: 100%", ""]
        # the caption as written (plain text with math), escaped into a wrapped paragraph
        text = html.escape(caption or "(no caption written)").replace("\n\n", "</p><p>")
        lines += [".. raw:: html", "", f'   <div class="caption"><p>{" ".join(text.split())}</p></div>', ""]
    _write(GENERATED / "gallery.rst", "\n".join(lines) + "\n")


def write_notebook_pages() -> None:
    out = GENERATED / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    books = sorted((ROOT / "notebooks").glob("*.py"))
    index = ["Notebooks", "=========", "",
             "Percent-format notebooks (jupytext): open them in JupyterLab after "
             "``pip install -e \".[notebooks]\"``; CI executes each one at small sizes "
             "(``SPECSIM_QUICK=1``).  Their sources:", "", ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   {p.stem}" for p in books]
    _write(out / "index.rst", "\n".join(index) + "\n")
    for p in books:
        title = f"notebooks/{p.name}"
        _write(out / f"{p.stem}.rst", "\n".join([title, "=" * len(title), "",
                                               f".. literalinclude:: ../../../notebooks/{p.name}",
                                               "   :language: python", ""]) + "\n")


# --------------------------------------------------------------------------- plain-text docstrings
# The docstrings are written as plain text with math (|C(z) - P(z)|, displays indented under a
# line ending in ":").  Read as reStructuredText, "|x|" is a substitution and an indented display a
# block quote; these two rules make them render as written without editing every docstring.
def _plain_text_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    if what in ("data", "attribute") and lines and type(obj).__doc__ and \
            " ".join(lines).split() == type(obj).__doc__.split():
        lines[:] = []                          # a constant without a #: comment shows int's or tuple's doc
        return
    if not name.startswith(tuple(p + "." for p in PACKAGES) + PACKAGES) or not _defined_here(obj):
        return                                 # e.g. a method inherited from numpy.random.Generator
    literal_indent = None                      # inside a literal block: its parent's indent
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if line.strip() and indent <= literal_indent:
                literal_indent = None
            else:
                continue
        stripped = line.strip()
        if stripped.startswith((">>>", "...")) or stripped.startswith(("+-", "|")) and stripped.endswith(("+", "|")):
            continue                           # doctest lines and grid tables stay as they are
        if stripped.endswith("::"):
            literal_indent = indent
        elif stripped.endswith(":") and _next_is_indented(lines, i, indent) and not _is_field(stripped):
            lines[i] = line + ":"              # "text:" + indented display -> a literal block
            literal_indent = indent
        if "|" in line and literal_indent != indent:
            lines[i] = _escape_bars(lines[i])


def _defined_here(obj) -> bool:
    module = getattr(obj, "__module__", None) or getattr(getattr(obj, "fget", None), "__module__", None)
    return module is None or module.split(".")[0] in PACKAGES


def _next_is_indented(lines: list[str], i: int, indent: int) -> bool:
    for nxt in lines[i + 1:]:
        if nxt.strip():
            return len(nxt) - len(nxt.lstrip()) > indent and not nxt.strip().startswith((">>>", "-", "*"))
    return False


def _is_field(stripped: str) -> bool:
    """numpydoc and reST constructs that end with a colon on purpose."""
    return stripped.startswith((":", "..")) or stripped.endswith(" :") or stripped in ("Examples:", "Example:")


def _escape_bars(line: str) -> str:
    """Escape "|" outside ``literals`` (a backslash inside a literal would show)."""
    parts = line.split("``")
    return "``".join(p if k % 2 else p.replace("\\|", "|").replace("|", "\\|") for k, p in enumerate(parts))


def setup(app):
    app.connect("autodoc-process-docstring", _plain_text_docstring, priority=400)


def _write(path: Path, text: str) -> None:
    """Write only when changed, so an incremental build does not re-read every page."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_benchmark_tables() -> None:
    """The benchmark page's tables, rendered from the committed ``--json`` runs in
    ``docs/results/benchmarks/`` by the harness's own :func:`markdown` (no copied numbers)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _harness import markdown

    runs = sorted((DOCS / "results" / "benchmarks").glob("*.json"))
    parts = [markdown(json.loads(p.read_text())) for p in runs]
    _write(GENERATED / "benchmark_tables.inc", "\n".join(parts) if parts else "No benchmark run is committed.\n")


write_api_pages()
write_notebook_pages()
write_benchmark_tables()
if os.environ.get("SPECSIM_DOCS_NO_FIGS"):      # a quick local build: say so on the page
    _write(GENERATED / "gallery.rst", "Gallery\n=======\n\nFigures not drawn in this build "
           "(``SPECSIM_DOCS_NO_FIGS`` was set).\n")
else:
    write_gallery()
