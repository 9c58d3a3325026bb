"""What the model makes of a text without answering it: a prompt read with each token's
log-probability (what evaluation harnesses score: OpenAI's ``echo`` with ``logprobs``),
and an embedding (the ``/embed`` routes).

The prompt runs through the target in chunks, as prefill does, but with the logits of
every position: token i's log-probability is read from the logits after tokens 0..i-1
(the log-softmax of the model's own logits: no penalty, grammar or temperature applies to
a prompt), with the most likely alternatives there, as ``TokenChooser.token_logprobs``
reads an answer's. The cache then holds the prompt but its last token, as after prefill.
"""

from __future__ import annotations

from collections.abc import Sequence

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from ..errors import EngineError
from ..settings import SamplingSettings
from .decode import PREFILL_STEP, Target, TokenChooser, TokenLogprobs


def score_prompt(target: Target, tokens: Sequence[int], alternatives: int) -> list[TokenLogprobs]:
    """(log-probability, [(token, log-probability)] of the ``alternatives`` most likely) of
    tokens 1.. of ``tokens``, each after the ones before it; ``target``'s cache must be
    empty, and ends holding ``tokens[:-1]``."""
    assert target.offset == 0, "the prompt is scored from an empty cache"
    chooser = TokenChooser(SamplingSettings(), alternatives)
    scored: list[TokenLogprobs] = []
    for start in range(0, len(tokens) - 1, PREFILL_STEP):
        chunk = list(tokens[start : start + PREFILL_STEP])
        following = list(tokens[start + 1 : start + 1 + len(chunk)])
        logits = target.forward(chunk)
        scored += chooser.token_logprobs(logits, tokens[: start + 1], following)
    return scored


def embedding(model, tokens: Sequence[int]) -> list[float]:
    """The mean over ``tokens`` of the model's last hidden state (its backbone's output,
    after the final norm), scaled to length 1: a vector of the model's hidden size. The
    tokens run in chunks through a cache of their own, as prefill does."""
    backbone = getattr(model, "model", None)
    if not callable(backbone):
        raise EngineError("This model's architecture gives no hidden state to embed.")
    cache = make_prompt_cache(model)
    total = None
    for start in range(0, len(tokens), PREFILL_STEP):
        chunk = mx.array(list(tokens[start : start + PREFILL_STEP]), dtype=mx.uint32)[None]
        hidden = backbone(chunk, cache=cache)[0].astype(mx.float32).sum(axis=0)
        total = hidden if total is None else total + hidden
        mx.eval(total)
    mean = total / len(tokens)
    return (mean / mx.maximum(mx.linalg.norm(mean), 1e-12)).tolist()
