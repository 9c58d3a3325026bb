"""`prompt-lookup`: vLLM's `ngram` proposer / HF prompt lookup / llama.cpp's ngram-simple family.

Find the most recent earlier occurrence of the longest suffix of the history whose
length is between ``ngram_min`` and ``ngram_order`` (prompt and answer both), and propose
the tokens that followed it.

An index from each n-gram to where its most recent continuation starts is kept up to
date as tokens arrive, so a lookup costs O(ngram_order) whatever the history length.
The n-gram that ends the history has no continuation yet, so it never matches itself.
A continuation that reaches the end of the history keeps copying from the draft itself.
"""

from __future__ import annotations

from .base import Drafter, Proposal, matched_before


class PromptLookupDrafter(Drafter):
    name = "prompt-lookup"
    summary = "most recent earlier match of the longest suffix (ngram_min..ngram_order); copy what followed"

    def __init__(self, settings):
        super().__init__(settings)
        self.min_n = settings.ngram_min
        self.max_n = settings.ngram_order
        self.tokens: list[int] = []
        self.continuation_at: dict[tuple, int] = {}

    def reset(self, prompt_tokens):
        self.tokens = []
        self.continuation_at = {}
        self._append(prompt_tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self._append(emitted)

    def _append(self, new_tokens):
        tokens, index = self.tokens, self.continuation_at
        for token in new_tokens:
            end = len(tokens)
            for n in range(self.min_n, min(self.max_n, end) + 1):
                index[tuple(tokens[end - n : end])] = end
            tokens.append(int(token))

    def propose(self, k):
        tokens = self.tokens
        for n in range(min(self.max_n, len(tokens)), self.min_n - 1, -1):
            start = self.continuation_at.get(tuple(tokens[len(tokens) - n :]))
            if start is not None:
                return Proposal([self.copy_from(start, k)], matched_before(tokens, start, n))
        return Proposal()

    def copy_from(self, start: int, k: int) -> list[int]:
        """``k`` tokens from ``start``; past the end of the history the copy overlaps
        itself (as in LZ77), so a period shorter than ``k`` still drafts ``k`` tokens."""
        tokens, end = self.tokens, len(self.tokens)
        draft: list[int] = []
        for position in range(start, start + k):
            draft.append(tokens[position] if position < end else draft[position - end])
        return draft
