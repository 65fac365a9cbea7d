"""The documentation is checked like code.

(a) Every citation ``docs/theory.md §N`` in the repository's ``.py``, ``.md``, ``.toml``, ``.sh`` and
    ``.ipynb`` files — including lists (``§3, 5, 6.6``, ``§5.1/5.2``), ranges (``§1-4``) and a
    citation broken across a line — names a section heading of docs/theory.md, and so does every
    bare ``§N`` inside docs/ (the documents refer to the theory by section).
(b) No file cites notes that live outside the repository.
(c) Every relative link in README.md and docs/**/*.md points at a file or folder of the repository.
(d) Every repository path quoted in a code span or code block of README.md and docs/**/*.md exists
    (globs match something; outputs that a command makes are named in ``GENERATED``), and none of
    them is an absolute path on some machine.
(e) README.md's Python blocks run as they are, and its table of checks names what the docstring of
    ``specsim.testing`` names.

Failures list ``file:line`` of each offending place.  The checkers are plain functions, tested on
planted inputs below, so a broken checker cannot pass silently.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THEORY = ROOT / "docs" / "theory.md"
SUFFIXES = (".py", ".md", ".toml", ".sh", ".ipynb")
SKIP_DIRS = {".git", "__pycache__", "build", "dist", "paper_figs_out", ".hypothesis", ".venv", "venv"}

# A section number: 6.3, 12, or an appendix A..H, A.1 (not followed by a letter or digit, so "R12"
# is no section; "§N" and "§X" stay placeholders in prose).
_NUMBER = r"(?:[0-9]+(?:\.[0-9]+)*|[A-H](?:\.[0-9]+)*)(?![0-9A-Za-z])"
_SEP = r"\s*(?:,|/|-|–|&|\band\b|\bor\b)\s*"
_LIST = rf"{_NUMBER}(?:{_SEP}{_NUMBER})*"
# "docs/theory.md" then "§", possibly on the next line after a comment marker.
_CITATION = re.compile(rf"docs/theory\.md[ \t(,:]*(?:\n[ \t]*(?:#+|//|\*|>)?[ \t]*)?§\s*({_LIST})")
_BARE = re.compile(rf"§\s*({_LIST})")
_HEADING = re.compile(r"^#{1,6}[ \t]+§[ \t]*([0-9A-Z][0-9A-Z.]*?)\.?(?=[ \t]|$)", re.MULTILINE)
# Out-of-repository notes, written in pieces so that this file does not match itself.
_FOREIGN = [re.compile(p) for p in ("THEORY" + r"\.md", "DESIGN" + r"\.md", r"\.\./" + "shared",
                                    "/work" + "/shared")]
_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^[ \t]*\[[^\]\n]+\]:[ \t]*<?(\S+?)>?(?:[ \t]+\"[^\"]*\")?[ \t]*$", re.MULTILINE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


# Outputs a documented command makes (not in the repository until it runs), and why.
GENERATED = {
    "paper_figs_out/": "written by python -m paper_figs",
    "docs/_build/": "written by the Sphinx build",
    "benchmarks/results/": "written by the GPU device check (scripts/device_check.sh)",
    "notebooks/quick_tour.ipynb": "written by jupytext --to notebook",
}
# A quoted token that starts at a top-level entry of the repository is a path claim.
_PATH_TOKEN = re.compile(r"^(?:\.{0,2}/)?[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]*)+$|^[A-Za-z0-9_-]+\.(?:md|toml|py|sh)$")
_CODE = re.compile(r"^```[^\n]*\n(.*?)^```|^(?: {4}|\t)(.+)$|(?<!`)(`+)([^`\n]+?)\3(?!`)", re.MULTILINE | re.DOTALL)


def quoted_paths(text: str):
    """(line, token) for each path-like token inside code spans, fenced and indented code blocks."""
    for m in _CODE.finditer(text):
        body, start = next(((g, m.start(i)) for i, g in ((1, m.group(1)), (2, m.group(2)), (4, m.group(4)))
                            if g is not None), ("", m.start()))
        for t in re.finditer(r"[^\s\"'=(),;:]+", body):
            token = t.group(0).rstrip(".,:;)]").lstrip("[(")
            if "://" in token or "$" in token or "<" in token or token.startswith(("-", "~", "@")):
                continue
            if re.search(r"(?:^|/)[A-Z]{2,}(?:\.[a-z]+)?(?:/|$)", token):
                continue                                               # a placeholder: benchmarks/NAME.py, DIR/x
            if token.startswith("/") and len(token) > 1 and token.count("/") >= 2:
                yield _line(text, start + t.start()), token            # an absolute path: always a claim
            elif _PATH_TOKEN.match(token) and not re.match(r"^[\d./*-]+$", token):
                yield _line(text, start + t.start()), token


def missing_paths(texts: dict[str, str], root: Path) -> list[str]:
    """``file:line token`` for each quoted path that is absolute or does not exist under ``root``."""
    top = {p.name for p in root.iterdir()}
    bad = []
    for name, text in texts.items():
        for line, token in quoted_paths(text):
            if token.startswith("/"):
                bad.append(f"{name}:{line} {token} (absolute path)")
                continue
            rel = token.lstrip("./") if token.startswith("./") else token
            if rel.split("/")[0] not in top or any(rel.startswith(g) for g in GENERATED):
                continue                                               # not a repository path, or an output
            if not (any(root.glob(rel)) if "*" in rel else (root / rel).exists()):
                bad.append(f"{name}:{line} {token}")
    return bad


def repository_files() -> list[Path]:
    """Tracked and not-ignored files (git), or a walk of the tree outside a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
        names = [n for n in out.decode().split("\0") if n]
        return sorted({ROOT / n for n in names if (ROOT / n).is_file()})
    except (OSError, subprocess.SubprocessError):
        return sorted(p for p in ROOT.rglob("*") if p.is_file()
                      and not any(part in SKIP_DIRS or part.endswith(".egg-info")
                                  for part in p.relative_to(ROOT).parts))


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _expand(listed: str) -> list[str]:
    """Section numbers named by a list such as "3, 5, 6.6", "5.1/5.2" or "1-4" (ranges inclusive)."""
    parts = re.split(rf"({_SEP})", listed)
    numbers, ranges = parts[0::2], [s.strip() in ("-", "–") for s in parts[1::2]]
    out = [numbers[0]]
    for is_range, nxt in zip(ranges, numbers[1:]):
        a, b = out[-1].split("."), nxt.split(".")
        if is_range and len(a) == len(b) and a[:-1] == b[:-1] and a[-1].isdigit() and b[-1].isdigit():
            out += [".".join(a[:-1] + [str(k)]) for k in range(int(a[-1]) + 1, int(b[-1]) + 1)]
        else:
            out.append(nxt)
    return out


