"""The caches speculation runs on, how each is rolled back, and the `speculation` line.

A verify pass writes the last history token and the draft into the cache; the rejected
part must then be taken back exactly. Per cache layer (mlx-lm's cache classes):

- ``KVCache`` (full attention): trimmed.
- Sliding windows. mlx-lm gives sliding-window layers (Gemma 3, Mistral/Ministral with a
  window, Cohere 2, GPT-OSS, …) a ``RotatingKVCache`` as large as the window. Once it has
  wrapped, writing draft tokens overwrites the oldest entries of the window, and trimming
  the rejected drafts cannot bring them back: the next tokens would see a shorter window
  than plain decoding does. So speculation gives these layers a plain ``KVCache``
  instead. Every mlx-lm model with such layers passes its window to
  ``create_attention_mask(..., window_size=W)``, which for a ``KVCache`` is a causal mask
  limited to the last W positions: each token attends to exactly the keys plain decoding
  gives it, and the layer is trimmed like any other. The price is memory: those layers
  keep the whole context, as the global layers do. Chosen over a rotating cache with room
  for the longest draft because it is exact by construction (mlx-lm's own mask code), needs
  no cache class of our own, and tree verification works unchanged (the window is applied
  to the tree mask too). Cost-curve passes run on their own cache, never the chat's.
- Recurrent state (``ArraysCache``: Mamba, LFM2, Qwen3-Next, Jamba, RecurrentGemma, …):
  the state before a verify pass is kept (MLX arrays are values, and these caches replace
  their arrays rather than writing into them, so keeping the references is a copy). When a
  draft token is rejected the state is restored, the attention layers are trimmed back to
  the same point, and the accepted tokens are run again: exact, at the price of one short
  extra forward pass per rejection.
- Anything else (``ChunkedKVCache``, a rotating cache that keeps sink tokens, unknown
  classes): no speculation, and the line says why.

Tree verification (several draft rows in one pass, ``engine/loop/tree.py``) needs every layer
to be attention over a plain ``KVCache``, with a rotary embedding that
``engine.models.tree_adapter`` can position per token (``unsupported`` says why not);
otherwise multi-row drafters verify their first row only.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlx_lm.models.cache import (
    ArraysCache,
    CacheList,
    KVCache,
    QuantizedKVCache,
    RotatingKVCache,
    make_prompt_cache,
)

from .tree_adapter import unsupported

TRIM, RESTORE = "trim", "restore"
RECURRENT_REASON = "recurrent layers: state restored and kept tokens re-run after a rejection"


def speculation_cache(model) -> list:
    """The model's own cache, with sliding-window rotating layers as plain KV caches."""
    return [_unrotated(c) for c in make_prompt_cache(model)]


def _unrotated(cache):
    if type(cache) is RotatingKVCache and cache.keep == 0:
        return KVCache()
    if isinstance(cache, CacheList):
        return CacheList(*[_unrotated(c) for c in cache.caches])
    return cache


def rollback_kind(cache) -> str | None:
    """TRIM, RESTORE, or None when this cache layer cannot be rolled back exactly."""
    if type(cache) in (KVCache, QuantizedKVCache):
        return TRIM
    if isinstance(cache, ArraysCache):
        return RESTORE
    if isinstance(cache, CacheList):
        kinds = {rollback_kind(c) for c in cache.caches}
        return None if None in kinds else (RESTORE if RESTORE in kinds else TRIM)
    return None


def snapshot(cache):
    """What ``restore`` needs to put ``cache`` back as it is now."""
    if isinstance(cache, CacheList):
        return [snapshot(c) for c in cache.caches]
    if isinstance(cache, ArraysCache):
        return list(cache.cache)
    return cache.offset


def restore(cache, saved) -> None:
    if isinstance(cache, CacheList):
        for member, part in zip(cache.caches, saved):
            restore(member, part)
    elif isinstance(cache, ArraysCache):
        cache.cache = list(saved)
    else:
        cache.trim(cache.offset - saved)


@dataclass(frozen=True)
class Speculation:
    """How this model speculates: mode is "tree", "one row" or "off"."""

    mode: str
    reason: str = ""

    @property
    def on(self) -> bool:
        return self.mode != "off"

    @property
    def tree(self) -> bool:
        return self.mode == "tree"

    @property
    def line(self) -> str:
        """What the engine shows: "on (tree)", "on (one row: why)" or "off (why)"."""
        if self.mode == "tree":
            return "on (tree)"
        if self.mode == "one row":
            return f"on (one row: {self.reason})"
        return f"off ({self.reason})"


def speculation_for(model, cache: list) -> Speculation:
    kinds = [rollback_kind(c) for c in cache]
    if not cache:
        return Speculation("off", "the model has no cache to roll back")
    stuck = sorted({type(c).__name__ for c, kind in zip(cache, kinds) if kind is None})
    if stuck:
        return Speculation("off", f"its {', '.join(stuck)} cache cannot be rolled back")
    if RESTORE in kinds:
        return Speculation("one row", RECURRENT_REASON)
    layers = getattr(model, "layers", None)
    if not layers or len(layers) != len(cache) or any(type(c) is not KVCache for c in cache):
        return Speculation("one row", "its layers do not map one to one onto plain KV caches")
    reason = unsupported(model)
    return Speculation("one row", reason) if reason else Speculation("tree")
