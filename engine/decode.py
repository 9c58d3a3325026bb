"""The draft → verify → accept → rollback loop, greedy and sampled.

The model call (``Target``) is kept apart from choosing tokens (``TokenChooser``), as in
mlx-lm's generate.py. Invariants, pinned by tests:
- greedy: the emitted tokens equal plain greedy decoding, token for token;
- sampled: each emitted token is the target's own sample at its position, and a draft
  token is kept only if it equals that sample;
- every pass emits at least one token;
- after a pass the KV cache holds exactly the history but its last token, which is the
  next pass's first input (``target.offset == len(history) - 1``).

Multi-row drafters (N-Grammys) return several rows. They are merged into a prefix tree
(``DraftTree``) rooted at the last history token and verified in one forward pass over
one copy of the context: each tree token attends to the cache and to its own ancestors
(a tree attention mask) and gets the rotary position of its depth. Walking from the root,
the target's own token at each node picks the child to follow, so the accepted path is
the longest accepted prefix over all rows, and each emitted token is still the target's
own choice at its position. The KV entries of the accepted path are then moved to
consecutive positions and the rest trimmed, so the cache again holds exactly the history
but its last token. Models whose layers or caches do not allow this verify row 0 only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache
from mlx_lm.sample_utils import make_logits_processors, make_sampler

from .drafters.base import Drafter
from .settings import SamplingSettings
from .tokens import DraftGate, output_size

PREFILL_STEP = 512


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

    def ancestors(self):
        """[i, j] true when node j is node i or one of its ancestors."""
        import numpy as np

        size = len(self.tokens)
        mask = np.zeros((size, size), dtype=bool)
        for i in range(size):
            if self.parent[i] >= 0:
                mask[i] = mask[self.parent[i]]
            mask[i, i] = True
        return mask

    def walk(self, logits: mx.array, chooser: "TokenChooser", history: Sequence[int]):
        """Follow the target's own tokens from the root: (accepted path nodes, token after it)."""
        fast = chooser.greedy and not chooser.processors
        choices = mx.argmax(logits, axis=-1).tolist() if fast else None
        node, path = 0, []
        while True:
            if fast:
                choice = choices[node]
            else:
                context = list(history) + [self.tokens[n] for n in path]
                choice = chooser.choose(logits[node:node + 1], context, [])[0]
            child = self.children[node].get(choice)
            if child is None:
                return path, choice
            path.append(child)
            node = child

    def row_of(self, path: list[int]) -> int:
        for index, nodes in enumerate(self.row_nodes):
            if nodes[:len(path)] == path:
                return index
        return 0


class _TreeCache:
    """A layer's KV cache as the model sees it during a tree pass: the tree mask."""

    def __init__(self, cache, mask):
        self._cache = cache
        self._mask = mask

    @property
    def offset(self):
        return self._cache.offset

    def update_and_fetch(self, keys, values):
        return self._cache.update_and_fetch(keys, values)

    def make_mask(self, *args, **kwargs):
        return self._mask

    def __getattr__(self, name):
        return getattr(self._cache, name)


class _PositionedRope(nn.Module):
    """Rotary embedding at explicit per-token positions (tree depth), whatever offset it gets."""

    def __init__(self, rope, positions: mx.array):
        super().__init__()
        self.inner = rope
        self.positions = positions

    def __call__(self, x, offset=0):
        # [1, heads, T, dim] -> [T, heads, 1, dim]: one "batch" row per token, each its own offset
        turned = x.transpose(2, 1, 0, 3)
        return self.inner(turned, offset=self.positions).transpose(2, 1, 0, 3)


def _tree_capable(model, cache) -> bool:
    from mlx_lm.models.cache import KVCache

    layers = getattr(model, "layers", None)
    if not layers or not cache or len(layers) != len(cache):
        return False
    if any(type(c) is not KVCache for c in cache):
        return False
    return all(hasattr(getattr(layer, "self_attn", None), "rope") for layer in layers)


