"""Shared fixtures for the specsim.real tests: small synthetic datasets written to tmp folders."""
import json
import shutil

import numpy as np
import pytest

from specsim import iid, random_model, real, real_trees, temperature, top_k

#: Draft names of the synthetic datasets (their rows are made from the target, not by a model).
DRAFT_NAMES = ("early_exit:1", "temperature:0.5", "topk:2")


@pytest.fixture(scope="session")
def drafts():
    return DRAFT_NAMES


@pytest.fixture(scope="session")
def synthetic_pairs():
    """``make(V=7, seed=0, n_prompts=2, length=3)``: real.Pair rows at every prefix of fixed token
    sequences, from random_model pairs (prefix-dependent rows); the 'topk:2' draft has zeros."""
    def make(V=7, seed=0, n_prompts=2, length=3):
        tgt, dr = random_model(V, seed, concentration=0.5), random_model(V, seed + 1, concentration=0.5)
        pairs = []
        for i in range(n_prompts):
            toks = tuple((seed + 3 * i + 5 * c + c * c) % V for c in range(length + 1))
            for c in range(1, length + 1):
                ctx = toks[:c]
                p = tgt(ctx)
                q = {"early_exit:1": dr(ctx), "temperature:0.5": temperature(iid(p), 0.5)(()),
                     "topk:2": top_k(iid(p), 2)(())}
                pairs.append(real.Pair(i, ctx, toks[c], p, q))
        return pairs
    return make


@pytest.fixture
def write_synthetic(tmp_path, synthetic_pairs):
    """``write(pairs=None, tail=0.0, V=7)``: write a dataset under tmp_path; returns its manifest path."""
    def write(pairs=None, tail=0.0, V=7):
        pairs = synthetic_pairs(V) if pairs is None else pairs
        return real.write_dataset(tmp_path / "ds", pairs, V=V, drafts=DRAFT_NAMES, prompts=["a", "b"], tail=tail,
                                  whole_below=2, settings={"note": "synthetic"})
    return write


@pytest.fixture(scope="session")
def tamper():
    """``tamper(manifest_path, fix_hash=True, **changes)``: rewrite arrays of the data file (rows.npz or
    trees.npz, the manifest's ``data_file``; a value of None deletes the array, a callable maps it) and
    optionally fix the manifest's hash."""
    def tamper_(manifest_path, fix_hash=True, **changes):
        data = manifest_path.parent / json.loads(manifest_path.read_text())["data_file"]
        with np.load(data) as z:
            arrays = {k: z[k] for k in z.files}
        for k, v in changes.items():
            if v is None:
                del arrays[k]
            else:
                arrays[k] = v(arrays[k]) if callable(v) else v
        np.savez_compressed(data, **arrays)
        if fix_hash:
            m = json.loads(manifest_path.read_text())
            m["data_sha256"] = real.file_sha256(data)
            manifest_path.write_text(json.dumps(m))
    return tamper_


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """A randomly initialised 2-layer Llama over V = 40 tokens (nothing downloaded) as a LoadedModel."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).eval()
    weights = tmp_path_factory.mktemp("tiny") / "tiny.bin"
    weights.write_bytes(b"tiny llama")
    return real.LoadedModel(model, None, weights, 2, 40)


#: Processes of the small tree dataset: chain-only, i.i.d. and without-replacement verifiers all
#: find a process they apply to and one they do not; delayed:1,2 with iid:2 gives the oracle.
TINY_PROCESSES = ("chain", "iid:2", "swor:2", "delayed:1,2")


@pytest.fixture(scope="session")
def tiny_trees(tmp_path_factory, tiny_llama):
    """A small real-tree dataset (specsim-real-trees-v1) drafted by the tiny Llama; built once."""
    return real_trees.build_trees(tmp_path_factory.mktemp("tiny_trees") / "trees", prompts=[[3, 1, 4, 1, 5], [2, 7, 1, 8]],
                                  positions=(-2, -1), drafts=("early_exit:1", "temperature:0.5"), processes=TINY_PROCESSES,
                                  L=2, samples=2, tail=0.01, model=tiny_llama, progress=False)


@pytest.fixture
def write_trees(tmp_path, tiny_trees):
    """``write()``: a fresh copy of the small tree dataset under tmp_path; returns its manifest path."""
    def write():
        out = tmp_path / "trees"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(tiny_trees.parent, out)
        return out / "manifest.json"
    return write
