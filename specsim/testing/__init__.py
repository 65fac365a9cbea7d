"""Distribution-preservation testing for speculative-decoding implementations.

Point it at your own code:

* exact law available (a verifier in the :mod:`specsim.verifiers` protocol):
  ``assert_lossless(my_verifier)`` certifies C(z) = P(z) (docs/theory.md §2) exactly on Hypothesis-drawn
  prefix-dependent model pairs and reports a shrunk counterexample;
* sampling only: ``check_sampler(sample_fn, target, draft_model, L)`` (the completion chi-square
  of :mod:`specsim.testing.stats`, with a stated false-alarm rate and power); with injectable
  uniforms, ``check_sampler_exact``;
* strategies (:mod:`specsim.testing.strategies`), adapters for torch batch samplers and
  transformers (:mod:`specsim.testing.adapters`), pytest fixtures (:mod:`specsim.testing.plugin`)
  and the self-test against mutation suites (:func:`mutation_table`).

Names are loaded on first use (so the pytest plugin, which lives in this package, imports only
pytest and numpy); nothing here imports cvxpy, torch or triton.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "assertions": ("assert_lossless", "assert_sampler_lossless", "LossyVerifierError", "InconclusiveCheckError",
                   "Case", "certify_case",
                   "describe_failure", "tree_needs"),
    "sampler": ("check_sampler", "check_sampler_exact", "SamplerCheck", "SamplerCertificate", "BoundaryPoint",
                "SamplerError", "BatchSampler", "completed_and_target_laws", "samples_to_detect",
                "FLOAT32_POINTS"),
    "stats": ("SubTest", "goodness_of_fit", "detection_threshold", "chi_square_power", "detectable_tv",
              "StringCount", "largest_residuals", "position_marginals", "MIN_EXPECTED", "pool_small_cells",
              "chi_square_distance", "predicted_power", "samples_for_power", "complete_with_target"),
    "adapters": ("from_verifier", "torch_batch_sampler", "transformers_sampler",
                 "find_transformers_speculative_sampling"),
    "strategies": ("distributions", "model_pairs", "adversarial_pairs", "ModelPair", "draft_processes",
                   "available_draft_processes", "chain_lengths"),
    "selftest": ("mutation_table", "format_table", "mutation_suites", "MutationRow"),
    "step": ("check_step", "check_step_exact", "StepCheck", "StepCertificate", "step_from_verifier",
             "UniformSource"),
    "language_models": ("toy_lm", "ToyLM", "transformers_lm", "from_transformers"),
    "properties": ("check_engine_properties", "EngineReport", "PropertyResult", "PROPERTIES", "PROPERTY_MUTANTS"),
    "layouts": ("EngineAdapter", "EngineOutputError", "check_batch", "vllm_rejection_sampler",
                "flashinfer_chain_sampler", "sglang_tree_sampler", "transformers_chain_sampler",
                "vllm_mrv2_rejection_sampler"),
    "power": ("power_report", "PowerReport", "MutantPower", "default_instance", "DEFAULT_INSTANCE",
              "DEFAULT_STEP_INSTANCE", "STEP_CONTEXT"),
}
_WHERE = {name: mod for mod, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'specsim.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
