"""`suffix-static`: the suffix drafter, plus one row from what public answers and this user's
earlier chats usually say next (llama.cpp's lookup static cache, REST's datastore idea).

The conversation's own matches draft first, as ``suffix`` does. While they leave a row free
(fewer than ``rows``), one more row is chained token by token after the history's last
tokens, from
- **this user's earlier chats**: the n-gram memory the ``ngram-cache`` drafter keeps across
  chats (the same file, counted in here too), with llama.cpp's strict thresholds; else
- **the static table** of the model's tokenizer (shipped for the embedded model's tokenizer;
  built for any other from the shipped corpus of public answers, ``engine/runtime/static_ngrams.py``):
  the most frequent follower of the last 3 tokens, else of the last 2,

stopping before the product of the followers' shares falls below ``min_prob``. A proposal
that rests on this row alone says no match length (``match_length`` 0): the adaptive policy
judges its acceptance apart from the conversation's own matches, and sends it only as far as
the verify-cost curve makes it pay.

With the ``alternatives`` option, up to that many more rows follow (``Proposal.alternatives``):
the table's other usual followers of the history's last tokens (up to four per context, each
with 5% or more of its followers), those no row begins with, each chained on from its own
share as the row above is. They are a second guess at the next token, where the first rows'
first token is wrong; the policy learns what they add beyond the other rows and sends them
only where the curve makes that pay (a flat curve, where a few more tokens in a pass cost
next to nothing). They are off by default: replayed on the dev split they make 1.012x over 15
device curves (up to 1.10x where wide passes are cheap), under the 2% a default change asks,
and on this CPU's wall clock (one process, interleaved with the default) all tasks are level
but the open question runs at 0.97x of plain.

With the ``index`` option, the row comes first from the longest match of the history's last
tokens anywhere in the public answers (the corpus index, ``_corpus_index.py``: a suffix
array, built per tokenizer at first use, ``engine/runtime/corpus_index.py``), each token the usual
follower of the match so far, while the product of their shares is ``min_prob`` or more,
from a match of ``INDEX_MIN_MATCH`` tokens or more; where it drafts nothing, the row above
is chained. A proposal resting on the index's row alone says its match length, how its first
token follows (``USUAL``/``ONCE``) and the shares, as ``suffix`` says of its own matches.

The session (and the inspector's replay, ``engine/runtime/replay.py``) brings the table
(``wants_static_table``; ``use_static_table``): a tokenizer with no shipped table gets its
own built between requests (or inline on the command line), and drafts as ``suffix`` plus
its memory until then; a drafter given no table drafts without one. Options: ``suffix``'s,
``table`` (default true), ``memory`` (default true: read and grow the cross-chat memory),
``index`` (default false), ``alternatives`` (default 0, at most 8; 4 takes every follower the table holds for a
context: on the real-chat tuning replays 2 made 0.9985x what 4 made).
"""

from __future__ import annotations

from dataclasses import replace

from ._options import Option
from ._static_table import StaticTable
from .base import ONCE, USUAL, Proposal
from .ngram_cache import (
    MIN_PERCENT_STRICT,
    MIN_SAMPLE_STRICT,
    NGRAM_MAX,
    _DynamicStore,
    shared_dynamic_store,
)
from .stores import DrafterStores
from .suffix import USUAL_SHARE, SuffixDrafter

MEMORY_MIN = 2  # the shortest n-gram of the user's memory used (ngram-cache's strict rules)
INDEX_MIN_MATCH = 2  # the corpus index drafts from matches this long, as the table's contexts


