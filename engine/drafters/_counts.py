"""One n-gram follower table for the counting drafters (frequency, nasd, ngram-cache)."""

from __future__ import annotations

from collections.abc import Sequence


class FollowerCounts:
    """n-gram (tuple) → {next token: count}, with each n-gram's total and its most
    frequent follower kept up to date as counts grow (ties go to the most recently counted).
    The empty n-gram ``()`` counts tokens overall."""

    def __init__(self):
        self.parts: dict[tuple, dict[int, int]] = {}
        self.best: dict[tuple, list[int]] = {}  # ngram -> [total, best token, best count]

    def __len__(self):
        return len(self.parts)

    def add(self, ngram: tuple, token: int, count: int = 1) -> None:
        part = self.parts.get(ngram)
        if part is None:
            part = self.parts[ngram] = {}
            best = self.best[ngram] = [0, token, 0]
        else:
            best = self.best[ngram]
        new = part.get(token, 0) + count
        part[token] = new
        best[0] += count
        if new >= best[2]:
            best[1], best[2] = token, new

    def most_frequent(self, ngram: tuple) -> int | None:
        best = self.best.get(ngram)
        return None if best is None else best[1]

    def count_after(
        self, tokens: Sequence[int], position: int, token: int, n_min: int, n_max: int
    ) -> None:
        """Count ``token`` after each n-gram of ``n_min..n_max`` tokens ending before ``position``."""
        for n in range(n_min, min(n_max, position) + 1):
            self.add(tuple(tokens[position - n : position]), token)

    def update(self, tokens: Sequence[int], start: int, n_min: int, n_max: int) -> None:
        """Count every token at index >= ``start`` after its preceding n-grams."""
        for i in range(start, len(tokens)):
            self.count_after(tokens, i, tokens[i], n_min, n_max)

    def longest_known(self, context: Sequence[int], n_min: int, n_max: int) -> tuple | None:
        """The longest suffix of ``context`` (``n_max`` down to ``n_min`` tokens) with counts."""
        for n in range(min(n_max, len(context)), n_min - 1, -1):
            ngram = tuple(context[len(context) - n :])
            if ngram in self.best:
                return ngram
        return None
