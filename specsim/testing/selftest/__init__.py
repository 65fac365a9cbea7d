"""The suite tested on known-broken implementations: mutants, the power of the checks against
them, and the self-test that runs them all through the public API.

* :mod:`.mutants` -- faulty chain and tree verifiers (:data:`~.mutants.CHAIN_MUTANTS`,
  :data:`~.mutants.TREE_MUTANTS`) and lossless controls, each a :class:`~.mutants.Mutant` record
  pinned to the draft process and depth where the exact engine flags it, and drafting rules that
  change the output law (:data:`~.mutants.POLICY_MUTANTS`);
* :mod:`.power` -- which mutants :func:`~specsim.testing.check_sampler` and
  :func:`~specsim.testing.check_step` detect at a given instance and n (exact laws, non-central
  chi-square), and :func:`~.power.default_instance`, the searched instance on which every chain
  mutant is detected at the checks' defaults (also exported by :mod:`specsim.testing`);
* :mod:`.mutation` -- :func:`~.mutation.mutation_table`: every mutant flagged and every control
  passed, in exact mode (``assert_lossless``) and sampler mode (``check_sampler``).

This package imports nothing itself, so ``check_step`` (which takes its default models from
:mod:`.power`) does not pull in Hypothesis through the self-test runner.
"""
