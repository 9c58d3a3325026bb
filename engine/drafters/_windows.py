"""The key → window index shared by ``ngram-map-k`` (and k4v) and ``ngrammys``.

Every complete window of ``key_size + value_size`` tokens of the history records "this
key (its first ``key_size`` tokens) was followed by this value (the rest)": one more
count, and the window's start as the value's most recent occurrence. The drafters read
it with their own rules (which value to draft, caps, rankings).

Cost: one dictionary update per token (O(key + value) to hash the window), independent
of the history length. Memory: one entry per distinct window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Entry = list[int]  # [count, start of the most recent occurrence]


class WindowIndex:
    def __init__(
        self,
        key_size: int,
        value_size: int,
        *,
        max_values: int | None = None,
        max_count: int | None = None,
        on_update: Callable[[tuple, tuple, Entry], None] | None = None,
    ):
        """``max_values``: distinct values kept per key (later new ones are ignored);
        ``max_count``: counts stop growing there; ``on_update(key, value, entry)`` after
        every counted window."""
        self.key_size = key_size
        self.value_size = value_size
        self.max_values = max_values
        self.max_count = max_count
        self.on_update = on_update
        self.tokens: list[int] = []
        self.keys: dict[tuple, dict[tuple, Entry]] = {}

    def extend(self, new_tokens: Sequence[int]) -> None:
        tokens, keys, size = self.tokens, self.keys, self.key_size
        width = size + self.value_size
        for token in new_tokens:
            tokens.append(int(token))
            start = len(tokens) - width
            if start < 0:
                continue
            key = tuple(tokens[start : start + size])
            value = tuple(tokens[start + size :])
            values = keys.get(key)
            if values is None:
                values = keys[key] = {}
            entry = values.get(value)
            if entry is None:
                if self.max_values is not None and len(values) >= self.max_values:
                    continue
                entry = values[value] = [1, start]
            else:
                entry[0] = (
                    entry[0] + 1 if self.max_count is None else min(entry[0] + 1, self.max_count)
                )
                entry[1] = start
            if self.on_update is not None:
                self.on_update(key, value, entry)

    def last_key(self) -> tuple | None:
        """The last ``key_size`` tokens of the history (None while it is shorter)."""
        if len(self.tokens) < self.key_size:
            return None
        return tuple(self.tokens[len(self.tokens) - self.key_size :])

    def values(self, key: tuple | None) -> dict[tuple, Entry]:
        """The values seen after ``key`` (empty if none)."""
        return self.keys.get(key, {}) if key is not None else {}