class Target:
    """The target model and its KV cache: the only code that calls the model."""

    def __init__(self, model):
        self.model = model
        self.cache = make_prompt_cache(model)
        self.trimmable = can_trim_prompt_cache(self.cache)
        self._tree_capable = None
        self.fed = 0  # positions run into the cache, for caches that keep no offset (Mamba)

    @property
    def offset(self) -> int:
        first = self.cache[0] if self.cache else None
        return first.offset if hasattr(first, "offset") else self.fed

    def prefill(self, tokens: Sequence[int], progress: Callable[[int, int], None] | None = None) -> None:
        """Run ``tokens`` into the cache without computing output logits."""
        for start in range(0, len(tokens), PREFILL_STEP):
            chunk = mx.array(tokens[start:start + PREFILL_STEP], dtype=mx.uint32)[None]
            self.model(chunk, cache=self.cache)
            self.fed += chunk.shape[1]
            mx.eval([c.state for c in self.cache])
            if progress:
                progress(min(start + PREFILL_STEP, len(tokens)), len(tokens))

    def forward(self, tokens: Sequence[int]) -> mx.array:
        """Logits (float32, shape [len(tokens), vocab]) for each input position."""
        logits = self.model(mx.array(tokens, dtype=mx.uint32)[None], cache=self.cache)
        self.fed += len(tokens)
        return logits[0].astype(mx.float32)

    @property
    def supports_tree(self) -> bool:
        """Whether several draft rows can be verified in one pass (``forward_tree``)."""
        if self._tree_capable is None:
            self._tree_capable = _tree_capable(self.model, self.cache)
        return self._tree_capable

    def forward_tree(self, tree: DraftTree) -> mx.array:
        """Logits (float32, [len(tree), vocab]) for each tree node, one forward pass.

        Node i sees the cache and its own ancestors, at position ``offset + depth[i]``.
        """
        import numpy as np

        offset = self.offset
        size = len(tree)
        mask = mx.array(np.concatenate([np.ones((size, offset), dtype=bool), tree.ancestors()], axis=1))
        positions = mx.array([offset + d for d in tree.depth], dtype=mx.int32)
        proxies = [_TreeCache(c, mask) for c in self.cache]
        attentions = [layer.self_attn for layer in self.model.layers]
        ropes = [attention.rope for attention in attentions]
        try:
            for attention, rope in zip(attentions, ropes):
                attention.rope = _PositionedRope(rope, positions)
            logits = self.model(mx.array(tree.tokens, dtype=mx.uint32)[None], cache=proxies)
        finally:
            for attention, rope in zip(attentions, ropes):
                attention.rope = rope
        return logits[0].astype(mx.float32)

    def keep_path(self, base: int, path: list[int], length: int) -> None:
        """After ``forward_tree`` at offset ``base``: keep the root and the accepted ``path``
        nodes at consecutive positions, then cut the cache to ``length`` positions."""
        if path != list(range(1, len(path) + 1)):
            source = mx.array([base + node for node in path], dtype=mx.int32)
            end = base + 1 + len(path)
            for c in self.cache:
                keys, values = c.keys[..., source, :], c.values[..., source, :]
                c.keys[..., base + 1:end, :] = keys
                c.values[..., base + 1:end, :] = values
        self.trim(self.offset - length)

    def trim(self, count: int) -> None:
        if count > 0:
            trim_prompt_cache(self.cache, count)
            self.fed -= count

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` cached positions."""
        if self.offset > length:
            if not self.trimmable:
                self.reset()
                return
            self.trim(self.offset - length)

    def reset(self) -> None:
        self.cache = make_prompt_cache(self.model)
        self.fed = 0


class TokenChooser:
    """Turns logits into the target's own choices: argmax, or mlx-lm's sampler."""

    def __init__(self, sampling: SamplingSettings):
        self.sampler = make_sampler(temp=sampling.temperature, top_p=sampling.top_p,
                                    min_p=sampling.min_p, top_k=sampling.top_k)
        self.processors = make_logits_processors(repetition_penalty=sampling.repetition_penalty)
        self.greedy = sampling.greedy

    def choose(self, logits: mx.array, history: Sequence[int], draft: Sequence[int]) -> list[int]:
        """The target's token at each of the ``len(draft) + 1`` positions.

        Position i sees ``history + draft[:i]``; logits processors are applied per
        position exactly as plain decoding would apply them.
        """
        if self.processors:
            rows = []
            context = mx.array(list(history) + list(draft), dtype=mx.uint32)
            for i in range(logits.shape[0]):
                row = logits[i:i + 1]
                for processor in self.processors:
                    row = processor(context[:len(history) + i], row)
                rows.append(row)
            logits = mx.concatenate(rows, axis=0)
        if self.greedy:
            return mx.argmax(logits, axis=-1).tolist()
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        return self.sampler(logprobs).tolist()


@dataclass
class PassResult:
    tokens: list[int]  # emitted by this pass: accepted drafts, then the target's token
    accepted: int  # how many of ``tokens`` came from the draft
    drafted: int
    seconds: float
    drafter_seconds: float
    row: int = 0


class FixedDraftLength:
    """Draft exactly what the settings ask for (adaptive policies replace this)."""

    def draft_length(self, limit: int, match_length: int = 0) -> int:
        return limit

    def record(self, drafted: int, accepted: int, seconds: float, **details) -> None:
        pass


def _cut_at_eos(draft: list[int], eos_tokens: set[int]) -> list[int]:
    """A draft never runs past end-of-sequence."""
    for i, token in enumerate(draft):
        if token in eos_tokens:
            return draft[:i + 1]
    return draft


def top_k_tokens(logits: mx.array, k: int, count: int) -> list[list[int]]:
    """The target's ``k`` most likely tokens at the first ``count`` positions."""
    rows = logits[:count]
    return mx.argpartition(-rows, kth=k - 1, axis=-1)[:, :k].tolist()


def speculative_decode(
    target: Target,
    drafter: Drafter,
    chooser: TokenChooser,
    history: list[int],
    *,
    max_tokens: int,
    draft_count: int,
    eos_tokens: set[int],
    speculate: bool = True,
    policy=None,
) -> Iterator[PassResult]:
    """Decode after ``history`` (whose last token is not yet in the cache).

    ``history`` is extended in place with every emitted token. Stops after an
    end-of-sequence token or ``max_tokens`` emitted tokens; the caller may stop
    pulling between passes to cancel.
    """
    assert target.offset == len(history) - 1, "cache must hold the history but its last token"
    policy = policy or FixedDraftLength()
    produced = 0
    gate = DraftGate(output_size(target.model), drafter.name)  # no id outside the vocabulary
    while produced < max_tokens:
        started = time.perf_counter()
        limit = min(draft_count, max_tokens - produced - 1) if speculate else 0
        rows = gate.rows(drafter.propose(history, limit)) if limit > 0 else []
        rows = [row for row in (_cut_at_eos(list(r[:limit]), eos_tokens) for r in rows) if row]
        if rows:  # the policy sees the proposal, then says how much of it to send
            length = policy.draft_length(max(len(r) for r in rows), drafter.match_length)
            rows = [r[:length] for r in rows] if length > 0 else []
        tree = (DraftTree(history[-1], rows)
                if len(rows) > 1 and drafter.multi_row and target.supports_tree else None)
        draft = rows[0] if rows and tree is None else []
        drafted_at = time.perf_counter()

        row = 0
        if tree is not None:
            base = target.offset
            logits = target.forward_tree(tree)
            path, choice = tree.walk(logits, chooser, history)
            row = tree.row_of(path)
            accepted, drafted = len(path), len(tree) - 1
            emitted = [tree.tokens[node] for node in path]
            if not (emitted and emitted[-1] in eos_tokens):
                emitted.append(choice)
            topk = (top_k_tokens(logits[mx.array(([0] + path)[:len(emitted)])],
                                 drafter.wants_target_topk, len(emitted))
                    if drafter.wants_target_topk else None)
            history.extend(emitted)
            target.keep_path(base, path, len(history) - 1)
        else:
            logits = target.forward([history[-1]] + draft)
            choices = chooser.choose(logits, history, draft)
            accepted, drafted = 0, len(draft)
            while accepted < len(draft) and choices[accepted] == draft[accepted]:
                accepted += 1
            emitted = draft[:accepted]
            if not (emitted and emitted[-1] in eos_tokens):
                emitted.append(choices[accepted])
            topk = (top_k_tokens(logits, drafter.wants_target_topk, len(emitted))
                    if drafter.wants_target_topk else None)
            history.extend(emitted)
            target.trim(target.offset - (len(history) - 1))
        verified_at = time.perf_counter()

        drafter.observe(emitted, accepted=min(accepted, len(emitted)), drafted=len(rows[row]) if rows else 0,
                        row=row, target_topk=topk)
        done_at = time.perf_counter()
        produced += len(emitted)
        if tree is not None:
            policy.record(drafted, accepted, verified_at - drafted_at,
                          depth=max(len(r) for r in rows))
        else:
            policy.record(drafted, accepted, verified_at - drafted_at)
        yield PassResult(emitted, min(accepted, len(emitted)), drafted, done_at - started,
                         (drafted_at - started) + (done_at - verified_at), row)
        if emitted[-1] in eos_tokens:
            return
