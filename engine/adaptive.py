"""Adaptive speculation: draft only as much as pays, judged in tokens per second.

- **Verify cost** ``c(n)``: seconds for one target pass over ``n`` tokens, measured once per
  model on this machine (``measure_cost_curve``) and cached on disk ($DRAFTLESS_CACHE_DIR or
  the user cache dir, ``verify-cost/<model>.json``; a corrupt file is reported and measured
  again). Online, each pass's measured time rescales the curve (an exponential average
  of observed / predicted), so load on the machine is followed.
- **Acceptance**: per drafter and per draft position i, the probability that draft token i
  is accepted given tokens 0..i-1 were, as decayed counts over a Beta(1, 1) prior. Counts
  decay every pass (also passes without a draft), so a drafter that stopped paying is
  probed again now and then (about one short probe every few dozen passes).
- **Choice**: the draft length L (0..limit) maximising
  ``E[tokens | L] / c(1 + rows × L)`` with ``E[tokens | L] = 1 + Σ_{j≤L} Π_{i<j} p_i``;
  L = 0 (plain decoding) when no draft pays. Multi-row drafters pay for ``rows × L`` tree
  tokens.

``python -m engine.adaptive`` prints the embedded model's cost curve (measuring it if needed).
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from pathlib import Path

from .drafters._options import cache_dir

log = logging.getLogger(__name__)

COST_LENGTHS = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
COST_VERSION = 1
MAX_POSITIONS = 128
DECAY = 0.97  # per pass
PRIOR_ACCEPT = 1.0
PRIOR_REJECT = 1.0
SCALE_RATE = 0.1


class CostCurve:
    """Piecewise-linear c(n) through measured points, times an online scale factor."""

    def __init__(self, points: dict[int, float]):
        self.lengths = sorted(points)
        self.seconds = [points[n] for n in self.lengths]
        self.scale = 1.0

    def base(self, n: float) -> float:
        xs, ys = self.lengths, self.seconds
        if n <= xs[0]:
            return ys[0]
        for i in range(1, len(xs)):
            if n <= xs[i]:
                t = (n - xs[i - 1]) / (xs[i] - xs[i - 1])
                return ys[i - 1] + t * (ys[i] - ys[i - 1])
        if len(xs) == 1:
            return ys[0] * n / xs[0]
        slope = max((ys[-1] - ys[-2]) / (xs[-1] - xs[-2]), 0.0)
        return ys[-1] + slope * (n - xs[-1])

    def __call__(self, n: float) -> float:
        return self.scale * self.base(n)

    def observe(self, n: int, seconds: float) -> None:
        predicted = self.base(n)
        if predicted > 0 and seconds > 0:
            ratio = min(max(seconds / predicted, 0.2), 5.0)
            self.scale += SCALE_RATE * (ratio - self.scale)

    def to_dict(self) -> dict:
        return {str(n): s for n, s in zip(self.lengths, self.seconds)}


def cost_path(model_key: str) -> Path:
    return cache_dir() / "verify-cost" / f"{model_key}-v{COST_VERSION}.json"


def measure_cost_curve(target, lengths=COST_LENGTHS, repeats: int = 2, progress=None) -> dict[int, float]:
    """Time one target pass of each length at the cache's current context, then undo it."""
    import mlx.core as mx

    points = {}
    start = target.offset
    total = len(lengths)
    for i, n in enumerate(lengths):
        best = math.inf
        for attempt in range(repeats + (1 if i == 0 else 0)):
            began = time.perf_counter()
            logits = target.forward([0] * n)
            mx.eval(logits)
            mx.argmax(logits, axis=-1).tolist()
            elapsed = time.perf_counter() - began
            target.trim(target.offset - start)
            if attempt or i:  # the very first pass warms up
                best = min(best, elapsed)
        points[n] = best
        if progress:
            progress(i + 1, total)
    return points


def load_cost_curve(model_key: str) -> CostCurve | None:
    path = cost_path(model_key)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        points = {int(n): float(s) for n, s in data["seconds"].items()}
        if not points or any(s <= 0 or not math.isfinite(s) for s in points.values()):
            raise ValueError("bad timings")
        return CostCurve(points)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        log.warning("Ignoring the verify-cost file %s (%s); measuring again.", path, error)
        return None


