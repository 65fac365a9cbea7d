"""Toy language models for real code, and real (tiny) language models as exact toy models.

* :func:`toy_lm` turns a :class:`specsim.models.Model` into a batched callable over prefixes,
  ``lm(prefixes) -> [B, V]`` next-token probabilities or logits, in numpy or torch: the ``target_lm``
  and ``draft_lm`` that :func:`specsim.testing.check_step` hands to a whole speculative step.
* :func:`transformers_lm` wraps a Model in a transformers ``PreTrainedModel`` whose
  ``forward(input_ids)`` returns the toy logits log p(.|input_ids[:, :t+1]) at every position t,
  so that ``generate(..., assistant_model=..., do_sample=True)`` (assisted generation) runs end to
  end on a toy target and a toy draft whose exact laws are known.
* :func:`from_transformers` is the converse: the exact :class:`~specsim.models.Model` of a real
  causal LM, p(.|s) = softmax(logits of the last position of ``prompt + s``), rows computed in
  batches of V siblings.

numpy only at import; torch and transformers are imported inside :func:`transformers_lm`,
:func:`from_transformers` and the torch backend.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .._validate import check_int
from ..models import Model

__all__ = ["ToyLM", "toy_lm", "transformers_lm", "from_transformers"]

_BACKENDS = ("numpy", "torch")
_OUTPUTS = ("probs", "logits")


class ToyLM:
    """A batched next-token callable over prefixes backed by a :class:`~specsim.models.Model`.

    ``lm(prefixes)`` with ``prefixes`` a sequence of B token-id sequences (full prefixes, context
    included) returns a [B, V] array: rows p(.|prefix) (``output="probs"``) or log p(.|prefix)
    with -inf where p = 0 (``output="logits"``), as a float64 numpy array or a torch tensor of
    ``dtype``.  ``lm.row(prefix)`` is the float64 probability row of one prefix.  ``calls`` and
    ``rows`` count the batched calls and the rows served since creation (:meth:`reset_counts`):
    one batched call is one forward pass of a real model.

    Build with :func:`toy_lm`.

    >>> from specsim.models import markov
    >>> from specsim.testing.language_models import toy_lm
    >>> lm = toy_lm(markov([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]]))
    >>> lm([(0,), (0, 1)]).tolist(), lm.calls
    ([[0.9, 0.1], [0.2, 0.8]], 1)
    """

    def __init__(self, model: Model, backend: str, output: str, dtype):
        self.model = model
        self.V = model.V
        self.backend = backend
        self.output = output
        self.dtype = dtype
        self.calls = 0
        self.rows = 0

    def __repr__(self) -> str:
        return f"ToyLM({self.model.name}, V={self.V}, backend={self.backend!r}, output={self.output!r})"

    def reset_counts(self) -> None:
        """Set ``calls`` and ``rows`` back to 0."""
        self.calls = self.rows = 0

    def row(self, prefix: Sequence[int]) -> np.ndarray:
        """p(.|prefix) as a read-only float64 array [V] (not counted as a call)."""
        return self.model(_as_prefix(prefix, "prefix"))

    def __call__(self, prefixes):
        if hasattr(prefixes, "tolist"):  # numpy array or torch tensor [B, T]
            prefixes = prefixes.tolist()
        if isinstance(prefixes, (str, bytes)) or not hasattr(prefixes, "__len__"):
            raise TypeError(f"prefixes must be a sequence of token-id sequences, got {type(prefixes).__name__}")
        rows = np.stack([self.model(_as_prefix(s, f"prefixes[{b}]")) for b, s in enumerate(prefixes)]) \
            if len(prefixes) else np.zeros((0, self.V))
        self.calls += 1
        self.rows += len(prefixes)
        if self.output == "logits":
            with np.errstate(divide="ignore"):
                rows = np.log(rows)
        if self.backend == "torch":
            import torch

            return torch.as_tensor(rows, dtype=_torch_dtype(self.dtype))
        return rows.astype(self.dtype, copy=False)


def _as_prefix(s, name: str) -> tuple[int, ...]:
    if hasattr(s, "tolist"):
        s = s.tolist()
    if isinstance(s, (str, bytes)) or not hasattr(s, "__iter__"):
        raise TypeError(f"{name} must be a sequence of token ids, got {type(s).__name__}")
    out = tuple(s)
    for t in out:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"{name} must hold integer token ids, got {t!r}")
    return tuple(int(t) for t in out)


def _torch_dtype(dtype):
    import torch

    return getattr(torch, dtype) if isinstance(dtype, str) else dtype


def toy_lm(model: Model, backend: str = "numpy", output: str = "probs", dtype=None) -> ToyLM:
    """The batched next-token callable of a toy model: prefixes s_1..s_B -> [p(.|s_b)]_b (or log p).

    Parameters: ``model`` (a :class:`~specsim.models.Model`); ``backend`` ``"numpy"`` or
    ``"torch"``; ``output`` ``"probs"`` or ``"logits"`` (natural log, -inf on zero
    probabilities); ``dtype`` (default float64 for numpy, ``"float32"`` for torch; a name or a
    dtype).

    Returns: a :class:`ToyLM`.

    >>> from specsim.models import iid
    >>> from specsim.testing.language_models import toy_lm
    >>> lm = toy_lm(iid([0.25, 0.75]), backend="torch", output="logits")
    >>> [round(x, 4) for x in lm([()])[0].tolist()]
    [-1.3863, -0.2877]
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a specsim.models.Model, got {type(model).__name__}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {_OUTPUTS}, got {output!r}")
    if dtype is None:
        dtype = np.float64 if backend == "numpy" else "float32"
    return ToyLM(model, backend, output, dtype)


