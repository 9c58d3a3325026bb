"""`token-recycling`: Token Recycling (Luo et al., ACL 2025, "Turning Trash into Treasure").

An adjacency matrix ``M[vocab, 8]`` holds, for each token, the target's 8 most likely next
tokens, best first, as the target itself last computed them:
- **update**: after each pass, for every position the pass verified and kept, the target's
  top-8 there (which the verify pass computed anyway; the decode loop hands them over, see
  ``wants_target_topk``) replaces the row of the token at that position (the token the
  target read there, i.e. the one before the token it emitted);
- **drafting**: a static tree, the paper's template of 80 nodes in 6 levels, filled
  breadth-first from the last token x: a node at path ``(i1, .., id)`` holds
  ``M[parent's token][id]``, its first level ``M[x][i1]``. A node whose row is still empty
  is left out with its subtree. The tree goes out as its leaves' rows (the decode loop
  verifies rows as one prefix tree); the adaptive policy chooses how many rows and how
  deep (the tree is large; on a steep cost curve little of it pays);
- **memory**: the matrix outlives the chat (the paper's "hot start"): it is kept in the
  service's ``DrafterStores`` per model, shared by that service's chats, in memory only
  (8 int32 a token: 49,152 x 8 x 4 = 1,572,864 bytes, 1.5 MiB, for the embedded model's
  vocabulary). It starts empty; the option ``model_bigram`` (default false) seeds empty
  rows from the model's bigram table when the engine has one (computing it costs a pass
  over the whole vocabulary once per model).

Where the paper updates from every node of the verified tree, the engine hands over the
top-k of the kept positions only (the rejected nodes' logits are not passed to drafters).
A server's other clients get stores of their own, so one client's matrix never drafts from
another's text.

`suffix-recycling` (``SuffixRecyclingDrafter``): ``suffix-static``'s rows first, then up to
``recycled_rows`` (default 8) rows of this tree that no earlier row holds.

Worked example (k = 2 for brevity; the real k is 8), last token 5 and
``M[5] = [7, 9]``, ``M[7] = [3, 4]``, ``M[9] = [-1, -1]`` (empty), ``M[3] = [5, 7]``:
template paths ``(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)`` give nodes
``(0,)->7, (1,)->9, (0,0)->3, (0,1)->4, (0,0,0)->5`` ((1, 0) is dropped: row 9 is empty);
the rows are the leaves' paths ``[7, 3, 5]``, ``[7, 4]``, ``[9]``, the all-first path first.
After a pass that kept ``[7]`` and emitted ``[7, 2]`` with top-k ``[[7, 9], [2, 8]]``:
``M[5] = [7, 9]`` (the token read at the first position was 5) and ``M[7] = [2, 8]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._options import Option
from .base import Drafter, Proposal
from .stores import DrafterStores
from .suffix_static import SuffixStaticDrafter

TOP_K = 8  # the paper's k: each token's 8 best followers (the template's widest node has 8)
EMPTY = -1


def _level(*paths: str) -> list[tuple[int, ...]]:
    return [tuple(int(c) for c in path) for path in paths]


# The paper's static tree (the authors' template "2.2.2", 80 nodes), by level: each path is
# the child index taken at each depth (0: the best follower).
TEMPLATE: tuple[tuple[int, ...], ...] = tuple(
    _level("0", "1", "2", "3", "4", "5", "6", "7")
    + _level(
        *"00 01 02 03 04 05 06 07 10 11 12 13 20 21 22 30 31 40 50 60 70".split(),
    )
    + _level(
        *(
            "000 001 002 003 004 005 006 007 010 011 012 020 021 030 040 050 060 070 "
            "100 101 110 200 300 400 500"
        ).split()
    )
    + _level(*"0000 0001 0002 0003 0004 0010 0011 0020 0030 0040 0100 0200 1000 2000 3000".split())
    + _level(*"00000 00001 00002 00010 00020 00100 01000 10000".split())
    + _level(*"000000 000001 000100".split())
)


def template_leaves(template: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The template's leaves, most likely first: by the sum of their child indices (a rough
    rank of the path's probability), deeper first among equals; the all-best path leads."""
    parents = {path[:-1] for path in template}
    leaves = [path for path in template if path not in parents]
    return sorted(leaves, key=lambda path: (sum(path), -len(path), path))