class SuffixStaticDrafter(SuffixDrafter):
    name = "suffix-static"
    summary = "suffix, plus a row from a static n-gram table of public answers and the user's chats"
    measurement_options = {"memory": False}
    options = {
        **SuffixDrafter.options,
        "table": Option(True),
        "memory": Option(True),
        "index": Option(False),
        "alternatives": Option(0, 0, 8),
    }

    def __init__(self, settings):
        super().__init__(settings)
        self.table: StaticTable | None = None
        self.index = None  # the corpus index (``_corpus_index.CorpusIndex``), with ``index``
        self.model_key: str | None = None
        self.vocab_size: int | None = None
        self.stores = DrafterStores()  # the service's, once attached
        self.store: _DynamicStore | None = None

    @property
    def wants_static_table(self) -> bool:
        return self.option["table"]

    @property
    def wants_corpus_index(self) -> bool:
        return self.option["index"]

    def use_corpus_index(self, index) -> None:
        if self.option["index"] and self.vocab_size in (None, index.vocab_size):
            self.index = index

    def use_model(self, model_key, *, bigram=None, stores=None, vocab_size=None) -> None:
        self.model_key, self.vocab_size = model_key, vocab_size
        if stores is not None and stores is not self.stores:
            if self.store is not None:
                self.store.save()
            self.stores, self.store = stores, None
        self.table = self.index = None  # the model's own come with ``use_static_table``...

    def use_static_table(self, table: StaticTable) -> None:
        if self.option["table"] and self.vocab_size in (None, table.vocab_size):
            self.table = table

    def _memory(self) -> _DynamicStore | None:
        if not self.option["memory"] or self.model_key is None:
            return None
        if self.store is None:
            self.store = shared_dynamic_store(self.stores, self.model_key, self.vocab_size)
        return self.store

    def flush(self) -> None:
        if self.store is not None:
            self.store.save()

    def reset(self, prompt_tokens):
        self.flush()
        super().reset(prompt_tokens)

    def extend(self, tokens):
        self.flush()
        super().extend(tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        super().observe(emitted, accepted=accepted, drafted=drafted, row=row)
        store = self._memory()
        if store is not None and emitted:
            tokens = self.sam.tokens
            store.counts.update(tokens, max(0, len(tokens) - len(emitted)), 1, NGRAM_MAX)
            store.dirty = True
            store.bound(len(emitted))

    @property
    def rows_per_pass(self) -> int:
        return self.rows + self.option.get("alternatives", 0)

    def propose(self, k):
        proposal = super().propose(k)
        if k <= 0:
            return proposal
        rows = proposal.rows
        if len(rows) < self.rows:
            found = self._indexed(k)
            row = found.rows[0] if found.rows else self._chain(self.sam.tokens[-NGRAM_MAX:], k)
            if row and not any(taken[: len(row)] == row for taken in rows):
                rows = rows + [row]
                if len(rows) == 1 and found.rows:  # the index's row alone: its match speaks
                    proposal = found
        own = len(rows)
        alternatives = self._alternatives(rows, k)
        if rows is proposal.rows and not alternatives:
            return proposal
        rows = rows + alternatives
        if proposal.rows:  # the first row is suffix's: what speaks of it stays
            return replace(proposal, rows=rows, alternatives=len(rows) - own)
        # with no row of its own, the table's followers are the rows (``Proposal.alternatives``)
        return Proposal(rows, alternatives=len(rows) - own if own else 0)

    def _indexed(self, k: int) -> Proposal:
        """The corpus index's row (``index`` option) with the match it rests on, or none."""
        if self.index is None:
            return Proposal()
        found = self.index.draft(self.sam.tokens, k, INDEX_MIN_MATCH, self.min_prob)
        match, row, shares = found
        if not row:
            return Proposal()
        share, seen = shares[0]
        follows = (USUAL if seen > 1 else ONCE) if share >= USUAL_SHARE else ""
        return Proposal([row], match, follows, tuple(shares))

    def _alternatives(self, rows: list[list[int]], k: int) -> list[list[int]]:
        """Up to ``alternatives`` rows, each beginning with one of the table's usual followers
        of the history's last tokens that no row begins with, and chained on as
        ``_chain`` chains (from the follower's share)."""
        wanted = self.option.get("alternatives", 0)
        if not wanted or self.table is None:
            return []
        seq = self.sam.tokens[-NGRAM_MAX:]
        starts = {row[0] for row in rows if row}
        found = []
        for token, share in self.table.followers(seq):
            if len(found) == wanted:
                break
            if token not in starts:
                found.append([token] + self._chain((seq + [token])[-NGRAM_MAX:], k - 1, share))
        return found

    def _chain(self, seq: list[int], k: int, prob: float = 1.0) -> list[int]:
        """Up to ``k`` tokens after ``seq``, each the usual follower of the tokens before it
        (the user's memory first, then the table), while ``prob`` times the product of their
        shares is ``min_prob`` or more."""
        store = self._memory()
        memory = store.counts if store is not None and len(store.counts) else None
        if memory is None and self.table is None:
            return []
        row: list[int] = []
        while len(row) < k and prob >= self.min_prob:  # no share is above 1
            found = memory_follower(memory, seq) if memory is not None else None
            if found is None and self.table is not None:
                found = self.table.follower(seq)
            if found is None:
                break
            prob *= found[1]
            if prob < self.min_prob:
                break
            row.append(found[0])
            seq = seq[1:] + [found[0]]
        return row


def memory_follower(memory, seq) -> tuple[int, float] | None:
    """(usual follower, share) of the longest n-gram ending ``seq`` that the memory has seen
    often enough, by llama.cpp's strict thresholds, or None."""
    for n in range(min(NGRAM_MAX, len(seq)), MEMORY_MIN - 1, -1):
        best = memory.best.get(tuple(seq[-n:]))
        if best is None:
            continue
        total, token, top = best
        if total >= MIN_SAMPLE_STRICT[n - 1] and 100 * top >= MIN_PERCENT_STRICT[n - 1] * total:
            return token, top / total
    return None