def theory_sections(text: str) -> list[str]:
    """Section numbers of the headings of docs/theory.md, in order ("1", "2.1", ..., "A")."""
    return _HEADING.findall(text)


def citations(text: str, bare: bool = False) -> list[tuple[int, str]]:
    """(line, section) for every docs/theory.md citation in ``text`` (every "§N" if ``bare``)."""
    pattern = _BARE if bare else _CITATION
    return [(_line(text, m.start()), n) for m in pattern.finditer(text) for n in _expand(m.group(1))]


def dangling_citations(texts: dict[str, str], sections) -> list[str]:
    """``file:line §N`` for each citation whose section is not among ``sections``."""
    known = set(sections)
    return [f"{name}:{line} §{n}" for name, text in texts.items()
            for line, n in citations(text, bare=name.startswith("docs/")) if n not in known]


def foreign_citations(texts: dict[str, str]) -> list[str]:
    """``file:line text`` for each mention of notes kept outside the repository."""
    return [f"{name}:{_line(text, m.start())} {m.group(0)}" for name, text in texts.items()
            for pattern in _FOREIGN for m in pattern.finditer(text)]


def broken_links(md_files: dict[Path, str], root: Path) -> list[str]:
    """``file:line target`` for each relative link that does not resolve inside ``root``."""
    bad = []
    for path, text in md_files.items():
        for pattern in (_LINK, _REF_LINK):
            for m in pattern.finditer(text):
                target = m.group(1)
                if _SCHEME.match(target) or target.startswith("#"):
                    continue  # external URL or an anchor in the same document
                local = target.split("#", 1)[0].split("?", 1)[0]
                if local.startswith("_generated/"):
                    continue  # written by the Sphinx build (docs/conf.py), not stored
                resolved = (path.parent / local).resolve()
                if not resolved.exists() or root.resolve() not in (resolved, *resolved.parents):
                    bad.append(f"{path.relative_to(root)}:{_line(text, m.start())} {target}")
    return bad


