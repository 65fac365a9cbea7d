"""Cost of from_rng_sampler: check_sampler_exact at V = 4, L = 2 on a sampler rewritten to take its
uniforms (the baseline, tests/testing/test_sampler.py's _token_u) against the unmodified numpy and
torch samplers of tests/testing/test_uniforms.py through from_rng_sampler; rounds interleaved, one
warm-up, medians of wall and CPU time (this process) and their ratios to the baseline.

    PYTHONPATH=$PWD python scripts/uniforms_overhead.py [ROUNDS]
"""
import statistics, sys, time
sys.path[:0] = ["tests/testing"]
import torch
torch.set_num_threads(1)
from specsim.models import random_model
from specsim.testing import check_sampler_exact, from_rng_sampler
from test_sampler import _token_u
from test_uniforms import np_token_level, torch_token_level
t, d = random_model(4, 5), random_model(4, 6)
subjects = [("hand-written u sampler (baseline)", lambda: check_sampler_exact(_token_u, t, d, 2)),
            ("from_rng_sampler(numpy)", lambda: check_sampler_exact(from_rng_sampler(np_token_level), t, d, 2)),
            ("from_rng_sampler(torch)", lambda: check_sampler_exact(from_rng_sampler(torch_token_level, torch=True), t, d, 2))]
for _, f in subjects: f()
R = int(sys.argv[1]) if len(sys.argv) > 1 else 3
w = [[] for _ in subjects]; c = [[] for _ in subjects]
for _ in range(R):
    for i, (_, f) in enumerate(subjects):
        c0, t0 = time.process_time(), time.perf_counter(); cert = f()
        w[i].append(time.perf_counter() - t0); c[i].append(time.process_time() - c0)
bw, bc = statistics.median(w[0]), statistics.median(c[0])
for (name, _), ws, cs in zip(subjects, w, c):
    print(f"{name:36s} wall {statistics.median(ws):7.2f} s  cpu {statistics.median(cs):7.2f} s  "
          f"wall ratio {statistics.median(ws)/bw:5.2f}  cpu ratio {statistics.median(cs)/bc:5.2f}")
