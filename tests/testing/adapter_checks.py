"""Checks shared by the engine-adapter tests (CI fakes of vLLM, mistral.rs, ...)."""
import numpy as np

from specsim.testing.generation import check_generation, finished
from specsim.testing.generation.toy import TOKEN_TEXT


def assert_clean_fake_passes(engine, params):
    """The clean fake passes two-sample ``check_generation``, and on both paths the adapter's stop
    reason is where the setting says generation stops, with one logprob per returned token."""
    res = check_generation(engine, prompt=(1, 0), params=params, n=400, seed=1)
    assert res.mode == "two-sample" and res.verdict == "PASS", str(res)
    rng = np.random.default_rng(5)
    for th in params.values():
        for spec in (True, False):
            toks, reason, lps = engine.generate((1, 0), th.max_new_tokens, th, spec, rng)
            assert reason == finished(toks, th, TOKEN_TEXT) and finished(toks[:-1], th, TOKEN_TEXT) is None
            assert len(lps) == len(toks)
