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

from .base import Drafter


class FrequencyDrafter(Drafter):
    name = "frequency"
    summary = "akunu's n-gram frequency tables: longest context first, backoff, chained guesses"

    def __init__(self, settings):
        super().__init__(settings)
        self.max_context = max(settings.ngram_order - 1, 0)
        self.min_context = min(max(settings.ngram_min - 1, 1), max(self.max_context, 0))
        self.window = deque(maxlen=int(settings.options.get("history_window", 512)))
        self.tables: dict[tuple, dict[int, list[int]]] = {}
        self.seen = 0

    def reset(self, prompt_tokens):
        self.window.clear()
        self.tables.clear()
        self.seen = 0
        self._update(prompt_tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self._update(emitted)

    def _update(self, tokens):
        window, tables = self.window, self.tables
        for token in tokens:
            token = int(token)
            recent = [window[i] for i in range(-min(self.max_context, len(window)), 0)]
            for length in range(self.min_context, self.max_context + 1) if self.max_context else (0,):
                if length > len(recent):
                    break
                context = tuple(recent[len(recent) - length:])
                followers = tables.setdefault(context, {})
                entry = followers.get(token)
                if entry is None:
                    followers[token] = [1, self.seen]
                else:
                    entry[0] += 1
                    entry[1] = self.seen
            window.append(token)
            self.seen += 1

    def predict_next(self, context: list[int]) -> int | None:
        """The most frequent follower of the longest known suffix of ``context``."""
        lengths = range(min(self.max_context, len(context)), self.min_context - 1, -1) \
            if self.max_context else (0,)
        for length in lengths:
            followers = self.tables.get(tuple(context[len(context) - length:]))
            if followers:
                # most frequent; ties go to the most recently seen
                return max(followers.items(), key=lambda item: (item[1][0], item[1][1]))[0]
        return None

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

    def propose(self, history, k):
        window = self.window
        context = [window[i] for i in range(-min(self.max_context, len(window)), 0)]
        draft = self.predict(context, k)
        return [draft] if draft else []
