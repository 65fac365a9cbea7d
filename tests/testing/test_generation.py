"""check_generation: the processed law against exact rationals, the toy speculative generator and its
mutants, two-sample mode, logprobs, and malformed engine output."""
import itertools
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from specsim.models import from_function
from specsim.testing import SamplerError
from specsim.testing.generation import (FLOAT32_LOGPROB_ATOL, Generation, GenerationEngine, SamplingParams,
                                        check_generation, default_params, generation_law, homogeneity,
                                        process_logits)
from specsim.testing.generation.toy import MUTANT_SETTINGS, MUTANTS, toy_engine

# ----------------------------------------------------------------------------- exact processing law
V = 3
TEXT = ("a", "b", "ab")


def rational_row(s):
    """A prefix-dependent rational row (depends on the length and the last token), no entry 0 or 1."""
    key = (len(s), s[-1] if s else -1)
    w = [1 + (7 * key[0] + 3 * (key[1] + 1) + 5 * v * v + 2 * v * key[0]) % 6 for v in range(V)]
    return [Fraction(x, sum(w)) for x in w]


MODEL = from_function(lambda s: [float(x) for x in rational_row(s)], V, "rational toy")


def rational_processed(prompt, g, th):
    """pi_theta written a second way, in exact rationals: the toy's logits are log p, so the
    repetition penalty r (integer) maps p -> p^r on seen tokens, a penalty ln 2 halves a weight,
    temperature 1/2 squares the weights; truncations compare exact fractions."""
    w = list(rational_row(prompt + g))
    seen = set(prompt) | set(g)
    for v in range(V):
        if v in seen:
            w[v] = w[v] ** int(th.repetition_penalty)
        n = g.count(v)
        if n:
            w[v] /= 2 ** (int(th.presence_penalty > 0) + n * int(th.frequency_penalty > 0))
    n_ = th.no_repeat_ngram_size
    seq = prompt + g
    if n_ and len(seq) >= n_ - 1:
        for i in range(len(seq) - n_ + 1):
            if seq[i:i + n_ - 1] == seq[len(seq) - n_ + 1:]:
                w[seq[i + n_ - 1]] = Fraction(0)
    if th.eos_token_id is not None and len(g) < th.min_new_tokens:
        w[th.eos_token_id] = Fraction(0)
    if th.temperature == 0.5:
        w = [x * x for x in w]
    tot = sum(w)
    w = [x / tot for x in w]
    for step in th.order:
        ranked = sorted(range(V), key=lambda v: (-w[v], v))
        if step == "top_k" and th.top_k:
            keep = set(ranked[:th.top_k])
        elif step == "top_p" and th.top_p < 1:
            keep, mass = set(), Fraction(0)
            for v in ranked:
                if mass >= Fraction(th.top_p):
                    break
                keep.add(v)
                mass += w[v]
        elif step == "min_p" and th.min_p:
            keep = {v for v in range(V) if w[v] >= Fraction(th.min_p) * max(w)}
        else:
            continue
        w = [x if v in keep else Fraction(0) for v, x in enumerate(w)]
        tot = sum(w)
        w = [x / tot for x in w]
    return w


def brute_force_law(prompt, th):
    """Sum over all V^N strings of their exact probability, each cut at its first stop."""
    law = {}
    N = th.max_new_tokens
    for s in itertools.product(range(V), repeat=N):
        prob, cut = Fraction(1), N
        for k in range(N):
            prob *= rational_processed(prompt, s[:k], th)[s[k]]
            if prob == 0:
                break
            text, before = "".join(TEXT[t] for t in s[:k + 1]), "".join(TEXT[t] for t in s[:k])
            if (th.eos_token_id is not None and s[k] == th.eos_token_id) or \
                    any(x in text and x not in before for x in th.stop_strings):
                cut = k + 1
                break
        if prob:
            law[s[:cut]] = law.get(s[:cut], Fraction(0)) + prob / (V ** (N - cut))  # the cut tail is summed out
    return law


