"""How a tree pass runs an mlx-lm model it was not written for, without touching it.

A tree pass (``engine/loop/tree.py``) feeds the draft tree's nodes as one sequence, but node i
must be rotated to position ``offset + depth[i]`` (not ``offset + i``) and may attend only to
the cache and its own ancestors. mlx-lm models take neither: their attention layers call
``self.rope(x, offset=cache.offset)``, one offset for the whole sequence, and take the mask
from ``cache.make_mask``. This adapter supplies both per pass:

- ``positioned_view(model, positions)``: a shallow copy of the model in which every
  attention layer's ``rope`` applies per-token positions (``PositionedRope``). Only the
  modules on the way from the model to each attention layer are copied (new objects sharing
  the same weights and submodules); the loaded model and its modules are never written,
  so a pass that raises, or another thread reading the model meanwhile, sees it as loaded.
  ``TreeView`` builds it once per target and aims it at each pass's positions: building
  walks the model (0.3 ms for 30 layers on this project's CPU), aiming sets one attribute
  per layer.
- ``TreeLayerCache``: one layer's KV cache as the view sees it: the real cache's
  ``offset`` and ``update_and_fetch``, and ``make_mask`` giving the tree attention mask
  (within the layer's sliding window where it has one).
- ``unsupported(model)``: why a model cannot be adapted (None when it can).

The adapter goes away once rotary positions can be given per token upstream: MLX's
``mx.fast.rope`` taking offsets of shape ``(T,)`` (one per sequence position rather than
one per batch row) together with a ``positions=`` argument on mlx-lm model calls passed down
to each attention layer's rope, and a ``mask=`` argument on model calls.
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import mlx.nn as nn

NO_ROPE = "its attention layers have no rotary embedding to place tree tokens"


class PositionedRope:
    """A rotary embedding applied at explicit per-token positions, whatever offset it is given."""

    def __init__(self, rope: Callable, positions: mx.array):
        self.rope = rope
        self.positions = positions

    def __call__(self, x: mx.array, offset=0) -> mx.array:
        # [1, heads, T, dim] -> [T, heads, 1, dim]: one "batch" row per token, each its own
        # offset (``mx.fast.rope`` takes one offset per batch row)
        turned = x.transpose(2, 1, 0, 3)
        return self.rope(turned, offset=self.positions).transpose(2, 1, 0, 3)


class TreeLayerCache:
    """One layer's KV cache during a tree pass: writes go to the real cache, the mask is
    the tree's (``tree.mask(offset, window)``: each node sees the prefix and its ancestors)."""

    def __init__(self, cache, tree):
        self.cache = cache
        self.tree = tree

    @property
    def offset(self) -> int:
        return self.cache.offset

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        return self.cache.update_and_fetch(keys, values)

    def make_mask(self, n=None, return_array=False, window_size=None) -> mx.array:
        return self.tree.mask(self.cache.offset, window_size)


def unsupported(model) -> str | None:
    """Why tree passes cannot run on ``model`` (None when they can): its layers must be
    modules reachable once from the model, each with an attention ``self_attn`` that
    rotates with a ``rope``."""
    layers = getattr(model, "layers", None)
    if not isinstance(model, nn.Module) or not layers:
        return "it has no layers of MLX modules to place tree tokens in"
    attentions = [getattr(layer, "self_attn", None) for layer in layers]
    if not all(
        isinstance(attention, nn.Module) and callable(getattr(attention, "rope", None))
        for attention in attentions
    ):
        return NO_ROPE
    counts = _occurrences(model, {id(a) for a in attentions})
    if any(counts.get(id(attention), 0) != 1 for attention in attentions):
        return "its attention layers are not each reachable once from the model"
    return None


class TreeView:
    """``positioned_view(model, ...)`` built once; ``at(positions)`` aims it at one pass."""

    def __init__(self, model: nn.Module):
        self.view = positioned_view(model, mx.zeros((1,), dtype=mx.int32))
        self.ropes = [layer.self_attn.rope for layer in self.view.layers]

    def at(self, positions: mx.array) -> nn.Module:
        for rope in self.ropes:
            rope.positions = positions
        return self.view


def positioned_view(model: nn.Module, positions: mx.array) -> nn.Module:
    """A shallow copy of ``model`` whose attention layers rotate token i to ``positions[i]``.

    ``model`` must pass ``unsupported``. The copy shares every weight and every module off
    the path to an attention layer; it is meant for one pass."""
    attentions = {id(layer.self_attn): layer.self_attn for layer in model.layers}
    paths = _paths(model, attentions)
    edits = {
        paths[key]: _with_rope(attention, PositionedRope(attention.rope, positions))
        for key, attention in attentions.items()
    }
    return _rebuilt(model, edits)


def _children(node):
    if isinstance(node, dict):  # nn.Module is a dict of its parameters and submodules
        return node.items()
    if isinstance(node, (list, tuple)):
        return enumerate(node)
    return ()


def _walk(root, stop: set[int]):
    """(path, node) for the containers under ``root`` (modules, lists, dicts), not
    descending into the nodes whose id is in ``stop``."""
    pending = [((), root)]
    while pending:
        path, node = pending.pop()
        yield path, node
        if id(node) in stop:
            continue
        for key, child in _children(node):
            if isinstance(child, (dict, list, tuple)):
                pending.append(((*path, key), child))


def _occurrences(root, wanted: set[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for _, node in _walk(root, wanted):
        if id(node) in wanted:
            counts[id(node)] = counts.get(id(node), 0) + 1
    return counts


def _paths(root, wanted: dict[int, object]) -> dict[int, tuple]:
    found: dict[int, tuple] = {}
    for path, node in _walk(root, set(wanted)):
        if id(node) in wanted:
            found.setdefault(id(node), path)
            if len(found) == len(wanted):
                break
    return found


def _shallow(module: nn.Module) -> nn.Module:
    """A new module of the same class holding the same parameters, submodules and attributes."""
    view = type(module).__new__(type(module))
    dict.update(view, module)
    vars(view).update(vars(module))
    return view


def _with_rope(attention: nn.Module, rope: PositionedRope) -> nn.Module:
    view = _shallow(attention)
    if "rope" in attention:
        dict.__setitem__(view, "rope", rope)
    else:
        vars(view)["rope"] = rope
    return view


def _rebuilt(node, edits: dict[tuple, object]):
    """``node`` with the object at each path in ``edits`` replaced, copying only the
    containers on those paths."""
    if () in edits:
        return edits[()]
    below: dict[object, dict[tuple, object]] = {}
    for path, replacement in edits.items():
        below.setdefault(path[0], {})[path[1:]] = replacement
    if isinstance(node, nn.Module):
        view = _shallow(node)
        for key, inner in below.items():
            dict.__setitem__(view, key, _rebuilt(node[key], inner))
        return view
    view = list(node) if isinstance(node, (list, tuple)) else dict(node)
    for key, inner in below.items():
        view[key] = _rebuilt(node[key], inner)
    return tuple(view) if isinstance(node, tuple) else view