def _texts(suffixes=SUFFIXES) -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8", errors="replace")
            for p in repository_files() if p.suffix in suffixes}


def _citing_texts() -> dict[str, str]:
    """The texts to scan for citations: all of them but this file, whose planted examples are bad on purpose."""
    texts = _texts()
    texts.pop(Path(__file__).resolve().relative_to(ROOT).as_posix(), None)
    return texts


# ----------------------------------------------------------------------------- the repository
def test_theory_sections_are_unique():
    sections = theory_sections(THEORY.read_text(encoding="utf-8"))
    assert sections, "docs/theory.md has no '## §N' headings"
    repeated = sorted({s for s in sections if sections.count(s) > 1})
    assert not repeated, f"section numbers used by more than one heading: {repeated}"


def test_every_theory_citation_resolves():
    texts = _citing_texts()
    found = sum(len(citations(t, bare=n.startswith("docs/"))) for n, t in texts.items())
    assert found > 100, f"only {found} citations found: the citation pattern no longer matches the code"
    bad = dangling_citations(texts, theory_sections(THEORY.read_text(encoding="utf-8")))
    assert not bad, "citations of sections docs/theory.md does not have:\n" + "\n".join(bad)


def test_no_citation_of_notes_outside_the_repository():
    bad = foreign_citations(_texts())
    assert not bad, "files citing material outside the repository:\n" + "\n".join(bad)


def _markdown_pages() -> dict[Path, str]:
    """README.md and every Markdown page under docs/ (the built site excluded)."""
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
    return {p: p.read_text(encoding="utf-8") for p in pages if p.is_file()}


def test_relative_links_in_readme_and_docs_exist():
    md = _markdown_pages()
    bad = broken_links(md, ROOT)
    assert not bad, "relative links to missing files:\n" + "\n".join(bad)


def test_paths_quoted_in_readme_and_docs_exist():
    texts = {p.relative_to(ROOT).as_posix(): text for p, text in _markdown_pages().items()}
    found = sum(1 for text in texts.values() for _ in quoted_paths(text))
    assert found > 30, f"only {found} quoted paths found: the path pattern no longer matches the pages"
    bad = missing_paths(texts, ROOT)
    assert not bad, "quoted paths that do not exist:\n" + "\n".join(bad)


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def test_readme_python_blocks_run_verbatim(tmp_path):
    blocks = _python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 2, "README.md lost its five-line and three-line examples"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for block in blocks:
        r = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True,
                           timeout=600, env=env)
        assert r.returncode == 0, f"README block failed:\n{block}\n{r.stdout}{r.stderr}"
        # each block's printed verdicts are what its comments promise
        if "hsd_released" in block:
            assert "LOSSLESS" in r.stdout and "LOSSY" in r.stdout.replace("LOSSLESS", ""), r.stdout
        if "check_sampler" in block:
            assert ": PASS at false-alarm rate 0.001" in r.stdout, r.stdout


def _table_names(cells: str, package: str = "") -> set[str]:
    """The code-span contents of a table (``x``, :func:`x`, `x`), relative names made absolute."""
    names = set(re.findall(r"(?::[a-z]+:)?`{1,2}([^`]+?)`{1,2}", cells))
    return {package + n if n.startswith(".") else n for n in names}


def test_readme_table_of_checks_matches_the_testing_docstring():
    import specsim.testing

    doc = specsim.testing.__doc__
    rules = [m.start() for m in re.finditer(r"^=+ ", doc, re.MULTILINE)]
    assert len(rules) == 3, "specsim.testing's docstring lost its table of checks"
    in_doc = _table_names(doc[rules[0]:rules[2]], package="specsim.testing")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = re.search(r"^\| you have .*?(?=^\s*$)", readme, re.MULTILINE | re.DOTALL)
    assert table, "README.md lost its table of checks"
    assert _table_names(table.group(0)) == in_doc


