"""specsim: exact simulators for speculative-decoding verification.

One iteration drafts x^{1:L} from a draft model q, verifies it against the target p and emits
x^{1:tau} y.  A verifier is lossless when completing its output with exact target samples gives
the target's joint law, C(z) = P(z) for every z in V^{L+1} (docs/theory.md §2); the exact
engine computes both sides by enumeration, so a certificate is exact, not statistical.

Models map prefixes to next-token laws (:mod:`specsim.models`), draft processes produce draft
trees with their probabilities (:mod:`specsim.drafts`), verifiers return exact outcome laws
(:mod:`specsim.verifiers`) and one engine certifies them (:mod:`specsim.exact`).  The core uses
numpy and scipy only.

The block-verification toy (docs/theory.md §12, R2/R3): p = (1/3, 2/3), q = (2/3, 1/3), L = 2,
where block verification accepts 11/9 tokens per iteration and token verification 10/9.

>>> import specsim
>>> target, draft_model = specsim.iid([1/3, 2/3]), specsim.iid([2/3, 1/3])
>>> specsim.check_lossless(specsim.block, target, draft_model, L=2).lossless
True
>>> [round(specsim.expected_accepted(v, target, draft_model, L=2) * 9, 9) for v in (specsim.block, specsim.token)]
[11.0, 10.0]
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
