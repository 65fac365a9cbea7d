"""transformers' whole assisted-generation loop (candidate generation, _speculative_sampling,
cache cropping, the adaptive number of assistant tokens) on toy target and draft models whose
exact laws are known, through check_step; and from_transformers on a tiny random Llama."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from specsim.models import random_model  # noqa: E402
from specsim.testing import check_step
from specsim.testing.language_models import from_transformers, transformers_lm  # noqa: E402

CONTEXT = (1, 2)


def assisted_generation_step(max_new_tokens):
    """One call of ``generate(prompt, assistant_model=..., do_sample=True)``: the emitted tokens are
    the ``max_new_tokens`` generated ones (no EOS, so exactly that many), torch seeded from rng."""
    built = {}

    def step(context, target_lm, draft_lm, rng):
        if not built:
            built["t"], built["d"] = transformers_lm(target_lm.model), transformers_lm(draft_lm.model)
        torch.manual_seed(int(rng.integers(2 ** 62)))
        prompt = torch.tensor([list(context)])
        out = built["t"].generate(prompt, assistant_model=built["d"], do_sample=True,
                                  max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens)
        return out[0, prompt.shape[1]:]

    step.name = "transformers.generate(assistant_model=...)"
    return step


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_toy_logits_are_the_model():
    target = random_model(3, 5)
    lm = transformers_lm(target)
    logits = lm(torch.tensor([[1, 2, 0]])).logits[0].double().exp().numpy()
    for t, prefix in enumerate([(1,), (1, 2), (1, 2, 0)]):
        np.testing.assert_allclose(logits[t], target(prefix), rtol=1e-6)


def test_assisted_generation_preserves_the_target_law():
    """Law of the first 3 generated tokens against P(. | prompt) on V^3 (27 cells): the verdict on
    transformers' assisted generation."""
    res = check_step(assisted_generation_step(3), random_model(3, 31, 0.8), random_model(3, 32, 0.8),
                     n=1000, max_tokens=3, context=CONTEXT)
    assert res.passed, str(res)
    assert res.length_counts == (0, 0, 1000)
    assert res.detectable_tv < 0.2


def test_from_transformers_is_the_exact_law_of_a_tiny_llama():
    config = transformers.LlamaConfig(vocab_size=8, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    torch.manual_seed(0)
    llama = transformers.LlamaForCausalLM(config).eval()
    model = from_transformers(llama, prompt=(3,))
    assert model.V == 8
    with torch.no_grad():
        direct = llama(torch.tensor([[3, 5, 1]])).logits[0, -1].double().softmax(-1).numpy()
    np.testing.assert_allclose(model((5, 1)), direct, atol=1e-6)
    P = model.joint(2)
    assert P.shape == (64,) and abs(P.sum() - 1) < 1e-9
