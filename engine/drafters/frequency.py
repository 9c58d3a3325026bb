"""`frequency`: akunu's NGramPredictor.

Hash tables for orders 2..N (context of 1..N-1 tokens) count which token followed each
context. Prediction tries the longest context first and backs off; each predicted token
is appended to a tentative context so predictions chain, up to the draft count. Tables
are fed with the prompt and every emitted token; only the context used for matching is a
sliding window (default 512 tokens), the tables themselves are not pruned (as in akunu).

Options: ``history_window`` (default 512). ``ngram_order`` is N (default 4);
``ngram_min`` is the shortest order tried in backoff (at least 2). N = 1 predicts the
most frequent token overall.
"""

from __future__ import annotations

from collections import deque

from ._counts import FollowerCounts
from ._options import Option
from .base import Drafter, Proposal


class FrequencyDrafter(Drafter):
    name = "frequency"
    summary = "akunu's n-gram frequency tables: longest context first, backoff, chained guesses"
    options = {"history_window": Option(512, 1, 1 << 20)}

    def __init__(self, settings):
        super().__init__(settings)
        self.max_context = max(settings.ngram_order - 1, 0)
        self.min_context = min(max(settings.ngram_min - 1, 1), max(self.max_context, 0))
        self.window = deque(maxlen=self.option["history_window"])
        self.counts = FollowerCounts()

    def reset(self, prompt_tokens):
        self.window.clear()
        self.counts = FollowerCounts()
        self._update(prompt_tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self._update(emitted)

    def _update(self, tokens):
        window = self.window
        for token in tokens:
            token = int(token)
            recent = self.recent()
            self.counts.count_after(recent, len(recent), token, self.min_context, self.max_context)
            window.append(token)

    def recent(self) -> list[int]:
        window = self.window
        return [window[i] for i in range(-min(self.max_context, len(window)), 0)]

    def predict_next(self, context: list[int]) -> int | None:
        """The most frequent follower of the longest known suffix of ``context``."""
        ngram = self.counts.longest_known(context, self.min_context, self.max_context)
        return None if ngram is None else self.counts.most_frequent(ngram)

    def predict(self, context: list[int], k: int) -> list[int]:
        """Chain up to ``k`` predictions, each appended to the tentative context."""
        context = list(context)
        draft: list[int] = []
        for _ in range(k):
            token = self.predict_next(context)
            if token is None:
                break
            draft.append(token)
            context.append(token)
        return draft

    def propose(self, k):
        draft = self.predict(self.recent(), k)
        return Proposal([draft] if draft else [])