# ----------------------------------------------------------------------------- transformers
_TRANSFORMERS_CLASS = []  # the PreTrainedModel subclass, built on first use (transformers is optional)


def _transformers_class():
    if _TRANSFORMERS_CLASS:
        return _TRANSFORMERS_CLASS[0]
    import torch
    from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import CausalLMOutputWithPast

    class ToyCausalLM(PreTrainedModel, GenerationMixin):
        """A transformers causal LM whose logits are log p(.|input_ids[:, :t+1]) of a specsim Model.

        Its key-value cache holds the token ids themselves (one layer, key = value = the ids as
        floats), so a forward pass on the new tokens alone sees the whole sequence, and a cache
        that generation forgets to crop, or crops wrongly, changes the law, as in a real model.
        """

        config_class = PretrainedConfig
        base_model_prefix = "toy"
        main_input_name = "input_ids"

        def __init__(self, config, model: Model):
            super().__init__(config)
            self.toy = model
            self._anchor = torch.nn.Parameter(torch.zeros(1), requires_grad=False)
            self.post_init()

        def _init_weights(self, module):  # nothing to initialise
            pass

        def forward(self, input_ids=None, attention_mask=None, cache=None, use_cache=None, **kwargs):
            ids = input_ids
            if cache is not None:
                new = input_ids.to(torch.float64)[:, None, :, None]  # [B, heads=1, T, head_dim=1]
                keys, _ = cache.update(new, new, 0)
                ids = keys[:, 0, :, 0].round().long()
            seqs = ids.tolist()
            T_new, T = input_ids.shape[1], ids.shape[1]
            logits = np.empty((len(seqs), T_new, self.toy.V))
            with np.errstate(divide="ignore"):
                for b, seq in enumerate(seqs):
                    for j, t in enumerate(range(T - T_new, T)):
                        logits[b, j] = np.log(self.toy(tuple(seq[: t + 1])))
            out = torch.as_tensor(logits, dtype=torch.float32, device=input_ids.device)
            return CausalLMOutputWithPast(logits=out, cache=cache)

    _TRANSFORMERS_CLASS.append(ToyCausalLM)
    return ToyCausalLM


