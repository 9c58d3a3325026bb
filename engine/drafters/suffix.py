"""`suffix`: longest-match drafting over a suffix automaton (SuffixDecoding's direction).

Every earlier position of the prompt, the answers and earlier turns is indexed in an
online suffix automaton (O(1) amortised per token). The longest suffix of the history
that occurred before is the automaton's suffix link of the whole history, so finding the
longest match takes constant time whatever the history length (no fixed n-gram size).

Draft: the tokens that followed the most recent earlier occurrence of that longest
match, and its length adapts
- to the match length L: at most ``ceil(max_spec_factor × L)`` tokens (default factor 8;
  SuffixDecoding's own default is 1, but here the adaptive policy trims each draft to what
  pays on the verify-cost curve, so the drafter offers more; no draft while L < ``ngram_min``);
- to the continuation's observed frequency: walking the automaton along the draft, the
  empirical probability of each next token given everything matched so far is
  ``occurrences(context + token) / occurrences(context)``; the draft stops before the
  running product falls below ``min_prob`` (default 0.1).

Occurrence counts and the two most recent end positions of each state are updated along
the first 32 suffix links per token (constant work): counts of long contexts, the ones that
draft, are exact; counts of very short, very frequent contexts may be underestimates.
Memory is bounded by ``max_tokens`` (default 131,072 tokens, about 60 MB: measured ~450
bytes a token, see tests/measure_drafter_memory.py): past it the index is rebuilt from the
most recent half, so a chat as long as a 128k-token context still fits.

Rows: besides that first row, up to ``rows`` − 1 more candidates, verified together as one
tree (the adaptive policy sends them only while the tree costs at most a few percent more
than the first row alone: all of them on an accelerator's flat verify cost, none on a steep
CPU curve). They come from the same automaton, best first: what followed the match's
occurrence before the most recent one, then what followed the two most recent earlier
occurrences of ever shorter suffixes of the history (down to ``ngram_min``), each as long
as its own match and frequency allow; a candidate that only repeats a row already taken
is skipped.

Locality: a model that copies a passage with edits goes on right after its edit, where the
most recent occurrence of a short match elsewhere says nothing. So the drafter keeps a copy
cursor: the source position of the last accepted draft token, moved on while the model's own
tokens go on following the source, dropped at a new turn. Among matches at most one token
shorter than the longest, the one ending nearest after the cursor (within ``locality``
tokens) drafts the first row, copied as far as its length allows, and the proposal says so
(``Proposal.source`` is ``AT_CURSOR``).

Usual continuation: the proposal says whether the first row's first token followed at least
60% of the match's earlier occurrences, of which there were at least two (``Proposal.follows``
is ``USUAL``), or whether the match occurred only once before, followed by that token
(``ONCE``); the adaptive policy judges short matches of either kind apart from the other short
matches. Per token of the first row, as far as the row extends a context seen before, it also
says what share of that context's earlier occurrences the token followed and how many there
were (``Proposal.continuation``): the calibrated policy's inputs.

Options: ``max_spec_factor`` (default 8.0), ``min_prob`` (default 0.1), ``max_tokens``,
``rows`` (default 4; 1 drafts a single row), ``locality`` (default 32; 0 turns the cursor
off). ``draft_count`` caps each row; ``ngram_min`` is the shortest match used.
"""

from __future__ import annotations

import math

from ._options import Option
from .base import AT_CURSOR, ONCE, USUAL, Drafter, Proposal, matched_before

CHAIN_UPDATES = 32
LOCAL_MATCH_MAX = 16  # the longest match measured at a position near the cursor
USUAL_SHARE = 0.6  # of the match's earlier occurrences, followed by the drafted token
MAX_TOKENS = 1 << 17  # the index's memory budget, in tokens of history


