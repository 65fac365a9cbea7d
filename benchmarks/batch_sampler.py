"""check_sampler on a batched numpy sampler against the per-sample path, in the same run.

Subject: ``check_sampler(BatchSampler(fn), ...)`` at V = 8, L = 3 with n = 10^5 draws (``--quick``:
V = 4, L = 2, n = 10^4), where ``fn`` verifies a whole chunk of drafts in one call by drawing
(tau, Y) from the token rule's batched exact law (``token.batch_law``: P(tau = k) [B, L+1] and the
emitted-token law [B, L+1, V]) with the package's inverse-CDF draw.  Baseline: the per-sample path,
``check_sampler(from_verifier(token), ...)`` (one Python call of the token rule's sampler per
draw) on the same pair and n.  Drafting, completion with target samples and the chi-square
counting are vectorised in both; only the calls into the implementation differ.  Metrics: draws
per second and the verdict (both must pass: the rule is lossless).

    python benchmarks/batch_sampler.py [--quick] [--json out.json] [--repeats N]
"""
from __future__ import annotations

import numpy as np

from specsim._sampling import draw_rows
from specsim.models import random_model
from specsim.testing import BatchSampler, check_sampler, from_verifier
from specsim.verifiers import token

from _harness import Run  # this folder (Python puts the script's folder on sys.path)


def token_batch(drafts, p, q, rng):
    """(tau, Y) for every draft of the chunk from the token rule's batched exact law."""
    stop, emit = token.batch_law(drafts, p, q)
    tau = draw_rows(stop, rng)
    return tau, draw_rows(emit[np.arange(len(drafts)), tau], rng)


def main(argv=None) -> dict:
    run = Run(__file__, __doc__, argv, repeats=3, quick_repeats=1)
    run.banner()
    V, L, n = (4, 2, 10 ** 4) if run.quick else (8, 3, 10 ** 5)
    target, draft_model = random_model(V, 0), random_model(V, 1)
    case = f"token, V={V}, L={L}, n={n}"
    params = {"V": V, "L": L, "n": n}
    check_sampler(BatchSampler(token_batch), target, draft_model, L, n=100)  # tabulates the rows both read

    def metrics(t, res):
        return {"draws_per_s": n / t.median_s, "passed": bool(res.passed)}

    base, _ = run.time(case, "per-sample (baseline)",
                       lambda: check_sampler(from_verifier(token), target, draft_model, L, n=n),
                       repeats=1, warmup=0, params=params, metrics=metrics)
    run.time(case, "BatchSampler, chunk 4096",
             lambda: check_sampler(BatchSampler(token_batch), target, draft_model, L, n=n),
             baseline=base, params=params, metrics=metrics)
    return run.finish()


if __name__ == "__main__":
    main()
