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

Cost: one update of the shared window index (``_windows.py``) per token and an O(n)
lookup, independent of the history length. Memory: one entry per distinct window.
"""

from __future__ import annotations

from ._options import Option
from ._windows import WindowIndex
from .base import Drafter, Proposal

MAX_VALUE_COUNT = 16380  # llama.cpp's COMMON_NGRAM_MAX_VALUE_COUNT


class NgramMapDrafter(Drafter):
    """Shared machinery; subclasses choose the value to draft."""

    options = {
        "n": Option(12, 1, 1024),
        "m": Option(48, 1, 1024),
        "min_hits": Option(1, 1, MAX_VALUE_COUNT),
        "check_rate": Option(1, 1, 1 << 20),
    }

    max_values: int | None = None  # None: unlimited distinct values per key

    def __init__(self, settings):
        super().__init__(settings)
        self.n, self.m = self.option["n"], self.option["m"]
        self.min_hits = self.option["min_hits"]
        self.check_rate = self.option["check_rate"]
        self.reset(())

    def reset(self, prompt_tokens):
        self.index = WindowIndex(
            self.n, self.m, max_values=self.max_values, max_count=MAX_VALUE_COUNT
        )
        self.caps: dict[tuple, int] = {}  # tokens accepted the last time a key drafted (n_accepted)
        self.last_draft: tuple | None = None  # (key, value) of the last draft
        self.last_check = -(1 << 30)
        self.index.extend(prompt_tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        if self.last_draft is not None:
            key, _ = self.last_draft
            if drafted:  # an adaptive policy may have sent none of the proposal
                self.caps[key] = accepted
            self.last_draft = None
        self.index.extend(emitted)

    def choose(self, values: dict[tuple, list[int]]) -> tuple | None:
        """The value to draft among a key's ``{value: [hits, last start]}``, or None."""
        value, (hits, _) = max(values.items(), key=lambda item: (item[1][0], item[1][1]))
        return value if hits >= self.min_hits else None

    def propose(self, k):
        size = len(self.index.tokens)
        if 0 < size - self.last_check < self.check_rate:
            return Proposal()
        self.last_check = size
        key = self.index.last_key()
        values = self.index.values(key)
        if not values:
            return Proposal()
        value = self.choose(values)
        if value is None:
            return Proposal()
        length = min(self.m, self.caps.get(key, self.m), k)
        if length <= 0:
            return Proposal()
        self.last_draft = (key, value)
        return Proposal([list(value[:length])], self.n)


class NgramMapKDrafter(NgramMapDrafter):
    name = "ngram-map-k"
    summary = "llama.cpp ngram-map-k: key n-gram → m-gram seen min_hits times; draft capped by last acceptance"
