"""vLLM's real rejection samplers (v1 and model runner v2) through the layout adapters: the law passes
check_sampler and check_engine_properties flags the faults found by hand in vLLM 0.33.0 (issue 13).
Each test asserts the exact set of broken properties, so a fix upstream shows as a changed test.
Skipped unless vllm is importable (install: docs/engines.md, "vLLM rejection samplers").

Without a CUDA device the kernels run under the Triton interpreter, with two test-side settings:
* ``CUDA_VISIBLE_DEVICES=""`` before vllm is imported: vLLM otherwise finds no active Triton driver
  and swaps triton for a placeholder whose ``@triton.jit`` kernels cannot run (it accepts zero
  drivers in a "distributed" environment, which an empty CUDA_VISIBLE_DEVICES signals);
* model runner v2's residual calls ``libdevice.log1p``, a CUDA extern the interpreter does not
  implement (it returns None): the ``interpreter_log1p`` fixture puts numpy's float32 log1p in
  the place of that one function for the module's kernels; no other arithmetic is touched.
"""
import os

import numpy as np
import pytest

if os.environ.get("TRITON_INTERPRET") == "1":
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
torch = pytest.importorskip("torch")
v1 = pytest.importorskip("vllm.v1.sample.rejection_sampler")
mrv2 = pytest.importorskip("vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils")

from specsim.testing import check_sampler, default_instance  # noqa: E402
from specsim.testing.engines import vllm_mrv2_rejection_sampler, vllm_rejection_sampler  # noqa: E402
from specsim.testing.properties import check_engine_properties  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread", "interpreter_log1p")


@pytest.fixture(scope="module")
def interpreter_log1p():
    """Under the interpreter: ``tldevice.log1p`` of rejection_sampler_utils computed by numpy."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        yield
        return
    from types import SimpleNamespace

    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def log1p(x):
        with np.errstate(divide="ignore", invalid="ignore"):  # log1p(-1) = -inf, NaN rows stay NaN
            return tl.tensor(TensorHandle(np.log1p(x.handle.data), x.handle.dtype.scalar), x.type)

    original = mrv2.tldevice
    mrv2.tldevice = SimpleNamespace(log1p=log1p)
    yield
    mrv2.tldevice = original


ENGINES = {
    "v1": lambda: vllm_rejection_sampler(v1.rejection_sample),
    "mrv2": lambda: vllm_mrv2_rejection_sampler(mrv2.rejection_sample),
    "mrv2-block": lambda: vllm_mrv2_rejection_sampler(mrv2.rejection_sample, block_verification=True),
}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_law_passes(engine):
    """The interpreter runs ~30 ms per request: n = 400 (detects TV >= 0.49 on default_instance(), as printed)."""
    res = check_sampler(ENGINES[engine]().batch_sampler(chunk=400), *default_instance(), n=400)
    assert res.passed, str(res)


def test_v1_faults():
    """v1: a NaN draft row emits token 0; a zero residual emits token 0 (target probability 0); the
    `>=` test accepts a draft of target probability 0 at u = 0 (uniforms injected through
    generate_uniform_probs)."""
    report = check_engine_properties(ENGINES["v1"](), trials=6)
    assert set(report.broken) == {"degenerate_rows", "zero_residual", "zero_target_draft"}, str(report)
    assert "emitted token 0" in report["degenerate_rows"].witness
    assert "token = 0" in report["zero_residual"].witness
    assert "at u = 0" in report["zero_target_draft"].witness


def test_v1_padded_placeholder_resampled_from_the_residual():
    """v1 with padded drafts: the first -1 slot is resampled from max(p - q, 0) with the slot's draft
    row instead of drawn from p (here that residual is 0, so token 0 comes out)."""
    report = check_engine_properties(vllm_rejection_sampler(v1.rejection_sample, pad_drafts=True), trials=6,
                                     properties=("placeholder",))
    assert report.broken == ("placeholder",) and "token = 0" in report["placeholder"].witness, str(report)


@pytest.mark.parametrize("engine", ["mrv2", "mrv2-block"])
def test_mrv2_faults(engine):
    """MRv2: a zero residual emits token 0; a NaN draft row emits token 0 (token rule) or is accepted
    (block verification: min(NaN, 0) = 0 in the running log ratio).  Its uniforms are hashed from
    (seed, position), so u = 0 cannot be forced (it excludes 0 anyway)."""
    report = check_engine_properties(ENGINES[engine](), trials=4,
                                     properties=("placeholder", "degenerate_rows", "zero_residual", "zero_target_draft",
                                                 "inputs_unchanged", "batch_invariance", "bonus_row"))
    assert set(report.broken) == {"degenerate_rows", "zero_residual"}, str(report)
    assert "token = 0" in report["zero_residual"].witness
    assert ("draft row at position" if engine == "mrv2-block" else "emitted token 0") in report["degenerate_rows"].witness
    assert "not forced" in report["zero_target_draft"].note
