"""The plain path's own logprob jitter on SmolLM2-135M in float32: the same token after the same
prefix, its log-softmax recomputed in other batch / cache layouts.  Evidence for the default
logprob tolerance of scripts/engine_check.py (ENGINE_CHECK_LOGPROB_ATOL).

    PYTHONPATH=$PWD python scripts/logprob_jitter.py [SEQUENCES] [TOKENS]

Sequences are sampled by ``model.generate(do_sample=True, top_k=8)`` from the prompt the engine
check uses.  Reference layout: one position per forward with the KV cache (plain generation).
Others: the whole sequence in one forward without cache; blocks of 4 positions over the cache
(assisted generation's verification forward: k = 3 drafts + 1); a batch of two left-padded
sequences of different lengths, one forward.  Printed: the largest |difference| of the
log-softmax at the emitted token and over the 8 likeliest tokens of each row.  Not a test.
"""
import sys
import time

import torch


def logprobs_incremental(model, ids, start, block):
    """log_softmax rows predicting ids[start:], computed ``block`` positions per forward over the KV cache."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    out = model(ids[:, :start], past_key_values=cache, use_cache=True)
    rows = [out.logits[0, -1]]
    pos = start
    while pos < ids.shape[1] - 1:
        end = min(pos + block, ids.shape[1] - 1)
        out = model(ids[:, pos:end], past_key_values=out.past_key_values, use_cache=True)
        rows.extend(out.logits[0, i] for i in range(end - pos))
        pos = end
    return torch.log_softmax(torch.stack(rows).float(), dim=-1)


def logprobs_full(model, ids, start):
    return torch.log_softmax(model(ids).logits[0, start - 1:-1].float(), dim=-1)


def logprobs_batched(model, ids, other, start, pad):
    """ids in a batch with ``other`` (another length), left-padded, one forward."""
    L = max(ids.shape[1], other.shape[1])
    rows, mask = [], []
    for x in (ids, other):
        p = L - x.shape[1]
        rows.append(torch.cat([torch.full((1, p), pad, dtype=x.dtype), x], dim=1))
        mask.append(torch.cat([torch.zeros(1, p, dtype=torch.long), torch.ones(1, x.shape[1], dtype=torch.long)], 1))
    ids2, mask2 = torch.cat(rows), torch.cat(mask)
    pos = (mask2.cumsum(-1) - 1).clamp(min=0)
    logits = model(ids2, attention_mask=mask2, position_ids=pos).logits[0]
    off = L - ids.shape[1]
    return torch.log_softmax(logits[off + start - 1:-1].float(), dim=-1)


def main(argv):
    M = int(argv[0]) if argv else 20
    T = int(argv[1]) if len(argv) > 1 else 8
    from specsim import real

    torch.set_num_threads(1)
    torch.manual_seed(0)
    t0 = time.time()
    lm = real.load_model()
    model, tok = lm.model.eval(), lm.tokenizer
    assert next(model.parameters()).dtype == torch.float32
    prompt = tok("The capital of France is", return_tensors="pt")["input_ids"]
    start = prompt.shape[1]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    worst = {"one forward, no cache": [0.0, 0.0], "blocks of 4 over the cache": [0.0, 0.0],
             "batch of 2, left-padded": [0.0, 0.0]}
    with torch.no_grad():
        seqs = [model.generate(prompt, do_sample=True, top_k=8, max_new_tokens=T, min_new_tokens=T,
                               pad_token_id=pad) for _ in range(M)]
        for i, ids in enumerate(seqs):
            ref = logprobs_incremental(model, ids, start, 1)
            emitted = ids[0, start:]
            top = ref.topk(8, dim=-1).indices
            other = seqs[(i + 1) % M][:, :-(1 + i % 3)]
            for name, got in (("one forward, no cache", logprobs_full(model, ids, start)),
                              ("blocks of 4 over the cache", logprobs_incremental(model, ids, start, 4)),
                              ("batch of 2, left-padded", logprobs_batched(model, ids, other, start, pad))):
                d = (got - ref).abs()
                w = worst[name]
                w[0] = max(w[0], float(d.gather(1, emitted[:, None]).max()))
                w[1] = max(w[1], float(d.gather(1, top).max()))
    print(f"# SmolLM2-135M float32, torch {torch.__version__}, {M} sequences x {T} tokens, "
          f"{time.time() - t0:.0f}s: {' '.join(['python scripts/logprob_jitter.py'] + argv)}")
    print("| layout vs one position per forward | max abs diff, emitted token | max abs diff, top 8 of the row |")
    print("|---|---|---|")
    for name, (e, t) in worst.items():
        print(f"| {name} | {e:.3g} | {t:.3g} |")


if __name__ == "__main__":
    main(sys.argv[1:])