LN2 = math.log(2)
EXACT_CASES = {
    "temperature": SamplingParams(temperature=0.5, max_new_tokens=3),
    "top_k": SamplingParams(top_k=2, max_new_tokens=3),
    "top_p": SamplingParams(top_p=0.6, max_new_tokens=3),
    "top_k->top_p": SamplingParams(top_k=2, top_p=0.55, max_new_tokens=3),
    "top_p->top_k": SamplingParams(top_k=1, top_p=0.55, order=("top_p", "top_k", "min_p"), max_new_tokens=3),
    "min_p": SamplingParams(min_p=0.45, max_new_tokens=3),  # no weight ratio of this toy is 0.45 (no ties),
    "repetition": SamplingParams(repetition_penalty=2.0, max_new_tokens=3),
    "presence": SamplingParams(presence_penalty=LN2, max_new_tokens=3),
    "frequency": SamplingParams(frequency_penalty=LN2, max_new_tokens=3),
    "no_repeat": SamplingParams(no_repeat_ngram_size=2, max_new_tokens=4),
    "eos+min_new": SamplingParams(eos_token_id=2, min_new_tokens=2, max_new_tokens=4),
    "stop": SamplingParams(stop_strings=("ba",), max_new_tokens=3),
    "everything": SamplingParams(temperature=0.5, top_k=2, repetition_penalty=2.0, frequency_penalty=LN2,
                                 eos_token_id=1, min_new_tokens=1, stop_strings=("aa",), max_new_tokens=3),
}


@pytest.mark.parametrize("case", list(EXACT_CASES))
def test_generation_law_equals_rational_brute_force(case):
    th = EXACT_CASES[case]
    prompt = (1, 0)
    law = generation_law(lambda s: np.log(MODEL(tuple(s))), prompt, th, TEXT)
    exact = brute_force_law(prompt, th)
    assert set(law) == {s for s, p in exact.items() if p > 0}
    for s, p in exact.items():
        assert law[s] == pytest.approx(float(p), abs=1e-12), s
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)


def test_order_of_truncations_matters_on_this_toy():
    """The top-k/top-p order mutant needs a setting where the order changes the law."""
    th = default_params()["top_k->top_p"]
    eng = toy_engine()
    swapped = replace(th, order=("top_p", "top_k", "min_p"))
    assert generation_law(eng.logits, (1,), th) != generation_law(eng.logits, (1,), swapped)


# ----------------------------------------------------------------------------- mutants and clean engines
MUTANT_ROWS = MUTANT_SETTINGS  # the setting each mutant is checked on (the row that must fail)


@pytest.mark.parametrize("mutant", MUTANTS)
def test_every_mutant_is_flagged(mutant):
    row = MUTANT_ROWS[mutant]
    res = check_generation(toy_engine(mutant=mutant), params={row: default_params()[row]}, n=500)
    assert res.verdict == "FAIL", str(res)
    assert res.row(row).verdict == "FAIL" and res.row(row).witness.startswith(("speculative", "logprob: speculative"))


@pytest.mark.parametrize("mutant", ["penalty_bonus_only", "top_k_top_p_swapped", "eos_mid_block_ignored",
                                    "min_new_tokens_too_long"])
def test_law_mutants_are_flagged_without_logprobs(mutant):
    """The law alone (logprobs dropped) catches the mutants that change the law."""
    eng = toy_engine(mutant=mutant)
    inner = eng.generate
    eng = replace(eng, generate=lambda *a: replace(inner(*a), logprobs=None))
    row = MUTANT_ROWS[mutant]
    res = check_generation(eng, params={row: default_params()[row]}, n=500)
    assert res.row(row).verdict == "FAIL" and "moved" in res.row(row).witness, str(res)
    assert res.row(row).position is not None


@pytest.mark.parametrize("verifier, rows", [("block", ("presence_penalty", "top_k->top_p", "stop_strings",
                                                       "min_new_tokens")),
                                            ("token", ("eos", "frequency_penalty"))])
def test_clean_generator_passes_with_multi_token_accepts(verifier, rows):
    params = {k: default_params()[k] for k in rows}
    eng = toy_engine(verifier=verifier)
    res = check_generation(eng, params=params, n=200, seed=1)
    assert res.verdict == "PASS", str(res)
    stats = eng.generate.stats
    assert stats["accepted"] / stats["steps"] > 1.5  # blocks of several tokens were accepted
    assert "PASS" in str(res) and rows[0] in str(res)


def test_two_sample_mode_passes_clean_and_flags_mutants():
    th = {"eos": default_params()["eos"]}
    assert check_generation(toy_engine(), params=th, n=400, mode="two-sample").verdict == "PASS"
    bad = check_generation(toy_engine(mutant="eos_mid_block_ignored"), params=th, n=400, mode="two-sample")
    assert bad.verdict == "FAIL" and bad.rows[0].mode == "two-sample" and "moved" in bad.rows[0].witness
    lp = check_generation(toy_engine(mutant="logprob_zero"), params=th, n=200, mode="two-sample")
    assert lp.verdict == "FAIL" and lp.rows[0].witness.startswith("logprob")


