"""The draft → verify → accept → rollback loop, greedy and sampled.

The model call (``Target``) is kept apart from choosing tokens (``TokenChooser``), as in
mlx-lm's generate.py. Invariants, pinned by tests:
- greedy: the emitted tokens equal plain greedy decoding, token for token;
- sampled: each emitted token is the target's own sample at its position, and a draft
  token is kept only if it equals that sample;
- every pass emits at least one token;
- after a pass the KV cache holds exactly the history but its last token, which is the
  next pass's first input (``target.offset == len(history) - 1``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache
from mlx_lm.sample_utils import make_logits_processors, make_sampler

from .drafters.base import Drafter
from .settings import SamplingSettings

PREFILL_STEP = 512


class Target:
    """The target model and its KV cache: the only code that calls the model."""

    def __init__(self, model):
        self.model = model
        self.cache = make_prompt_cache(model)
        self.trimmable = can_trim_prompt_cache(self.cache)

    @property
    def offset(self) -> int:
        return self.cache[0].offset if self.cache else 0

    def prefill(self, tokens: Sequence[int], progress: Callable[[int, int], None] | None = None) -> None:
        """Run ``tokens`` into the cache without computing output logits."""
        for start in range(0, len(tokens), PREFILL_STEP):
            chunk = mx.array(tokens[start:start + PREFILL_STEP], dtype=mx.uint32)[None]
            self.model(chunk, cache=self.cache)
            mx.eval([c.state for c in self.cache])
            if progress:
                progress(min(start + PREFILL_STEP, len(tokens)), len(tokens))

    def forward(self, tokens: Sequence[int]) -> mx.array:
        """Logits (float32, shape [len(tokens), vocab]) for each input position."""
        logits = self.model(mx.array(tokens, dtype=mx.uint32)[None], cache=self.cache)
        return logits[0].astype(mx.float32)

    def trim(self, count: int) -> None:
        if count > 0:
            trim_prompt_cache(self.cache, count)

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` cached positions."""
        if self.offset > length:
            if not self.trimmable:
                self.cache = make_prompt_cache(self.model)
                return
            self.trim(self.offset - length)

    def reset(self) -> None:
        self.cache = make_prompt_cache(self.model)


class TokenChooser:
    """Turns logits into the target's own choices: argmax, or mlx-lm's sampler."""

    def __init__(self, sampling: SamplingSettings):
        self.sampler = make_sampler(temp=sampling.temperature, top_p=sampling.top_p,
                                    min_p=sampling.min_p, top_k=sampling.top_k)
        self.processors = make_logits_processors(repetition_penalty=sampling.repetition_penalty)
        self.greedy = sampling.greedy

    def choose(self, logits: mx.array, history: Sequence[int], draft: Sequence[int]) -> list[int]:
        """The target's token at each of the ``len(draft) + 1`` positions.

        Position i sees ``history + draft[:i]``; logits processors are applied per
        position exactly as plain decoding would apply them.
        """
        if self.processors:
            rows = []
            context = mx.array(list(history) + list(draft), dtype=mx.uint32)
            for i in range(logits.shape[0]):
                row = logits[i:i + 1]
                for processor in self.processors:
                    row = processor(context[:len(history) + i], row)
                rows.append(row)
            logits = mx.concatenate(rows, axis=0)
        if self.greedy:
            return mx.argmax(logits, axis=-1).tolist()
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        return self.sampler(logprobs).tolist()


@dataclass
class PassResult:
    tokens: list[int]  # emitted by this pass: accepted drafts, then the target's token
    accepted: int  # how many of ``tokens`` came from the draft
    drafted: int
    seconds: float
    drafter_seconds: float
    row: int = 0


class FixedDraftLength:
    """Draft exactly what the settings ask for (adaptive policies replace this)."""

    def draft_length(self, limit: int) -> int:
        return limit

    def record(self, drafted: int, accepted: int, seconds: float) -> None:
        pass


def top_k_tokens(logits: mx.array, k: int, count: int) -> list[list[int]]:
    """The target's ``k`` most likely tokens at the first ``count`` positions."""
    rows = logits[:count]
    return mx.argpartition(-rows, kth=k - 1, axis=-1)[:, :k].tolist()


def speculative_decode(
    target: Target,
    drafter: Drafter,
    chooser: TokenChooser,
    history: list[int],
    *,
    max_tokens: int,
    draft_count: int,
    eos_tokens: set[int],
    speculate: bool = True,
    policy=None,
) -> Iterator[PassResult]:
    """Decode after ``history`` (whose last token is not yet in the cache).

    ``history`` is extended in place with every emitted token. Stops after an
    end-of-sequence token or ``max_tokens`` emitted tokens; the caller may stop
    pulling between passes to cancel.
    """
    assert target.offset == len(history) - 1, "cache must hold the history but its last token"
    policy = policy or FixedDraftLength()
    produced = 0
    while produced < max_tokens:
        started = time.perf_counter()
        limit = min(draft_count, max_tokens - produced - 1) if speculate else 0
        limit = policy.draft_length(limit) if limit > 0 else 0
        rows = drafter.propose(history, limit) if limit > 0 else []
        draft = list(rows[0][:limit]) if rows else []
        for i, token in enumerate(draft):  # a draft never runs past end-of-sequence
            if token in eos_tokens:
                del draft[i + 1:]
                break
        drafted_at = time.perf_counter()

        logits = target.forward([history[-1]] + draft)
        choices = chooser.choose(logits, history, draft)
        accepted = 0
        while accepted < len(draft) and choices[accepted] == draft[accepted]:
            accepted += 1
        emitted = draft[:accepted]
        if not (emitted and emitted[-1] in eos_tokens):
            emitted.append(choices[accepted])
        topk = (top_k_tokens(logits, drafter.wants_target_topk, len(emitted))
                if drafter.wants_target_topk else None)
        history.extend(emitted)
        target.trim(target.offset - (len(history) - 1))
        verified_at = time.perf_counter()

        drafter.observe(emitted, accepted=min(accepted, len(emitted)), target_topk=topk)
        done_at = time.perf_counter()
        produced += len(emitted)
        policy.record(len(draft), accepted, verified_at - drafted_at)
        yield PassResult(emitted, min(accepted, len(emitted)), len(draft), done_at - started,
                         (drafted_at - started) + (done_at - verified_at))
        if emitted[-1] in eos_tokens:
            return
