"""Distribution-preservation testing for speculative-decoding implementations.

Which check to point at your code.  The report forms return an object whose ``passed`` says
the verdict (print it for the evidence); the Hypothesis forms draw model pairs themselves and raise
with the shrunk counterexample; the fixtures come with the pytest plugin, installed with the package.

======================================  ===============================  ===============================  ==================
you have                                report (returns)                 raises (Hypothesis)              pytest fixture
======================================  ===============================  ===============================  ==================
an exact law ``verifier(draft, p, q)``  :func:`specsim.check_lossless`   :func:`assert_lossless`          ``lossless_check``
a sampler ``fn(draft, p, q, rng)``      :func:`check_sampler`            :func:`assert_sampler_lossless`  ``sampler_check``
a sampler taking its uniforms           :func:`check_sampler_exact`      --                               --
an unmodified sampler, exactly          :func:`check_sampler_exact` on   --                               --
                                        :func:`from_rng_sampler`
a whole step (drafting + verification)  :func:`check_step`               --                               ``step_check``
a step taking its uniforms              :func:`check_step_exact`         --                               --
a batched engine (vLLM, FlashInfer...)  :func:`check_sampler` on         --                               ``sampler_check``
                                        ``adapter.batch_sampler()``,
                                        :func:`check_engine_properties`
a generation loop's law (toy LMs)       :func:`check_step` on the loop   --                               ``step_check``
                                        over :mod:`.language_models`
an engine's whole generations           :func:`check_generation` (vs     --                               --
                                        its own plain sampling:
                                        penalties, top-k/p, EOS,
                                        logprobs)
======================================  ===============================  ===============================  ==================

Starting points: :func:`from_verifier` (a verifier as a sampler), :func:`from_rng_sampler` (a
sampler drawing from numpy's or torch's RNG, its draws routed through injected uniforms),
:func:`step_from_verifier`,
:func:`torch_batch_sampler`, :func:`transformers_sampler`, :class:`BatchSampler`, and
:func:`default_instance` (the model pair each check's stated power refers to).  Errors:
:class:`LossyVerifierError`, :class:`SamplerError` (with :class:`EngineOutputError`, output an
engine cannot have meant) and :class:`InconclusiveCheckError` (too little data to decide).

The back rooms, imported from their modules: :mod:`.uniforms` (the injected-uniform random source), :mod:`.engines` (vLLM, FlashInfer, SGLang,
transformers layouts), :mod:`.stats` (the chi-square's power planning and failure reports),
:mod:`.strategies` (Hypothesis strategies), :mod:`.language_models` (toy and transformers LMs),
:mod:`.selftest` (the suite tested on known-broken implementations: its :mod:`~.selftest.mutants`,
:mod:`~.selftest.power` and the :mod:`~.selftest.mutation` table), :mod:`.report` (the result
base of the statistical checks),
:mod:`.generation` (whole generations: :mod:`~.generation.toy`, a reference engine and its
mutants, and the engine adapters :mod:`~.generation.transformers`, :mod:`~.generation.llamacpp`,
:mod:`~.generation.mlx`, :mod:`~.generation.openvino`, :mod:`~.generation.mistralrs`), :mod:`.plugin`
(pytest fixtures).

Names are loaded on first use (so the pytest plugin, which lives in this package, imports only
pytest and numpy); nothing here imports cvxpy, torch or triton.
"""
import importlib as _importlib

_EXPORTS = {
    "assertions": ("assert_lossless", "assert_sampler_lossless", "LossyVerifierError", "InconclusiveCheckError"),
    "sampler": ("check_sampler", "check_sampler_exact", "SamplerCheck", "SamplerError", "BatchSampler"),
    "step": ("check_step", "check_step_exact", "StepCheck", "step_from_verifier"),
    "properties": ("check_engine_properties", "EngineReport"),
    "engines": ("EngineAdapter", "EngineOutputError"),
    "adapters": ("from_verifier", "torch_batch_sampler", "transformers_sampler"),
    "uniforms": ("from_rng_sampler",),
    "selftest.power": ("default_instance",),
    "generation": ("check_generation",),
}
_WHERE = {name: mod for mod, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'specsim.testing' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(__all__) | {"__doc__", "__name__"})
