"""`ngram-simple`: llama.cpp's ``--spec-type ngram-simple``.

Rule (llama.cpp ``common_ngram_simple_draft``): take the last ``n`` tokens of the history
(the key), find its most recent earlier occurrence, and draft the ``m`` tokens that
followed it (fewer when the match is closer than ``m`` tokens to the end; the search
never falls back to an older occurrence). llama.cpp's code additionally refuses matches
followed by fewer than ``n`` tokens; that rule is not in its documentation and would
never draft on text that repeats with a period shorter than ``n``, so it is left out.
``check_rate`` R: the lookup runs only when at least R tokens arrived since the last
lookup (R = 1: every pass).

Options: ``n`` (key size, default 12), ``m`` (draft size, default 48), ``check_rate``
(default 1). ``draft_count`` caps the tokens sent per pass (so the effective draft is
``min(m, draft_count)``); ``ngram_order``/``ngram_min`` are not used (llama.cpp's sizes
have their own defaults).

Cost: an index from each n-gram to its most recent start with a follower is updated per
token (O(n)), so a lookup is O(n) whatever the history length.
"""

from __future__ import annotations

from ._options import Option
from .base import Drafter, Proposal, matched_before


class NgramSimpleDrafter(Drafter):
    name = "ngram-simple"
    summary = "llama.cpp ngram-simple: last n-gram's most recent earlier match, draft the m tokens after it"
    options = {
        "n": Option(12, 1, 1024),
        "m": Option(48, 1, 1024),
        "check_rate": Option(1, 1, 1 << 20),
    }

    def __init__(self, settings):
        super().__init__(settings)
        self.n, self.m = self.option["n"], self.option["m"]
        self.check_rate = self.option["check_rate"]
        self.tokens: list[int] = []
        self.start_of: dict[tuple, int] = {}  # n-gram -> most recent start that has a follower
        self.last_check = -(1 << 30)

    def reset(self, prompt_tokens):
        self.tokens = []
        self.start_of = {}
        self.last_check = -(1 << 30)
        self._append(prompt_tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self._append(emitted)

    def _append(self, new_tokens):
        tokens, n, index = self.tokens, self.n, self.start_of
        for token in new_tokens:
            start = len(tokens) - n  # the n-gram ending at the current end gets a follower now
            if start >= 0:
                index[tuple(tokens[start:])] = start
            tokens.append(int(token))

    def propose(self, k):
        tokens, n, m = self.tokens, self.n, self.m
        size = len(tokens)
        if 0 < size - self.last_check < self.check_rate:
            return Proposal()
        self.last_check = size
        start = self.start_of.get(tuple(tokens[size - n :]))
        if start is None:
            return Proposal()
        available = min(m, size - (start + n))
        begin = start + n
        return Proposal(
            [tokens[begin : begin + min(available, k)]], matched_before(tokens, start + n, n)
        )