def save_cost_curve(model_key: str, curve: CostCurve) -> None:
    path = cost_path(model_key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"version": COST_VERSION, "seconds": curve.to_dict()}, out)
        os.replace(temp, path)
    except OSError as error:
        log.warning("Could not save the verify-cost curve %s: %s", path, error)


class AcceptanceTracker:
    """Decayed per-position acceptance counts of one drafter."""

    def __init__(self):
        self.accepted = [0.0] * MAX_POSITIONS
        self.reached = [0.0] * MAX_POSITIONS

    def decay(self, factor: float = DECAY) -> None:
        self.accepted = [a * factor for a in self.accepted]
        self.reached = [r * factor for r in self.reached]

    def record(self, depth: int, accepted: int) -> None:
        for i in range(min(accepted + 1, depth, MAX_POSITIONS)):
            self.reached[i] += 1.0
            if i < accepted:
                self.accepted[i] += 1.0

    def probability(self, i: int) -> float:
        if i >= MAX_POSITIONS:
            return 0.0
        return (self.accepted[i] + PRIOR_ACCEPT) / (self.reached[i] + PRIOR_ACCEPT + PRIOR_REJECT)

    def expected_tokens(self, length: int) -> list[float]:
        """[E[emitted tokens | draft length L] for L = 0..length]."""
        values, total, survive = [1.0], 1.0, 1.0
        for i in range(length):
            survive *= self.probability(i)
            total += survive
            values.append(total)
        return values


class AdaptivePolicy:
    """The decode loop's policy: ``draft_length(limit)`` before a pass, ``record`` after."""

    def __init__(self, curve: CostCurve, tracker: AcceptanceTracker | None = None, rows: int = 1):
        self.curve = curve
        self.tracker = tracker or AcceptanceTracker()
        self.rows = max(1, rows)
        self.last_choice = 0

    def draft_length(self, limit: int) -> int:
        if limit <= 0:
            return 0
        expected = self.tracker.expected_tokens(min(limit, MAX_POSITIONS))
        best, best_rate = 0, expected[0] / self.curve(1)
        for length in range(1, len(expected)):
            rate = expected[length] / self.curve(1 + self.rows * length)
            if rate > best_rate * 1.0001:
                best, best_rate = length, rate
        self.last_choice = best
        return best

    def record(self, drafted: int, accepted: int, seconds: float, depth: int | None = None) -> None:
        self.tracker.decay()
        depth = drafted if depth is None else depth
        if depth:
            self.tracker.record(depth, accepted)
        self.curve.observe(drafted + 1, seconds)


_curves: dict[str, CostCurve] = {}
_trackers: dict[tuple[str, str], AcceptanceTracker] = {}


def cost_curve_for(model_key: str, target=None, progress=None) -> CostCurve:
    """The model's curve: in memory, else on disk, else measured now on ``target``."""
    curve = _curves.get(model_key)
    if curve is None:
        curve = load_cost_curve(model_key)
        if curve is None:
            if target is None:
                raise ValueError("no cost curve cached and no target to measure it on")
            curve = CostCurve(measure_cost_curve(target, progress=progress))
            save_cost_curve(model_key, curve)
        _curves[model_key] = curve
    return curve


def policy_for(model_key: str, drafter, target=None, progress=None) -> AdaptivePolicy:
    """A policy sharing this process's acceptance memory for (model, drafter)."""
    curve = cost_curve_for(model_key, target, progress)
    tracker = _trackers.setdefault((model_key, drafter.name), AcceptanceTracker())
    rows = getattr(drafter, "rows", 1) if getattr(drafter, "multi_row", False) else 1
    return AdaptivePolicy(curve, tracker, rows)


def main() -> None:  # pragma: no cover - a measurement tool
    import engine  # noqa: F401  (OpenBLAS preload)
    from .decode import Target
    from .model_ngrams import model_key
    from .models import load_model

    loaded = load_model(None)
    target = Target(loaded.model)
    prompt = list(loaded.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 20))
    target.prefill(prompt)
    key = model_key(loaded)
    curve = cost_curve_for(key, target)
    print(f"verify cost c(n) for {loaded.name} (cached in {cost_path(key)}):")
    for n in curve.lengths:
        print(f"  n={n:4d}  {curve.base(n) * 1000:8.1f} ms  ({curve.base(n) / curve.base(1):.2f}x one token)")


if __name__ == "__main__":  # pragma: no cover
    main()