class SuffixAutomaton:
    """Online suffix automaton over a token list, with approximate occurrence stats."""

    def __init__(self):
        self.tokens: list[int] = []
        self.length = [0]
        self.link = [-1]
        self.next: list[dict[int, int]] = [{}]
        self.pos1 = [-1]  # most recent end position
        self.pos2 = [-1]  # the one before
        self.pos3 = [-1]  # and the one before that
        self.count = [0]
        self.last = 0

    def __len__(self):
        return len(self.tokens)

    def _new_state(self, length, link, nxt, pos1, pos2, pos3, count) -> int:
        self.length.append(length)
        self.link.append(link)
        self.next.append(nxt)
        self.pos1.append(pos1)
        self.pos2.append(pos2)
        self.pos3.append(pos3)
        self.count.append(count)
        return len(self.length) - 1

    def append(self, token: int) -> None:
        i = len(self.tokens)
        self.tokens.append(token)
        length, link, nxt = self.length, self.link, self.next
        cur = self._new_state(length[self.last] + 1, -1, {}, i, -1, -1, 1)
        p = self.last
        while p != -1 and token not in nxt[p]:
            nxt[p][token] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = nxt[p][token]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = self._new_state(
                    length[p] + 1,
                    link[q],
                    dict(nxt[q]),
                    self.pos1[q],
                    self.pos2[q],
                    self.pos3[q],
                    self.count[q],
                )
                while p != -1 and nxt[p].get(token) == q:
                    nxt[p][token] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        self.last = cur
        state, steps = link[cur], 0
        pos1, pos2, pos3, count = self.pos1, self.pos2, self.pos3, self.count
        while state > 0 and steps < CHAIN_UPDATES:
            if pos1[state] != i:
                pos3[state] = pos2[state]
                pos2[state] = pos1[state]
                pos1[state] = i
            count[state] += 1
            state = link[state]
            steps += 1

    def longest_match(self) -> tuple[int, int]:
        """(length, state) of the longest suffix that also ends at an earlier position."""
        state = self.link[self.last] if self.tokens else -1
        if state <= 0:
            return 0, 0
        return self.length[state], state

    def earlier_ends(self, state: int) -> list[int]:
        """End positions of the state's context before the history's end, most recent first
        (the two most recent known)."""
        end = len(self.tokens) - 1
        known = (self.pos1[state], self.pos2[state], self.pos3[state])
        return [p for p in known if 0 <= p != end][:2]


