"""`ngrammys`: "The N-Grammys" (Stewart et al.): batched learning-free speculation.

Several draft rows per pass, all verified in one forward pass; the row with the longest
accepted prefix wins (the decode loop verifies rows as a prefix tree over one copy of
the context, see ``engine.loop.decode``).

Rows, as in the paper's mixed strategy (section 4.3):
1. **context n-grams** (section 4.2, appendix B.2): every earlier occurrence of the last
   ``q`` tokens (the query) followed by ``w`` tokens is a (q + w)-gram; the distinct
   continuations are ranked by how often they occur, ties going to the most recent
   occurrence, and as many rows as available (up to k) are taken from them;
2. **the extended model bigram** (section 4.1) fills the remaining rows: for the last
   token x, the model's top next tokens given x alone (``p_M(·|x)``), each extended
   greedily to w tokens by repeatedly applying the bigram's top-1. The table is computed
   by the engine (``engine.runtime.model_ngrams``) once per model, between requests, cached on
   disk, and handed to the drafter as token data (``attach_model``); a drafter never sees
   the model. Without a table (not built yet) only context rows are drafted.

Settings: k = option ``rows`` (default 10), w = ``draft_count`` (tokens per row; the
paper's default (k, w) = (10, 10) is ``rows=10, draft_count=10``), q = option ``query``
(default 1; the paper found longer queries worse), option ``model_bigram`` (default true).

Cost: per token, one (q + w)-window is counted (the window index shared with
ngram-map-k, ``_windows.py``) and each query keeps its top-k continuations up to date
incrementally (a count only ever grows, so the ranking changes
by at most one insertion); a proposal is O(k × w) whatever the history length.
"""

from __future__ import annotations

from ._options import Option
from ._windows import WindowIndex
from .base import Drafter, Proposal


class NgrammysDrafter(Drafter):
    name = "ngrammys"
    summary = "N-Grammys: k rows from context n-grams (by count) then the model's extended bigram"
    options = {"rows": Option(10, 1, 64), "query": Option(1, 1, 32), "model_bigram": Option(True)}
    multi_row = True

    def __init__(self, settings):
        super().__init__(settings)
        self.rows = self.option["rows"]
        self.query = self.option["query"]
        self.use_bigram = self.option["model_bigram"]
        self.width = settings.draft_count
        self.bigram = None  # [vocab][top] next tokens, best first
        self.top1 = None
        self.reset(())

    def use_model(self, model_key: str, *, bigram=None, stores=None, vocab_size=None) -> None:
        """Keep the model's bigram table (token ids only)."""
        if bigram is not None and self.use_bigram:
            self.bigram = bigram
            self.top1 = [int(t) for t in bigram[:, 0]]

    @property
    def wants_model_bigram(self) -> bool:
        return self.use_bigram

    @property
    def rows_per_pass(self) -> int:
        return self.rows

    @property
    def tokens(self) -> list[int]:
        return self.index.tokens

    def reset(self, prompt_tokens):
        # query -> continuation -> [count, last start], and per query its best continuations
        self.index = WindowIndex(self.query, self.width, on_update=self._promote)
        self.top: dict[tuple, list[tuple]] = {}  # best first, at most ``rows``
        self.index.extend(prompt_tokens)

    def extend(self, tokens):
        self.index.extend(tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self.index.extend(emitted)

    def _promote(self, key: tuple, gram: tuple, stats) -> None:
        top = self.top.setdefault(key, [])
        if gram in top:
            top.remove(gram)
        elif len(top) >= self.rows:
            worst = self.index.keys[key][top[-1]]
            if (stats[0], stats[1]) < (worst[0], worst[1]):
                return
            top.pop()
        rank = (stats[0], stats[1])
        i = 0
        grams = self.index.keys[key]
        while i < len(top) and (grams[top[i]][0], grams[top[i]][1]) > rank:
            i += 1
        top.insert(i, gram)

    def context_rows(self, limit: int) -> list[list[int]]:
        top = self.top.get(self.index.last_key(), [])
        return [list(gram[:limit]) for gram in top]

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

    def propose(self, k):
        if k <= 0:
            return Proposal()
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
        return Proposal(rows[: self.rows])