def test_too_few_generations_is_inconclusive():
    res = check_generation(toy_engine(), params={"t": SamplingParams(temperature=0.6, max_new_tokens=4)}, n=3)
    assert res.verdict == "INCONCLUSIVE" and not res.passed


def test_homogeneity_false_alarms_and_power():
    """Same law: rejections at most at the level; laws 0.2 apart in TV at n = 2000: rejected."""
    rng = np.random.default_rng(5)
    p = np.array([0.4, 0.3, 0.2, 0.1])
    c = np.array([0.2, 0.3, 0.2, 0.3])  # TV(c, p) = 0.2
    from collections import Counter
    draw = lambda law, n: Counter(rng.choice(4, size=n, p=law).tolist())  # noqa: E731
    false = sum(homogeneity(draw(p, 500), draw(p, 500), 0.05, 0.99, rng)[5] for _ in range(200))
    assert false <= 22  # Binomial(200, 0.05): P(> 22) < 0.01
    _, _, _, tv, _, rejected = homogeneity(draw(c, 2000), draw(p, 2000), 1e-3, 0.99, rng)
    assert rejected and tv < 0.2


# ----------------------------------------------------------------------------- malformed output
def fake(out):
    return GenerationEngine(lambda prompt, n, params, spec, rng: out, V=4, name="fake")


@pytest.mark.parametrize("out, words", [
    (Generation((1, 2), None), "without a stop reason"),
    (Generation((1, 2), "length"), "without a stop reason"),
    (Generation((1, 7, 0, 0), None), "outside the vocabulary"),
    (Generation((1, 2, 0, 0), None, (0.1, -1.0, -1.0, -1.0)), "not the log of a positive probability"),
    (Generation((1, 2, 0, 0), None, (float("nan"), -1.0, -1.0, -1.0)), "not the log"),
    (Generation((1, 2, 0, 0), None, (-1.0,)), "logprobs for 4 tokens"),
    (Generation((1, 2, 0, 0, 1), None), "at most n_tokens"),
    (Generation((1,), "finished"), "stop reason"),
    ("1 2 3", "expected a Generation"),
])
def test_bad_engine_output_raises_sampler_error(out, words):
    with pytest.raises(SamplerError, match=words) as err:
        check_generation(fake(out), params=SamplingParams(max_new_tokens=4), n=5)
    assert "fake: " in str(err.value) and "call 0" in str(err.value)


def test_tuple_output_and_stop_reason_accepted():
    eng = GenerationEngine(lambda prompt, n, params, spec, rng: ((0,), "eos"), V=4, name="tuple")
    res = check_generation(eng, params=SamplingParams(max_new_tokens=3), n=20, mode="two-sample")
    assert res.verdict == "PASS" or res.verdict == "INCONCLUSIVE"


@pytest.mark.parametrize("factor, flagged", [(2.0, True), (-2.0, True), (0.5, False), (-0.5, False)])
def test_float32_logprob_tolerance_still_flags_a_larger_gap(factor, flagged):
    """Negative control for FLOAT32_LOGPROB_ATOL: a speculative logprob off by twice the tolerance
    (either sign) fails the row, half of it does not (same tokens on both sides: the law agrees)."""
    plain = math.log(0.5)

    def generate(prompt, n, params, spec, rng):
        return Generation((1, 2), "length", (plain + (factor * FLOAT32_LOGPROB_ATOL if spec else 0.0), plain))

    res = check_generation(GenerationEngine(generate, V=4, name="shifted"), params=SamplingParams(max_new_tokens=2),
                           n=20, mode="two-sample", logprob_atol=FLOAT32_LOGPROB_ATOL)
    row = res.rows[0]
    assert (row.verdict == "FAIL") == flagged, str(res)
    if flagged:
        assert row.witness.startswith("logprob: speculative") and "position 1" in row.witness, row.witness


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ValueError, match="order"):
        SamplingParams(order=("top_k", "top_p"))
    with pytest.raises(TypeError, match="stop_strings"):
        SamplingParams(stop_strings="ab")
    with pytest.raises(TypeError, match="engine"):
        check_generation(lambda *a: None)
    with pytest.raises(ValueError, match="exact"):
        check_generation(fake(Generation((0,), "eos")), mode="exact")
    with pytest.raises(ValueError, match="stop_strings need token_text"):
        generation_law(lambda s: np.zeros(3), (), SamplingParams(stop_strings=("a",)))
    with pytest.raises(ValueError, match="no token is left"):
        process_logits(np.full(3, -np.inf), (), (), SamplingParams())