LEAVES = template_leaves(TEMPLATE)


class RecyclingMatrix:
    """``M[token]``: that token's best followers as the target last ranked them (``EMPTY``:
    not known). Grows to the largest token seen where the vocabulary was not given."""

    def __init__(self, vocab_size: int | None = None, top: int = TOP_K):
        self.top = top
        self.vocab_size = vocab_size
        self.rows = np.full((vocab_size or 0, top), EMPTY, dtype=np.int32)

    def save(self) -> None:
        """Kept in memory only (``DrafterStores`` asks every store to save)."""

    def _fits(self, token: int) -> bool:
        if self.vocab_size is not None:
            return 0 <= token < self.vocab_size
        if token >= len(self.rows):
            grown = np.full((max(token + 1, 2 * len(self.rows)), self.top), EMPTY, np.int32)
            grown[: len(self.rows)] = self.rows
            self.rows = grown
        return token >= 0

    def update(self, token: int, followers: Sequence[int]) -> None:
        """The target's best followers of ``token`` (best first) replace its row; ids outside
        the vocabulary are dropped."""
        if not self._fits(token):
            return
        kept = [
            int(f)
            for f in followers[: self.top]
            if self.vocab_size is None or 0 <= f < self.vocab_size
        ]
        row = self.rows[token]
        row[:] = EMPTY
        row[: len(kept)] = kept

    def seed(self, bigram: np.ndarray) -> None:
        """Fill rows still empty from the model's bigram table (``[vocab, top]``, best first)."""
        count = min(len(self.rows), len(bigram))
        width = min(self.top, bigram.shape[1])
        empty = self.rows[:count, 0] == EMPTY
        self.rows[:count][empty, :width] = bigram[:count][empty, :width]

    def followers(self, token: int) -> list[int]:
        if not 0 <= token < len(self.rows):
            return []
        return self.rows[token].tolist()

    def tree_rows(
        self, last: int, leaves: Sequence[tuple[int, ...]], limit: int
    ) -> list[list[int]]:
        """The template filled from ``last``: one row per leaf (cut to ``limit`` tokens, and
        where a node is empty), rows that another row already holds left out."""
        followers: dict[int, list[int]] = {}

        def row_of(token: int) -> list[int]:
            if token not in followers:
                followers[token] = self.followers(token)
            return followers[token]

        rows: list[list[int]] = []
        for path in leaves:
            row, token = [], last
            for index in path[:limit]:
                known = row_of(token)
                if index >= len(known) or known[index] == EMPTY:
                    break
                token = known[index]
                row.append(token)
            if row:
                rows.append(row)
        return drop_prefixes(rows)


def drop_prefixes(rows: list[list[int]]) -> list[list[int]]:
    """``rows`` without those equal to or a prefix of another row (order kept)."""
    full = {tuple(row) for row in rows}
    prefixes = {tuple(row[:j]) for row in rows for j in range(1, len(row))}
    kept, seen = [], set()
    for row in rows:
        key = tuple(row)
        if key in prefixes or key in seen or key not in full:
            continue
        seen.add(key)
        kept.append(row)
    return kept


def shared_matrix(stores: DrafterStores, model_key: str, vocab_size: int | None) -> RecyclingMatrix:
    """The matrix of ``model_key`` that ``stores`` keeps (one per model, shared by its chats)."""
    path = Path(stores.folder) / f"token-recycling-{model_key}"
    return stores.get(path, lambda _: RecyclingMatrix(vocab_size))


