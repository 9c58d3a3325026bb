"""`nasd`: N-gram Assisted Speculative Decoding (Romsto's ``NGramStorage`` drafter).

The storage maps contexts of ``max(1, ngram_min - 1) .. ngram_order - 1`` tokens (orders
up to ``ngram_order``, default 4) to next-token counts, plus overall token counts.
- it is **initialised with every n-gram of the prompt** (and of later user turns);
- after each pass it is **updated with the emitted tokens** (accepted drafts and the
  target's own token), and, when ``filler_top_k`` > 1, **enriched with the target's
  top-k tokens at each verified position** (each counted once after that position's
  context; the decode loop hands them over, see ``wants_target_topk``);
- drafting: up to ``draft_count`` tokens, each the most frequent follower (ties: the most
  recently counted) of the longest known context, extending the tentative context;
  when no order knows the context the token is *unknown*: with ``stop_if_unknown``
  (default true) the draft stops there, otherwise the most frequent token overall is
  drafted in its place and drafting goes on (Romsto's loop drafts gamma tokens).

Options: ``filler_top_k`` (default 1: no enrichment), ``stop_if_unknown`` (default true).
Cost: O(orders) per counted token and per drafted token; a context's best follower is
kept up to date as counts grow, so a lookup never scans the followers.
"""

from __future__ import annotations

from ._counts import FollowerCounts
from ._options import Option
from .base import Drafter, Proposal


class NasdDrafter(Drafter):
    name = "nasd"
    summary = "NASD: prompt-initialised n-gram storage, updated with accepted tokens and the target's top-k"
    options = {"filler_top_k": Option(1, 1, 64), "stop_if_unknown": Option(True)}

    def __init__(self, settings):
        super().__init__(settings)
        self.max_context = settings.ngram_order - 1
        self.min_context = max(1, settings.ngram_min - 1)
        if self.max_context < 1:
            from ..errors import EngineError

            raise EngineError("nasd: ngram_order must be at least 2 (a context of one token).")
        self.filler_top_k = self.option["filler_top_k"]
        self.stop_if_unknown = self.option["stop_if_unknown"]
        self.reset(())

    @property
    def wants_target_topk(self) -> int:
        return self.filler_top_k if self.filler_top_k > 1 else 0

    def reset(self, prompt_tokens):
        self.tokens: list[int] = []
        self.storage = FollowerCounts()  # contexts -> next-token counts
        self.overall = FollowerCounts()  # () -> token counts (emitted and prompt tokens only)
        self._append(prompt_tokens)

    def extend(self, tokens):
        self._append(tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        if target_topk is not None and self.filler_top_k > 1:
            for i, token in enumerate(emitted):
                position = len(self.tokens)
                for candidate in target_topk[i][: self.filler_top_k]:
                    candidate = int(candidate)
                    if candidate != token:
                        self._count(position, candidate)
                self._append((token,))
        else:
            self._append(emitted)

    def _count(self, position: int, token: int) -> None:
        """Count ``token`` after the contexts ending at ``position`` (exclusive)."""
        self.storage.count_after(self.tokens, position, token, self.min_context, self.max_context)

    def _append(self, new_tokens):
        for token in new_tokens:
            token = int(token)
            self._count(len(self.tokens), token)
            self.tokens.append(token)
            self.overall.add((), token)

    def next_token(self, context: list[int]) -> tuple[int | None, bool]:
        """(most frequent follower of the longest known context, known?)."""
        ngram = self.storage.longest_known(context, self.min_context, self.max_context)
        if ngram is None:
            return self.overall.most_frequent(()), False
        return self.storage.most_frequent(ngram), True

    def propose(self, k):
        context = self.tokens[-self.max_context :] if self.max_context else []
        draft: list[int] = []
        for _ in range(k):
            token, known = self.next_token(context + draft)
            if not known and (self.stop_if_unknown or token is None):
                break
            draft.append(token)
        return Proposal([draft] if draft else [])
