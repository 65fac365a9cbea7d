"""specsim: exact simulators for speculative-decoding verification.

Models map prefixes to next-token laws (:mod:`specsim.models`), draft processes produce draft
trees with their probabilities (:mod:`specsim.drafts`), verifiers return exact outcome laws
(:mod:`specsim.verifiers`) and one engine certifies them (:mod:`specsim.exact`).
"""
from .drafts import DraftTree, chain
from .exact import Certificate, OutputLaw, check_lossless, expected_accepted, output_law
from .models import Model, from_function, iid, markov, mix, random_model, temperature, top_k, top_p
from .verifiers import Outcome, Verifier, block, chain_verifier, greedy, hsd_capped, hsd_released, onehot, token, tree_verifier

__version__ = "0.1.0"
__all__ = [
    "Model", "iid", "markov", "from_function", "random_model", "temperature", "mix", "top_k", "top_p",
    "DraftTree", "chain", "Outcome", "Verifier", "chain_verifier", "tree_verifier",
    "token", "onehot", "block", "greedy", "hsd_released", "hsd_capped",
    "Certificate", "OutputLaw", "check_lossless", "expected_accepted", "output_law",
]