# ----------------------------------------------------------------------------- the checkers themselves
def test_citation_parser_reads_lists_ranges_and_line_breaks():
    text = ("see docs/theory.md §6.3.\n"
            "docs/theory.md §3, 5, 6.6): and docs/theory.md §5.1/5.2 and docs/theory.md §1-4, 7\n"
            "(docs/theory.md §12, R12) the closed forms of docs/theory.md\n"
            "    # §10.2 and docs/theory.md §A; §N is a placeholder: docs/theory.md §N\n")
    assert citations(text) == [(1, "6.3"), (2, "3"), (2, "5"), (2, "6.6"), (2, "5.1"), (2, "5.2"),
                               (2, "1"), (2, "2"), (2, "3"), (2, "4"), (2, "7"), (3, "12"),
                               (3, "10.2"), (4, "A")]


def test_a_planted_bad_citation_is_reported_with_its_line():
    texts = {"pkg/mod.py": '"""Lossless (docs/theory.md §2).\n\nSee docs/theory.md §6.9 and §99."""\n',
             "docs/notes.md": "As in §2.1 and §13.\n"}
    assert dangling_citations(texts, ["1", "2", "2.1", "6.3"]) == ["pkg/mod.py:3 §6.9", "docs/notes.md:1 §13"]


def test_headings_are_read_with_their_numbers():
    text = "# Title\n## §6 Multi-draft\n### §6.3 Traversal\n#### Algorithm 6.2\n## §A Numerics\n§7 in prose\n"
    assert theory_sections(text) == ["6", "6.3", "A"]


def test_planted_foreign_citation_and_broken_link_are_reported(tmp_path):
    planted = "x = 1  # see " + "THEORY" + ".md section 2\n"
    assert foreign_citations({"a.py": "ok\n" + planted}) == ["a.py:2 " + "THEORY" + ".md"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("x")
    page = tmp_path / "docs" / "page.md"
    text = "[ok](here.md) [web](https://example.org) [anchor](#top)\n[gone](../missing.py#L3)\n[up](../../x)\n"
    assert broken_links({page: text}, tmp_path) == ["docs/page.md:2 ../missing.py#L3", "docs/page.md:3 ../../x"]


def test_planted_missing_and_absolute_paths_are_reported(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("x")
    text = ("Run `python -m pytest tests/test_a.py tests/test_gone.py`, `tests/*.py` and `tests/*.txt`.\n"
            "```bash\nspecsim build --out /work/big_trees\n```\n"
            "    python tests/test_gone2.py\n"
            "Not paths: `specsim.testing`, `~/.cache/x`, `paper_figs_out/x.png`, `a/b` (a is no entry), "
            "`tests/NAME.py`.\n")
    assert missing_paths({"README.md": text}, tmp_path) == [
        "README.md:1 tests/test_gone.py", "README.md:1 tests/*.txt",
        "README.md:3 /work/big_trees (absolute path)", "README.md:5 tests/test_gone2.py"]


@pytest.mark.parametrize("listed, expected", [("6.1-6.3", ["6.1", "6.2", "6.3"]), ("2 and 3", ["2", "3"]),
                                              ("A", ["A"]), ("4-6.2", ["4", "6.2"])])
def test_section_lists_expand(listed, expected):
    assert _expand(listed) == expected


_DOTTED = re.compile(r"`((?:specsim|lp)(?:\.[A-Za-z_]\w*)+)")


def unresolved_names(md_files: dict[Path, str]) -> list[str]:
    """``file:line name`` for each quoted dotted name (``specsim.x.y``, ``lp.x``) that is neither a
    module nor an attribute of one: renamed or moved names left behind in the prose."""
    import importlib

    bad = []
    for path, text in md_files.items():
        for m in _DOTTED.finditer(text):
            parts = m.group(1).split(".")
            obj, i = None, len(parts)
            while i and obj is None:       # the longest importable module prefix
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    i -= 1
            for attr in parts[i:]:
                obj = getattr(obj, attr, None)
            if obj is None:
                bad.append(f"{path.name}:{_line(text, m.start())} {m.group(1)}")
    return bad


def test_dotted_names_in_readme_and_docs_resolve():
    bad = unresolved_names(_markdown_pages())
    assert not bad, "quoted names that do not exist:\n" + "\n".join(bad)


def test_a_planted_stale_name_is_reported():
    text = "use `specsim.testing.mutants.CHAIN_MUTANTS` or `specsim.testing.selftest.mutants.CHAIN_MUTANTS`"
    assert unresolved_names({Path("x.md"): text}) == ["x.md:1 specsim.testing.mutants.CHAIN_MUTANTS"]