class Recycler:
    """Token Recycling's state in one chat: the (shared) matrix and the last token read."""

    def __init__(self, seed_from_bigram: bool = False):
        self.seed_from_bigram = seed_from_bigram
        self.matrix = RecyclingMatrix()  # private until a service's stores come
        self.last: int | None = None

    def use_model(self, model_key: str, bigram, stores, vocab_size) -> None:
        self.matrix = shared_matrix(
            stores if stores is not None else DrafterStores(), model_key, vocab_size
        )
        if bigram is not None and self.seed_from_bigram:
            self.matrix.seed(bigram)

    def read(self, tokens) -> None:
        """Context the target read without ranking it here (a prompt, a user turn)."""
        if len(tokens):
            self.last = int(tokens[-1])

    def observe(self, emitted, target_topk) -> None:
        for i, token in enumerate(emitted):
            if target_topk is not None and self.last is not None and i < len(target_topk):
                self.matrix.update(self.last, target_topk[i])
            self.last = int(token)

    def rows(self, k: int) -> list[list[int]]:
        if k <= 0 or self.last is None:
            return []
        return self.matrix.tree_rows(self.last, LEAVES, k)


class TokenRecyclingDrafter(Drafter):
    name = "token-recycling"
    summary = (
        "Token Recycling: the target's own top-8 per token, drafted as the paper's 80-node tree"
    )
    options = {"model_bigram": Option(False)}
    multi_row = True

    def __init__(self, settings):
        super().__init__(settings)
        self.recycler = Recycler(self.option["model_bigram"])

    @property
    def matrix(self) -> RecyclingMatrix:
        return self.recycler.matrix

    @property
    def wants_target_topk(self) -> int:
        return TOP_K

    @property
    def wants_model_bigram(self) -> bool:
        return self.recycler.seed_from_bigram

    @property
    def rows_per_pass(self) -> int:
        return len(LEAVES)

    def use_model(self, model_key: str, *, bigram=None, stores=None, vocab_size=None) -> None:
        self.recycler.use_model(model_key, bigram, stores, vocab_size)

    def reset(self, prompt_tokens):
        self.recycler.last = None
        self.recycler.read(prompt_tokens)

    def extend(self, tokens):
        self.recycler.read(tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        self.recycler.observe(emitted, target_topk)

    def propose(self, k):
        return Proposal(self.recycler.rows(k))


class SuffixRecyclingDrafter(SuffixStaticDrafter):
    """``suffix-static``'s rows first (``suffix``'s, then the static table's usual row;
    option ``table`` false: ``suffix``'s alone); Token Recycling's tree fills up to
    ``recycled_rows`` more (its rows that no earlier row already holds). A proposal of
    recycled rows alone says no match length, so the adaptive policy judges them apart from
    the conversation's matches."""

    name = "suffix-recycling"
    summary = (
        "suffix-static, plus rows of Token Recycling's tree (the target's own top-8 per token)"
    )
    options = {**SuffixStaticDrafter.options, "recycled_rows": Option(8, 1, len(LEAVES))}
    del options["alternatives"]  # its recycled rows take the place of suffix-static's alternatives

    def __init__(self, settings):
        super().__init__(settings)
        self.recycler = Recycler()
        self.recycled_rows = self.option["recycled_rows"]

    @property
    def wants_target_topk(self) -> int:
        return TOP_K

    @property
    def rows_per_pass(self) -> int:
        return self.rows + self.recycled_rows

    def use_model(self, model_key: str, *, bigram=None, stores=None, vocab_size=None) -> None:
        super().use_model(model_key, stores=stores, vocab_size=vocab_size)
        self.recycler.use_model(model_key, None, stores, vocab_size)

    def reset(self, prompt_tokens):
        super().reset(prompt_tokens)
        self.recycler.last = None
        self.recycler.read(prompt_tokens)

    def extend(self, tokens):
        super().extend(tokens)
        self.recycler.read(tokens)

    def observe(self, emitted, *, accepted=0, drafted=0, row=0, target_topk=None):
        super().observe(emitted, accepted=accepted, drafted=drafted, row=row)
        self.recycler.observe(emitted, target_topk)

    def propose(self, k):
        proposal = super().propose(k)
        own = proposal.rows
        recycled = [
            row
            for row in self.recycler.rows(k)
            if not any(taken[: len(row)] == row for taken in own)
        ][: self.recycled_rows]
        if not recycled:
            return proposal
        if own:
            return Proposal(own + recycled, proposal.match_length, proposal.follows)
        return Proposal(recycled)
