"""Every verifier is built by the two decorators, carries its needs, and ``verifiers_for`` reads them."""
import ast
from pathlib import Path

import pytest

from specsim import drafts
from specsim.testing.selftest.mutants import CHAIN_CONTROLS, CHAIN_MUTANTS, TREE_CONTROLS, TREE_MUTANTS
from specsim.verifiers import NEED_TAGS, Verifier, chain_verifier, tree_verifier
from specsim.verifiers.chain import CHAIN_VERIFIERS
from specsim.verifiers.lossy import LOSSY_RULES, LossyVerifier, fuzzy, topk_accept
from specsim.verifiers import TREE_VERIFIERS, verifiers_for

ROOT = Path(__file__).resolve().parents[2]

#: The side table the registry replaced (TREE_VERIFIERS[name] = (verifier, needs)), written out.
OLD_NEEDS = {"specinfer": {"iid"}, "specinfer_first_path": {"iid"}, "sequoia": {"swor"},
             "traversal": {"swor", "iid"}, "traversal_repeats": {"iid"}, "traversal_paths": {"iid"},
             "deterministic_children": {"any"}, "spectr": {"iid"},
             "khisti": {"iid"}, "khisti_optimal": {"iid"}, "gbv": {"paths"}, "gbv_capped": {"paths"}, "greedy_multidraft": {"greedy"}}

#: One instance of every draft process specsim.drafts builds (all widths 1: the chain-like case).
PROCESSES = [drafts.chain(), drafts.iid_paths(1), drafts.iid_paths(2), drafts.iid_paths(3), drafts.swor_tree(1),
             drafts.swor_tree(2), drafts.fixed_shape((2, 2)), drafts.fixed_shape((2, 2), replacement=False),
             drafts.fixed_shape((1, 1)), drafts.fixed_shape((2, 1)), drafts.topk_tree((2,)),
             drafts.topk_tree((2, 2)), drafts.delayed_expansion(1, 2), drafts.delayed_expansion(1, 2, False),
             drafts.delayed_expansion(0, 2), drafts.greedy_drafts(1), drafts.greedy_drafts(2),
             drafts.greedy_drafts(3), drafts.parse_drafting("binary:2")]


def _every_verifier():
    lossy = [LOSSY_RULES[name](**kw) for name, kw in (
        ("typical", {}), ("lenience", {"l": 0.5}), ("topk_accept", {"k": 2}), ("fuzzy", {"T": 0.1}),
        ("cactus", {"delta": 0.1}), ("mentored", {"alpha": 0.5}), ("ensemble", {"w": 0.5}),
        ("cascade", {"alpha": 0.5}), ("margin_standin", {"theta": 0.5}), ("consultant_standin", {"tau": 0.1}))]
    return [*CHAIN_VERIFIERS.values(), *TREE_VERIFIERS.values(), *(m.verifier for table in (CHAIN_MUTANTS, CHAIN_CONTROLS, TREE_MUTANTS, TREE_CONTROLS)
                                       for m in table.values()), *lossy]


@pytest.mark.parametrize("v", _every_verifier(), ids=lambda v: v.name)
def test_every_verifier_has_kind_and_needs(v):
    assert isinstance(v, Verifier)
    assert v.kind in ("chain", "tree")
    assert isinstance(v.needs, frozenset) and v.needs and v.needs <= NEED_TAGS
    if v.kind == "chain":
        assert v.needs == {"chain"} and v.node_rule is None and v.path_model is None


def test_registries_are_names_to_verifiers():
    for registry in (CHAIN_VERIFIERS, TREE_VERIFIERS):
        assert all(isinstance(v, Verifier) and v.name == name for name, v in registry.items())
    assert set(TREE_VERIFIERS) == set(OLD_NEEDS)
    assert {name: set(v.needs) for name, v in TREE_VERIFIERS.items()} == OLD_NEEDS


def test_lossy_rules_are_lossy_verifiers():
    for v in (topk_accept(2), fuzzy(0.1)):
        assert isinstance(v, LossyVerifier) and v.kind == "chain" and v.lossless is False


def _old_verifiers_for(process):
    """verifiers_for as the side table defined it: chain verifiers iff the process drafts a chain,
    then every tree verifier with "any" or a children law the process guarantees."""
    laws = drafts.draft_laws(process)
    out = list(CHAIN_VERIFIERS) if "chain" in laws else []
    return out + [name for name, needs in OLD_NEEDS.items() if "any" in needs or needs & laws]


@pytest.mark.parametrize("process", PROCESSES, ids=lambda p: p.name)
def test_verifiers_for_agrees_with_the_old_side_table(process):
    assert [v.name for v in verifiers_for(process)] == _old_verifiers_for(process)


def test_examples_of_verifiers_for():
    names = lambda d: {v.name for v in verifiers_for(d)}  # noqa: E731
    assert {"token", "block", "traversal", "gbv", "specinfer"} <= names(drafts.chain())
    assert "sequoia" not in names(drafts.iid_paths(2)) and "gbv" in names(drafts.iid_paths(2))
    assert names(drafts.swor_tree(2)) == {"sequoia", "traversal", "deterministic_children"}
    assert names(drafts.topk_tree((2,))) == {"deterministic_children"}
    assert "gbv" not in names(drafts.fixed_shape((2, 2)))


def test_the_decorators_are_the_only_construction_path():
    """No module of specsim or lp calls ``Verifier(...)`` or ``LossyVerifier(...)`` except the
    decorators' own module, specsim/verifiers/base.py."""
    calls = []
    base = ROOT / "specsim" / "verifiers" / "base.py"
    for path in sorted([*(ROOT / "specsim").rglob("*.py"), *(ROOT / "lp").rglob("*.py")]):
        if path == base:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in ("Verifier", "LossyVerifier"):
                    calls.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert calls == []


def test_decorated_verifiers_keep_their_settings():
    @chain_verifier("c", lossless=False, sampler=lambda draft, p, q, rng: (0, 0))
    def c(draft, p, q):
        """doc of c"""
        return []

    @tree_verifier("t", needs=("iid", "swor"), node_rule=lambda tree, u: ({}, 1.0, tree.p[u]), doc="given")
    def t(tree):
        return []

    assert (c.name, c.kind, c.lossless, c.doc, c.needs, c.batch_law) == ("c", "chain", False, "doc of c",
                                                                           {"chain"}, None)
    assert (t.name, t.kind, t.lossless, t.doc, t.needs) == ("t", "tree", True, "given", {"iid", "swor"})
    assert t.applies_to(drafts.swor_tree(2)) and t.applies_to(drafts.iid_paths(2))
    assert not t.applies_to(drafts.topk_tree((2,)))
