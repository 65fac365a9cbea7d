"""build_trees(workers=...) on a local two-worker dask.distributed cluster (issue 23): the map-like
callable route (client.map, then gather) gives the same dataset, bit for bit, as one worker.

Skipped where dask.distributed is not installed (it is not a dependency of the package)."""
import json

import pytest

from specsim import real_trees

torch = pytest.importorskip("torch")
distributed = pytest.importorskip("distributed")

PROMPTS = [[3, 1, 4, 1, 5], [2, 7, 1, 8], [6, 6, 2]]
KW = dict(prompts=PROMPTS, positions=(1, 3), drafts=("early_exit:1", "quant:3"), processes=("chain", "iid:2"),
          L=2, samples=1, tail=0.0, progress=False, context_source="generated")


@pytest.fixture(scope="module")
def client():
    import dask

    # worker processes forked from this one (torch is already imported here; a spawned worker
    # would import it again, tens of seconds on a loaded machine); one thread each, as torch_threads
    with dask.config.set({"distributed.worker.multiprocessing-method": "fork"}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                      worker_dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            yield c


def test_a_two_worker_dask_cluster_gives_the_one_worker_dataset(tmp_path, tiny_llama, client):
    seen = []

    def dask_map(f, it):
        # the cluster's map as build_trees' workers=: tasks go out pickled (the LoadedModel with
        # them), results come back in order; where each ran is recorded
        futures = client.map(lambda job: (f(job), distributed.get_worker().address), list(it), pure=False)
        out = client.gather(futures)
        seen.extend(addr for _, addr in out)
        return [r for r, _ in out]

    one = real_trees.build_trees(tmp_path / "one", model=tiny_llama, workers=1, **KW)
    two = real_trees.build_trees(tmp_path / "dask", model=tiny_llama, workers=dask_map, **KW)
    m1, m2 = (json.loads(p.read_text()) for p in (one, two))
    assert m1["data_sha256"] == m2["data_sha256"]
    assert m1["continuations"] == m2["continuations"]
    assert m2["settings"]["workers"] == "dask_map"
    assert len(client.scheduler_info()["workers"]) == 2
    # 3 continuations + 6 contexts went through the cluster
    assert len(seen) == len(PROMPTS) * (1 + 2)
