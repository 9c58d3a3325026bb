"""Tree verification: several draft rows checked in one forward pass.

Multi-row drafters (N-Grammys) return several rows. They are merged into a prefix tree
(``DraftTree``) rooted at the last history token and verified in one forward pass over
one copy of the context: each tree token attends to the cache and to its own ancestors
(a tree attention mask, limited to the layer's sliding window where it has one) and gets
the rotary position of its depth. Walking from the root, the target's own token at each
node picks the child to follow, so the accepted path is the longest accepted prefix over
all rows, and each emitted token is still the target's own choice at its position. The
KV entries of the accepted path are then moved to consecutive positions and the rest
trimmed, so the cache again holds exactly the history but its last token.

Which models can do this is decided once per model (``engine.models.caches``): every
layer attention over a plain KV cache, with a rotary embedding the adapter
(``engine.models.tree_adapter.unsupported``) can position per token. The others verify the first
row only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from ..models.tree_adapter import TreeLayerCache, TreeView


@dataclass
class Verdict:
    """What one verify pass decided."""

    emitted: list[int]  # accepted draft tokens, then the target's own token (unless EOS ended it)
    accepted: int
    drafted: int  # tokens sent to verify
    logits: mx.array  # the target's logits at each emitted position
    row: int = 0  # the draft row the accepted tokens came from
    depth: int | None = None  # longest row, for tree passes
    first_row: tuple[int, int] | None = None  # a tree's first row: its length, tokens accepted


class DraftTree:
    """Draft rows merged into a prefix tree; node 0 is the root (the last history token)."""

    def __init__(self, root: int, rows: Sequence[Sequence[int]]):
        self.tokens = [root]
        self.parent = [-1]
        self.depth = [0]
        self.children: list[dict[int, int]] = [{}]
        self.row_nodes: list[list[int]] = []
        for row in rows:
            node, nodes = 0, []
            for token in row:
                child = self.children[node].get(token)
                if child is None:
                    child = len(self.tokens)
                    self.tokens.append(token)
                    self.parent.append(node)
                    self.depth.append(self.depth[node] + 1)
                    self.children.append({})
                    self.children[node][token] = child
                node = child
                nodes.append(node)
            self.row_nodes.append(nodes)

    def __len__(self) -> int:
        return len(self.tokens)

    def ancestors(self) -> np.ndarray:
        """[i, j] true when node j is node i or one of its ancestors."""
        size = len(self.tokens)
        mask = np.zeros((size, size), dtype=bool)
        for i in range(size):
            if self.parent[i] >= 0:
                mask[i] = mask[self.parent[i]]
            mask[i, i] = True
        return mask

    def mask(self, offset: int, window: int | None = None) -> mx.array:
        """[node, cache position or node]: what each tree token may attend to."""
        size = len(self.tokens)
        allowed = np.concatenate([np.ones((size, offset), dtype=bool), self.ancestors()], axis=1)
        if window is not None:
            rows = offset + np.array(self.depth)[:, None]
            columns = np.concatenate([np.arange(offset), offset + np.array(self.depth)])[None, :]
            allowed &= rows - columns < window
        return mx.array(allowed)

    def walk(self, logits: mx.array, chooser, history: Sequence[int]):
        """Follow the target's own tokens from the root: (accepted path nodes, token after it)."""
        fast = chooser.greedy and not chooser.processors
        choices = mx.argmax(logits, axis=-1).tolist() if fast else None
        node, path = 0, []
        while True:
            if fast:
                choice = choices[node]
            else:
                context = list(history) + [self.tokens[n] for n in path]
                choice = chooser.choose(logits[node : node + 1], context, [])[0]
            child = self.children[node].get(choice)
            if child is None:
                return path, choice
            path.append(child)
            node = child

    def row_of(self, path: list[int]) -> int:
        for index, nodes in enumerate(self.row_nodes):
            if nodes[: len(path)] == path:
                return index
        return 0


def forward_tree(model, cache: list, tree: DraftTree, view: TreeView | None = None) -> mx.array:
    """Logits (float32, [len(tree), vocab]) for each tree node, one forward pass.

    Node i sees the cache and its own ancestors, at position ``offset + depth[i]``; the pass
    runs on a positioned view of ``model`` (``engine.models.tree_adapter``; ``view``: one built
    earlier for ``model``), never on ``model``.
    """
    offset = cache[0].offset
    positions = mx.array([offset + d for d in tree.depth], dtype=mx.int32)
    view = (view or TreeView(model)).at(positions)
    layer_caches = [TreeLayerCache(c, tree) for c in cache]
    logits = view(mx.array(tree.tokens, dtype=mx.uint32)[None], cache=layer_caches)
    return logits[0].astype(mx.float32)


def keep_path(cache: list, base: int, path: list[int]) -> None:
    """After a tree pass at offset ``base``: move the accepted ``path`` nodes' KV entries
    next to the root, so the first ``base + 1 + len(path)`` positions are the accepted ones."""
    if path == list(range(1, len(path) + 1)):
        return
    source = mx.array([base + node for node in path], dtype=mx.int32)
    end = base + 1 + len(path)
    for c in cache:
        keys, values = c.keys[..., source, :], c.values[..., source, :]
        c.keys[..., base + 1 : end, :] = keys
        c.values[..., base + 1 : end, :] = values


def verify_tree(
    target, rows: list[list[int]], chooser, history: list[int], eos_tokens: set[int]
) -> Verdict:
    """Verify all ``rows`` in one pass; the cache keeps the root and the accepted path."""
    tree = DraftTree(history[-1], rows)
    base = target.offset
    logits = target.forward_tree(tree)
    path, choice = tree.walk(logits, chooser, history)
    emitted = [tree.tokens[node] for node in path]
    if not (emitted and emitted[-1] in eos_tokens):
        emitted.append(choice)
    target.keep_path(base, path)
    target.trim(target.offset - (base + len(emitted)))
    emitted_logits = logits[mx.array(([0] + path)[: len(emitted)])]
    first = tree.row_nodes[0]
    kept = next(
        (i for i, (a, b) in enumerate(zip(path, first)) if a != b), min(len(path), len(first))
    )
    return Verdict(
        emitted,
        len(path),
        len(tree) - 1,
        emitted_logits,
        tree.row_of(path),
        depth=max(len(r) for r in rows),
        first_row=(len(rows[0]), kept),
    )
