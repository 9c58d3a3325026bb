"""The one gate for token ids on their way to the model.

MLX looks up embedding rows without bounds checks: an id outside ``[0, vocab)`` reads
stray memory or kills the process (seen: 4294967295 segfaults, -1 and 2**40 raise
``std::bad_cast``). Ids come from drafters, whose tables may have been read from disk,
and from files; every one is checked here first, whatever its source.

- ``output_size(model)``: the vocabulary as the model sees it, the width of its logits: the
  rows of its output layer (``lm_head``, or the embedding it shares), read from the
  weight's shape (may exceed the tokenizer's vocabulary), else the ``vocab_size`` the
  model's args (or the model itself) state. Never a forward pass.
- ``logits_are_finite(model)``: one short forward pass, whether its logits are finite
  (broken weights give NaN or infinity); run once, at load, by ``check_weights``.
- ``is_token_id(value, vocab)``: the rule: an integer (not a bool) in ``[0, vocab)``.
- ``DraftGate``: applied by the decode loop to every drafter's rows before verification;
  a row is cut at its first bad id (the tokens after it were guessed from it), and the
  first bad id is reported once (``errors.warn``).
"""

from __future__ import annotations

import numbers

from .errors import EngineError, warn

OUTPUT_LAYERS = ("lm_head", "output", "embed_out")  # names of a separate output layer
EMBEDDINGS = ("embed_tokens", "wte", "tok_embeddings", "embeddings", "embedding", "word_embeddings")


def logits_are_finite(model) -> bool:
    """Whether a one-token forward pass on a cache of its own (token 0 exists in every
    vocabulary, and the model's own cache is untouched) gives finite logits."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    logits = model(mx.array([[0]], dtype=mx.uint32), cache=make_prompt_cache(model))
    return bool(mx.all(mx.isfinite(logits.astype(mx.float32))).item())


def output_size(model) -> int:
    """How many token ids the model has: the rows of its output layer, or of the embedding
    it shares with it (a quantized weight packs its columns, never its rows), else the
    ``vocab_size`` its args state. A wrapper over a model split across ranks says it as
    ``draftless_output_size``, read before the split."""
    known = getattr(model, "draftless_output_size", None)
    if isinstance(known, int):
        return known
    layers = dict(model.named_modules()) if hasattr(model, "named_modules") else {}
    for names in (OUTPUT_LAYERS, EMBEDDINGS):
        for path, module in layers.items():
            weight = getattr(module, "weight", None)
            if path.rpartition(".")[2] in names and weight is not None and weight.ndim == 2:
                return int(weight.shape[0])
    args = getattr(model, "args", None)
    for holder in (args, getattr(args, "text_config", None), model):
        size = holder.get("vocab_size") if isinstance(holder, dict) else None
        size = size or getattr(holder, "vocab_size", None)
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            return size
    raise ValueError(f"cannot tell how many token ids {type(model).__name__} has")


def is_token_id(value, vocab_size: int) -> bool:
    return (
        isinstance(value, numbers.Integral)
        and not isinstance(value, bool)
        and 0 <= value < vocab_size
    )


def check_prompt(tokens, vocab_size: int, model_name: str) -> list[int]:
    """The prompt's ids as ints; an EngineError if the tokenizer gave one the model lacks."""
    for token in tokens:
        if not is_token_id(token, vocab_size):
            raise EngineError(
                f"The tokenizer of {model_name} produced token id {token!r}, but the model has "
                f"only {vocab_size} token ids: the tokenizer files do not match the weights. "
                "Pick a complete model folder."
            )
    return [int(t) for t in tokens]


class DraftGate:
    """Keeps out-of-vocabulary ids out of verify passes; says so once per drafter."""

    def __init__(self, vocab_size: int, source: str):
        self.vocab_size = vocab_size
        self.source = source
        self.reported = False

    def rows(self, rows) -> list[list[int]]:
        """``rows`` with each cut before its first id that is not in the vocabulary."""
        clean = []
        for row in rows or ():
            kept = []
            try:
                for token in row:
                    if not is_token_id(token, self.vocab_size):
                        self._report(token)
                        break
                    kept.append(int(token))
            except TypeError:  # not a sequence of tokens at all
                self._report(row)
            clean.append(kept)
        return clean

    def _report(self, token) -> None:
        if self.reported:
            return
        self.reported = True
        warn(
            f"The {self.source} drafter proposed token ids that are not in this model's "
            f"vocabulary (0 to {self.vocab_size - 1}; e.g. {token!r}); they were dropped. "
            "Its saved memory may be damaged."
        )
