"""`ngram-map-k`: llama.cpp's ``--spec-type ngram-map-k`` (n-gram key → m-gram value map).

Every complete window of ``n + m`` tokens in the history records "key n-gram was followed
by value m-gram" (one more hit for that pair). At a pass the key is the last ``n`` tokens:
- the candidate is the value that followed this key most often (ties: the most recent);
- no draft until that value has followed the key at least ``min_hits`` times;
- the draft is the value, capped by the number of tokens accepted the last time this key
  drafted (llama.cpp's ``n_accepted``, initially ``m``). As in llama.cpp a key whose last
  draft had nothing accepted is capped at 0 and stays silent.

Options: ``n`` (key size, default 12), ``m`` (value size, default 48), ``min_hits``
(default 1), ``check_rate`` (look up only when at least R tokens arrived since the last
lookup, default 1). ``draft_count`` caps the tokens sent per pass; ``ngram_order`` and
``ngram_min`` are not used.

Cost: one dictionary update per token (O(n + m) to hash the window) and an O(n) lookup,
independent of the history length. Memory: one entry per distinct window.
"""

from __future__ import annotations

from ._options import int_option
from .base import Drafter

MAX_VALUE_COUNT = 16380  # llama.cpp's COMMON_NGRAM_MAX_VALUE_COUNT


class _KeyStats:
    __slots__ = ("values", "cap")

    def __init__(self, m: int):
        self.values: dict[tuple, list[int]] = {}  # value m-gram -> [hits, last start]
        self.cap = m  # tokens accepted the last time this key drafted (llama.cpp n_accepted)


class NgramMapDrafter(Drafter):
    """Shared machinery; subclasses choose the value to draft."""

    max_values: int | None = None  # None: unlimited distinct values per key

    def __init__(self, settings):
        super().__init__(settings)
        self.n = int_option(settings, self.name, "n", 12, 1, 1024)
        self.m = int_option(settings, self.name, "m", 48, 1, 1024)
        self.min_hits = int_option(settings, self.name, "min_hits", 1, 1, MAX_VALUE_COUNT)
        self.check_rate = int_option(settings, self.name, "check_rate", 1, 1, 1 << 20)
        self.reset(())

    def reset(self, prompt_tokens):
        self.tokens: list[int] = []
        self.keys: dict[tuple, _KeyStats] = {}
        self.last_draft: tuple | None = None  # (key, value) of the last draft
        self.last_check = -(1 << 30)
        self._append(prompt_tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        if self.last_draft is not None:
            key, _ = self.last_draft
            if drafted:  # an adaptive policy may have sent none of the proposal
                self.keys[key].cap = accepted
            self.last_draft = None
        self._append(emitted)

    def _append(self, new_tokens):
        tokens, n, m, keys = self.tokens, self.n, self.m, self.keys
        for token in new_tokens:
            tokens.append(int(token))
            start = len(tokens) - n - m
            if start < 0:
                continue
            key = tuple(tokens[start:start + n])
            value = tuple(tokens[start + n:])
            stats = keys.get(key)
            if stats is None:
                stats = keys[key] = _KeyStats(m)
            entry = stats.values.get(value)
            if entry is None:
                if self.max_values is not None and len(stats.values) >= self.max_values:
                    continue  # all value slots taken: llama.cpp ignores further values
                stats.values[value] = [1, start]
            else:
                entry[0] = min(entry[0] + 1, MAX_VALUE_COUNT)
                entry[1] = start

    def choose(self, stats: _KeyStats) -> tuple | None:
        """The value to draft for this key, or None."""
        value, (hits, _) = max(stats.values.items(), key=lambda item: (item[1][0], item[1][1]))
        return value if hits >= self.min_hits else None

    def propose(self, history, k):
        tokens = self.tokens
        size = len(tokens)
        if 0 < size - self.last_check < self.check_rate:
            return []
        self.last_check = size
        if size < self.n:
            return []
        key = tuple(tokens[size - self.n:])
        stats = self.keys.get(key)
        if stats is None or not stats.values:
            return []
        value = self.choose(stats)
        if value is None:
            return []
        length = min(self.m, stats.cap, k)
        if length <= 0:
            return []
        self.last_draft = (key, value)
        self.match_length = self.n
        return [list(value[:length])]


class NgramMapKDrafter(NgramMapDrafter):
    name = "ngram-map-k"
    summary = "llama.cpp ngram-map-k: key n-gram → m-gram seen min_hits times; draft capped by last acceptance"
