"""`ngrammys`: "The N-Grammys" (Stewart et al.): batched learning-free speculation.

Several draft rows per pass, all verified in one forward pass; the row with the longest
accepted prefix wins (the decode loop verifies rows as a prefix tree over one copy of
the context, see ``engine.decode``).

Rows, as in the paper's mixed strategy (section 4.3):
1. **context n-grams** (section 4.2, appendix B.2): every earlier occurrence of the last
   ``q`` tokens (the query) followed by ``w`` tokens is a (q + w)-gram; the distinct
   continuations are ranked by how often they occur, ties going to the most recent
   occurrence, and as many rows as available (up to k) are taken from them;
2. **the extended model bigram** (section 4.1) fills the remaining rows: for the last
   token x, the model's top next tokens given x alone (``p_M(·|x)``), each extended
   greedily to w tokens by repeatedly applying the bigram's top-1. The table is computed
   by the engine (``engine.model_ngrams.bigram_table``) once per model, cached on disk,
   and handed to the drafter as token data (``attach_model``); a drafter never sees the
   model. Without a table only context rows are drafted.

Settings: k = option ``rows`` (default 10), w = ``draft_count`` (tokens per row; the
paper's default (k, w) = (10, 10) is ``rows=10, draft_count=10``), q = option ``query``
(default 1; the paper found longer queries worse), option ``model_bigram`` (default true).

Cost: per token, one (q + w)-window is counted and each query keeps its top-k
continuations up to date incrementally (a count only ever grows, so the ranking changes
by at most one insertion); a proposal is O(k × w) whatever the history length.
"""

from __future__ import annotations

from ._options import bool_option, int_option
from .base import Drafter


class _Query:
    __slots__ = ("grams", "top")

    def __init__(self):
        self.grams: dict[tuple, list[int]] = {}  # continuation -> [count, last start]
        self.top: list[tuple] = []  # best continuations, best first (at most k)


class NgrammysDrafter(Drafter):
    name = "ngrammys"
    summary = "N-Grammys: k rows from context n-grams (by count) then the model's extended bigram"
    multi_row = True

    def __init__(self, settings):
        super().__init__(settings)
        self.rows = int_option(settings, self.name, "rows", 10, 1, 64)
        self.query = int_option(settings, self.name, "query", 1, 1, 32)
        self.use_bigram = bool_option(settings, self.name, "model_bigram", True)
        self.width = settings.draft_count
        self.bigram = None  # [vocab][top] next tokens, best first
        self.top1 = None
        self.reset(())

    def attach_model(self, model_key: str, bigram=None, **_) -> None:
        """Called by the session with the model's bigram table (token ids only)."""
        if bigram is not None and self.use_bigram:
            self.bigram = bigram
            self.top1 = [int(t) for t in bigram[:, 0]]

    @property
    def wants_model_bigram(self) -> bool:
        return self.use_bigram

    def reset(self, prompt_tokens):
        self.tokens: list[int] = []
        self.index: dict[tuple, _Query] = {}
        self._append(prompt_tokens)

    def extend(self, tokens):
        self._append(tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self._append(emitted)

    def _append(self, new_tokens):
        tokens, q, w = self.tokens, self.query, self.width
        for token in new_tokens:
            tokens.append(int(token))
            start = len(tokens) - q - w
            if start < 0:
                continue
            key = tuple(tokens[start:start + q])
            entry = self.index.get(key)
            if entry is None:
                entry = self.index[key] = _Query()
            gram = tuple(tokens[start + q:])
            stats = entry.grams.get(gram)
            if stats is None:
                stats = entry.grams[gram] = [0, 0]
            stats[0] += 1
            stats[1] = start
            self._promote(entry, gram, stats)

    def _promote(self, entry: _Query, gram: tuple, stats) -> None:
        top = entry.top
        if gram in top:
            top.remove(gram)
        elif len(top) >= self.rows:
            worst = entry.grams[top[-1]]
            if (stats[0], stats[1]) < (worst[0], worst[1]):
                return
            top.pop()
        rank = (stats[0], stats[1])
        i = 0
        grams = entry.grams
        while i < len(top) and (grams[top[i]][0], grams[top[i]][1]) > rank:
            i += 1
        top.insert(i, gram)

    def context_rows(self, limit: int) -> list[list[int]]:
        tokens = self.tokens
        if len(tokens) < self.query:
            return []
        entry = self.index.get(tuple(tokens[len(tokens) - self.query:]))
        return [list(gram[:limit]) for gram in entry.top] if entry else []

    def bigram_rows(self, limit: int, count: int) -> list[list[int]]:
        if self.bigram is None or not self.tokens or count <= 0:
            return []
        last = self.tokens[-1]
        if last >= len(self.top1):
            return []
        top1 = self.top1
        rows = []
        for first in self.bigram[last][:count].tolist():
            row = [int(first)]
            while len(row) < limit:
                row.append(top1[row[-1]] if row[-1] < len(top1) else row[-1])
            rows.append(row)
        return rows

    def propose(self, history, k):
        if k <= 0:
            return []
        limit = min(k, self.width)
        rows: list[list[int]] = []
        seen = set()
        for row in self.context_rows(limit):
            key = tuple(row)
            if key not in seen:
                seen.add(key)
                rows.append(row)
        if len(rows) < self.rows:
            for row in self.bigram_rows(limit, self.rows):
                key = tuple(row)
                if key not in seen:
                    seen.add(key)
                    rows.append(row)
                if len(rows) >= self.rows:
                    break
        return rows[:self.rows]