# ----------------------------------------------------------------------------- transformers adapter
@pytest.mark.usefixtures("one_torch_thread")
def test_transformers_assisted_generation_exact_mode_on_toys():
    """transformers' assisted generation on toy target and draft (exact mode): no law test rejects and
    every logprob equals log pi_theta; the same engine with the repetition penalty dropped on its
    speculative side only is flagged (its logprobs, exact, move at any n)."""
    pytest.importorskip("transformers")
    from specsim.testing.generation.toy import default_models
    from specsim.testing.generation.transformers import transformers_engine
    from specsim.testing.language_models import transformers_lm

    target, draft = default_models()
    eng = transformers_engine(transformers_lm(target), transformers_lm(draft), num_assistant_tokens=3)
    th = {"repetition_penalty": SamplingParams(repetition_penalty=2.0, eos_token_id=3, max_new_tokens=3)}
    res = check_generation(eng, params=th, n=25)
    assert res.verdict != "FAIL" and res.mode == "exact", str(res)
    assert not any(t.rejected for t in res.rows[0].subtests)
    inner = eng.generate
    broken = replace(eng, generate=lambda p, n, theta, spec, rng: inner(
        p, n, replace(theta, repetition_penalty=1.0) if spec else theta, spec, rng), name="penalty dropped")
    bad = check_generation(broken, params=th, n=10)
    assert bad.verdict == "FAIL" and "speculative" in bad.rows[0].witness, str(bad)


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("kw", [dict(mode="assistant", schedule="heuristic", confidence_threshold=0.3),
                                dict(mode="prompt_lookup")])
def test_transformers_adapter_on_tiny_llama_two_sample(kw):
    """A random 2-layer Llama (V = 40, nothing downloaded) as target, another as draft: the adapter
    runs end to end in two-sample mode, with valid outputs and logprobs that match the plain path's."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from specsim.testing.generation.transformers import transformers_engine

    def llama(seed):
        torch.manual_seed(seed)
        cfg = transformers.LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        return transformers.LlamaForCausalLM(cfg).eval()

    eng = transformers_engine(llama(0), llama(1), exact=False, **kw)
    th = {"top_k": SamplingParams(top_k=2, temperature=0.5, no_repeat_ngram_size=2, max_new_tokens=2)}
    res = check_generation(eng, prompt=(3, 1, 4, 1), params=th, n=30)
    assert res.mode == "two-sample" and res.verdict != "FAIL", str(res)


@pytest.mark.usefixtures("one_torch_thread")
def test_lookup_drafts_counts_prompt_lookup_proposals():
    """On a repeated prompt prompt lookup proposes and the target accepts drafts (toy LMs, V = 3):
    the counts add up (tokens generated = accepted + steps, no EOS), the class is restored on exit,
    and a prompt with no repeat proposes nothing."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator as C

    from specsim.models import random_model
    from specsim.testing.generation.transformers import LookupDrafts, transformers_engine
    from specsim.testing.language_models import transformers_lm

    before = dict(vars(C))
    eng = transformers_engine(transformers_lm(random_model(3, 0)), mode="prompt_lookup", prompt_lookup_num_tokens=3)
    th, rng = SamplingParams(max_new_tokens=6), np.random.default_rng(0)
    with LookupDrafts() as counts:
        made = sum(len(eng.generate((0, 1, 2, 0, 1, 2, 0, 1), 6, th, True, rng)[0]) for _ in range(10))
    assert counts.proposed > 0 and 0 < counts.accepted <= counts.proposed, str(counts)
    assert made == counts.accepted + counts.calls == 60
    assert dict(vars(C)) == before
    with LookupDrafts() as none:
        eng.generate((0, 1, 2), 1, replace(th, max_new_tokens=1), True, rng)
    assert none.proposed == none.accepted == 0 and none.calls == 1
    with LookupDrafts() as outside:
        pass
    eng.generate((0, 1, 2, 0, 1, 2, 0, 1), 6, th, True, rng)
    assert outside.calls == 0