class SuffixDrafter(Drafter):
    name = "suffix"
    summary = "suffix automaton: longest earlier match of the current suffix; length from match and frequency"
    options = {
        "max_spec_factor": Option(8.0, 0.01, 1000.0),
        "min_prob": Option(0.1, 0.0, 1.0),
        "max_tokens": Option(MAX_TOKENS, 64, 1 << 26),
        "rows": Option(4, 1, 16),
        "locality": Option(32, 0, 256),  # each position it covers is looked at every pass
    }
    multi_row = True

    def __init__(self, settings):
        super().__init__(settings)
        self.min_match = settings.ngram_min
        self.factor = self.option["max_spec_factor"]
        self.min_prob = self.option["min_prob"]
        self.max_tokens = self.option["max_tokens"]
        self.rows = self.option["rows"]
        self.locality = self.option["locality"]
        self.sam = SuffixAutomaton()
        self.cursor: int | None = None  # source position of the last token copied
        self._sources: list[int] = []  # the end of the match each proposed row follows

    @property
    def rows_per_pass(self) -> int:
        return self.rows

    def reset(self, prompt_tokens):
        self.sam = SuffixAutomaton()
        self.cursor, self._sources = None, []
        self._append(prompt_tokens)

    def extend(self, tokens):
        self.cursor, self._sources = None, []  # a new turn: nothing is being copied yet
        self._append(tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        following = list(emitted)
        if drafted and accepted and row < len(self._sources):
            self.cursor = self._sources[row] + accepted
            following = following[accepted:]
        tokens = self.sam.tokens
        for token in following if self.cursor is not None else ():
            if self.cursor + 1 >= len(tokens) or tokens[self.cursor + 1] != token:
                break
            self.cursor += 1
        self._sources = []
        self._append(emitted)

    def _append(self, tokens):
        sam = self.sam
        for token in tokens:
            sam.append(int(token))
        if len(sam) > self.max_tokens:
            keep = sam.tokens[len(sam) - self.max_tokens // 2 :]
            del sam  # the old index is freed before the new one grows: memory peaks at the budget
            self.sam, self.cursor = SuffixAutomaton(), None
            for token in keep:
                self.sam.append(token)

    def propose(self, k):
        sam = self.sam
        match, state = sam.longest_match()
        if match < self.min_match or match == 0:
            return Proposal(match_length=match)
        rows: list[list[int]] = []
        self._sources = sources = []
        local = self._near_cursor(match - 1)
        if local is not None:
            length, end = local
            limit = min(k, max(1, math.ceil(self.factor * length)), len(sam) - 1 - end)
            rows.append(sam.tokens[end + 1 : end + 1 + limit])
            sources.append(end)
        used = set(sources)
        for context, end in self._occurrences(state):
            if len(rows) == self.rows:
                break
            if end in used:
                continue
            used.add(end)
            row = self._continuation(context, end, k)
            if row and not any(taken[: len(row)] == row for taken in rows):
                rows.append(row)
                sources.append(end)
        earlier = self.sam.count[state] - 1  # the occurrence at the very end has no follower yet
        continuation = self._counted(state, rows[0]) if rows else ()
        followed = bool(continuation) and continuation[0][0] >= USUAL_SHARE
        follows = (USUAL if earlier > 1 else ONCE) if followed else ""
        return Proposal(rows, match, follows, continuation, AT_CURSOR if local else "")

    def _counted(self, state: int, row: list[int]) -> tuple[tuple[float, int], ...]:
        """(share, occurrences) per token of ``row`` after ``state``'s context: the share of
        the earlier occurrences of the context so far that the token followed, as far as the
        row extends a context seen before."""
        sam, counted = self.sam, []
        denominator = sam.count[state] - 1  # the occurrence at the very end has no follower yet
        for token in row:
            child = sam.next[state].get(token)
            if child is None or denominator <= 0:
                break
            counted.append((min(1.0, sam.count[child] / denominator), denominator))
            state, denominator = child, sam.count[child]
        return tuple(counted)

    def _near_cursor(self, shortest: int) -> tuple[int, int] | None:
        """(length, end) of the longest match of the history's suffix, at least ``shortest``
        tokens long, ending within ``locality`` tokens after the cursor (the nearest of
        equal ones), or None."""
        if self.cursor is None or not self.locality:
            return None
        tokens = self.sam.tokens
        best = None
        for end in range(self.cursor + 1, min(self.cursor + 1 + self.locality, len(tokens) - 1)):
            length = matched_before(tokens, end + 1, 0, LOCAL_MATCH_MAX)
            if length and length >= shortest and (best is None or length > best[0]):
                best = (length, end)
                if length == LOCAL_MATCH_MAX:  # none further on can be longer
                    break
        return best

    def _occurrences(self, state: int):
        """(context state, end position) of earlier occurrences, best first: the longest
        match's two most recent, then those of ever shorter matches."""
        sam = self.sam
        ends = sam.earlier_ends(state)
        if self.rows == 1:
            yield state, ends[0] if ends else -1
            return
        while state > 0 and sam.length[state] >= self.min_match:
            for end in ends:
                yield state, end
            state = sam.link[state]
            ends = sam.earlier_ends(state)

    def _continuation(self, state: int, end: int, k: int) -> list[int]:
        """What followed the occurrence of ``state``'s context ending at ``end``: at most
        ``max_spec_factor`` × the context's length and ``k`` tokens, stopping before the
        continuation's observed frequency falls below ``min_prob``."""
        sam = self.sam
        if end < 0:
            return []
        limit = min(k, max(1, math.ceil(self.factor * sam.length[state])), len(sam) - 1 - end)
        tokens, nxt, count = sam.tokens, sam.next, sam.count
        draft: list[int] = []
        prob = 1.0
        denominator = count[state] - 1  # the occurrence at the very end has no follower yet
        for j in range(limit):
            token = tokens[end + 1 + j]
            child = nxt[state].get(token)
            if child is None:
                break
            if denominator > 0:
                prob *= min(1.0, count[child] / denominator)
            if prob < self.min_prob:
                break
            draft.append(token)
            state, denominator = child, count[child]
        return draft