def transformers_lm(model: Model, pad_token_id: int = 0, eos_token_id: int | None = None):
    """A transformers ``PreTrainedModel`` whose forward pass is the toy model:
    ``forward(input_ids [B, T]).logits[b, t] = log p(.|input_ids[b, :t+1])`` (float32, -inf where
    p = 0).

    Every prefix the model sees includes the prompt, so a prompt c makes the law of the generated
    tokens ``model.shifted(c)``.  It keeps no key-value cache; ``generate`` is called with
    ``use_cache=False`` (the generation config sets it).  With ``eos_token_id=None`` generation
    never stops early, so ``max_new_tokens`` tokens come out.

    Parameters: ``model`` (a :class:`~specsim.models.Model`; its token ids are the vocabulary);
    ``pad_token_id``; ``eos_token_id`` (``None``: none).

    Returns: the ``PreTrainedModel`` (its ``toy`` attribute is ``model``).

    >>> import torch
    >>> from specsim.models import markov
    >>> from specsim.testing.language_models import transformers_lm
    >>> lm = transformers_lm(markov([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]]))
    >>> lm(torch.tensor([[0, 1]])).logits.exp().double().round(decimals=4).tolist()
    [[[0.9, 0.1], [0.2, 0.8]]]
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a specsim.models.Model, got {type(model).__name__}")
    from transformers import PretrainedConfig

    cls = _transformers_class()
    config = PretrainedConfig(vocab_size=model.V, pad_token_id=pad_token_id, eos_token_id=eos_token_id,
                              is_decoder=True, use_cache=True, num_hidden_layers=1)
    lm = cls(config, model)
    lm.generation_config.pad_token_id = pad_token_id
    lm.generation_config.eos_token_id = eos_token_id
    lm.eval()
    return lm


def from_transformers(model, prompt: Sequence[int] = (), V: int | None = None, name: str | None = None,
                      batch_size: int = 256) -> Model:
    """The exact toy model of a real causal LM: p(.|s) = softmax(model(prompt + s).logits[-1]).

    Rows are computed in float64 from the model's logits; when a prefix s' = s + (t,) is first
    asked for, all V siblings s + (v,) run in one batched forward pass (chunks of
    ``batch_size``), so :meth:`Model.table` costs about V^(k-1) / batch_size passes at depth k.

    Parameters: ``model`` (a transformers causal LM, or any callable ``input_ids [B, T] ->``
    an object with ``.logits [B, T, V']``); ``prompt`` (token ids before every prefix; the empty
    prefix needs a non-empty prompt); ``V`` (number of tokens kept, default the logits' width:
    the logits of tokens >= V are dropped and the row renormalised); ``name``; ``batch_size``.

    Returns: a :class:`~specsim.models.Model`.

    >>> import torch
    >>> from specsim.models import iid
    >>> from specsim.testing.language_models import from_transformers, transformers_lm
    >>> m = from_transformers(transformers_lm(iid([0.25, 0.75])), prompt=(0,))
    >>> [round(x, 6) for x in m((1, 1)).tolist()]
    [0.25, 0.75]
    """
    import torch

    prompt = _as_prefix(prompt, "prompt")
    check_int(batch_size, "batch_size", 1)
    device = next(iter(model.parameters())).device if hasattr(model, "parameters") else "cpu"

    def logits_of(seqs):
        with torch.no_grad():
            out = model(torch.tensor(seqs, dtype=torch.long, device=device))
        return out.logits[:, -1].double().cpu().numpy()

    if V is None:
        if not prompt:
            raise ValueError("V must be given when prompt is empty (the empty prefix needs one token to run on)")
        V = logits_of([list(prompt)]).shape[1]
    V = check_int(V, "V", 2)
    rows: dict[tuple[int, ...], np.ndarray] = {}

    def softmax(z):
        z = z[:, :V]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def fn(s):
        if s not in rows:
            if not s:
                if not prompt:
                    raise ValueError("from_transformers: the empty prefix needs a non-empty prompt")
                rows[s] = softmax(logits_of([list(prompt)]))[0]
            else:
                sibs = [s[:-1] + (v,) for v in range(V)]
                for i in range(0, V, batch_size):
                    chunk = sibs[i:i + batch_size]
                    for sib, r in zip(chunk, softmax(logits_of([list(prompt + c) for c in chunk]))):
                        rows[sib] = r
        return rows[s]

    return Model(fn, V, name or f"transformers({type(model).__name__})")
