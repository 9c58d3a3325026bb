"""Adaptive speculation: draft only as much as pays, judged in tokens per second.

- **Verify cost** ``c(n)``: seconds for one target pass over ``n`` tokens, measured once per
  model on this machine (``measure_cost_curve``) and cached on disk ($DRAFTLESS_CACHE_DIR or
  the user cache dir, ``verify-cost/<model>.json``; a corrupt file is reported and measured
  again). Online, each pass's measured time rescales the curve (an exponential average
  of observed / predicted), so load on the machine is followed.
- **Acceptance**: per drafter, per match class and per draft position i, the probability
  that draft token i is accepted given tokens 0..i-1 were, as counts that fade by a
  factor 0.85 at every pass that drafted in that class (about the last seven count; a
  switch from copying to new text is followed within about twenty passes). Position 0
  starts from a Beta(0.5, 0.5) prior; position i > 0 from one pseudo-observation at
  position i-1's estimate, so positions that were not reached lately follow the ones
  that were instead of keeping stale failures.
- **Match classes**: copying drafters say how long a match their proposal rests on
  (``Drafter.match_length``): unknown, 1-2, 3-5, 6-11 or 12+ tokens. A long match that
  copies a code block is not judged by the short matches that failed in the prose
  before it.
- **Proposal first**: the drafter proposes (cheap) before the policy chooses, so the
  policy knows whether there is a guess and how strong its match is, and trims it.
- **Probing**: when no draft pays, one 1-token draft is still sent once a class has had
  a proposal on 16 passes without drafting, so a drafter that starts paying again is
  noticed; its cost is a fraction of a pass in 16.
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

from .paths import cache_dir

log = logging.getLogger(__name__)

COST_LENGTHS = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64, 96)
COST_VERSION = 1
MAX_POSITIONS = 128
DECAY = 0.85  # per drafted pass
PROBE_INTERVAL = 16  # passes with a proposal but no draft before a 1-token probe
PRIOR_ACCEPT = 0.5
PRIOR_REJECT = 0.5
DEPTH_PRIOR = 1.0  # pseudo-observations at position i-1's estimate, for position i
MATCH_CLASS_STARTS = (1, 3, 6, 12)  # match lengths where a class begins (0: not said)
SCALE_RATE = 0.1
LOCAL_PRIOR = 5.0  # observations at one length before its own scale outweighs the global one
LOCAL_WEIGHT_CAP = 20


class CostCurve:
    """Piecewise-linear c(n) through measured points, corrected online.

    Timing noise only ever adds time, so the measured points are made non-decreasing by
    taking, for each n, the least time measured at n or any longer pass. Online, every
    pass's observed / predicted ratio feeds a global scale and a per-length scale; a
    length's own scale counts more as its observations accumulate.
    """

    def __init__(self, points: dict[int, float]):
        self.lengths = sorted(points)
        seconds = [points[n] for n in self.lengths]
        for i in range(len(seconds) - 2, -1, -1):
            seconds[i] = min(seconds[i], seconds[i + 1])
        self.seconds = seconds
        self.scale = 1.0
        self.local: dict[int, list[float]] = {}  # n -> [ratio average, observations]

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
        local = self.local.get(int(n))
        if local is None:
            return self.scale * self.base(n)
        ratio, seen = local
        weight = min(seen, LOCAL_WEIGHT_CAP)
        return self.base(n) * (weight * ratio + LOCAL_PRIOR * self.scale) / (weight + LOCAL_PRIOR)

    def observe(self, n: int, seconds: float) -> None:
        predicted = self.base(n)
        if predicted > 0 and seconds > 0:
            ratio = min(max(seconds / predicted, 0.2), 5.0)
            self.scale += SCALE_RATE * (ratio - self.scale)
            local = self.local.setdefault(int(n), [ratio, 0])
            local[0] += SCALE_RATE * (ratio - local[0])
            local[1] += 1

    def to_dict(self) -> dict:
        return {str(n): s for n, s in zip(self.lengths, self.seconds)}


def cost_path(model_key: str) -> Path:
    return cache_dir() / "verify-cost" / f"{model_key}-v{COST_VERSION}.json"


def measure_cost_curve(target, lengths=COST_LENGTHS, repeats: int = 3, progress=None) -> dict[int, float]:
    """Time one pass of each length at the chat's current context length, then undo it.

    The passes run on a cache of their own (the same context length, at most 512 tokens),
    never the chat's: a sliding-window or recurrent cache could not take them back.
    Lengths are visited round-robin ``repeats`` times and the least time is kept, so a
    burst of load elsewhere on the machine inflates one sample rather than one length.
    """
    import mlx.core as mx

    from .decode import Target

    probe = Target(target.model)
    probe.prefill([0] * min(target.offset, 512))
    start = probe.checkpoint()
    best = {n: math.inf for n in lengths}
    total = repeats * len(lengths)
    done = 0
    mx.eval(probe.forward([0]))  # warm up
    probe.restore(start)
    for _ in range(repeats):
        for n in lengths:
            began = time.perf_counter()
            logits = probe.forward([0] * n)
            mx.argmax(logits, axis=-1).tolist()
            best[n] = min(best[n], time.perf_counter() - began)
            probe.restore(start)
            done += 1
            if progress:
                progress(done, total)
    return best


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

    def probabilities(self, length: int) -> list[float]:
        """P(draft token i accepted | tokens before it were) for i < length."""
        values: list[float] = []
        for i in range(min(length, MAX_POSITIONS)):
            if i == 0:
                p = (self.accepted[0] + PRIOR_ACCEPT) / (self.reached[0] + PRIOR_ACCEPT + PRIOR_REJECT)
            else:
                p = (self.accepted[i] + DEPTH_PRIOR * values[-1]) / (self.reached[i] + DEPTH_PRIOR)
            values.append(p)
        return values + [0.0] * (length - len(values))

    def probability(self, i: int) -> float:
        return self.probabilities(i + 1)[i]

    def expected_tokens(self, length: int) -> list[float]:
        """[E[emitted tokens | draft length L] for L = 0..length]."""
        values, total, survive = [1.0], 1.0, 1.0
        for p in self.probabilities(length):
            survive *= p
            total += survive
            values.append(total)
        return values


def match_class(match_length: int) -> int:
    """0 when the drafter does not say, else 1.. for ever longer matches."""
    return sum(1 for start in MATCH_CLASS_STARTS if match_length >= start)


class AdaptivePolicy:
    """The decode loop's policy: after the drafter proposed, ``draft_length(limit,
    match_length)`` says how much of the proposal to send; ``record`` after the pass."""

    def __init__(self, curve: CostCurve, trackers: dict[int, AcceptanceTracker] | None = None,
                 rows: int = 1):
        self.curve = curve
        self.trackers = trackers if trackers is not None else {}
        self.rows = max(1, rows)
        self.last_choice = 0
        self.last_class = 0
        self.idle: dict[int, int] = {}  # per class: passes with a proposal but no draft

    def tracker(self, klass: int) -> AcceptanceTracker:
        """The acceptance memory of one match class."""
        return self.trackers.setdefault(klass, AcceptanceTracker())

    def draft_length(self, limit: int, match_length: int = 0) -> int:
        if limit <= 0:
            return 0
        self.last_class = match_class(match_length)
        expected = self.tracker(self.last_class).expected_tokens(min(limit, MAX_POSITIONS))
        best, best_rate = 0, expected[0] / self.curve(1)
        for length in range(1, len(expected)):
            rate = expected[length] / self.curve(1 + self.rows * length)
            if rate > best_rate * 1.0001:
                best, best_rate = length, rate
        if best == 0:
            idle = self.idle.get(self.last_class, 0) + 1
            self.idle[self.last_class] = idle
            if idle > PROBE_INTERVAL:
                best = 1
        self.last_choice = best
        return best

    def record(self, drafted: int, accepted: int, seconds: float, depth: int | None = None) -> None:
        depth = drafted if depth is None else depth
        if depth:
            tracker = self.tracker(self.last_class)
            tracker.decay()
            tracker.record(depth, accepted)
            self.idle[self.last_class] = 0
        self.curve.observe(drafted + 1, seconds)


_curves: dict[str, CostCurve] = {}
_trackers: dict[tuple[str, str], dict[int, AcceptanceTracker]] = {}


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
    trackers = _trackers.setdefault((model_key, drafter.name), {})
    rows = getattr(drafter, "rows", 1) if getattr(drafter, "multi_row", False) else 1
    return AdaptivePolicy(curve, trackers, rows)


COPY_PROMPT = ("Repeat the following paragraph exactly, word for word:\n\n"
               "The lighthouse stood at the end of the rocky point, its white tower streaked "
               "with rust. Every evening the keeper climbed the spiral stairs, trimmed the wick, "
               "polished the great lens and watched the beam sweep across the dark water. Ships "
               "passed far out at sea, and none of them ever knew his name.")
NOVEL_PROMPT = "Invent a new board game and describe how to play it."


def compare(drafters: list[str], max_tokens: int, repeats: int,
            modes=(False, True), prompts=("copy", "novel")) -> None:  # pragma: no cover
    """Speed of each drafter (fixed draft count 8, and adaptive) relative to ``none``.

    Paired runs: every configuration runs right after its own ``none`` run on the same
    prompt, and the speed-up is the median over repeats of (config tok/s) / (that none
    run's tok/s), which cancels most of the drift of a shared, loaded machine.
    """
    import statistics as st

    from .drafters import measurement_options
    from .events import DoneEvent
    from .models import load_model
    from .session import ChatSession
    from .settings import DraftSettings, GenerationRequest

    loaded = load_model(None)

    def once(prompt, drafter, adaptive_on):
        _trackers.clear()  # every run starts from the prior: the learning cost is included
        request = GenerationRequest(
            messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
            draft=DraftSettings(drafter=drafter, draft_count=8, adaptive=adaptive_on,
                                options=measurement_options(drafter))).validated()
        for event in ChatSession(loaded).generate(request):
            if isinstance(event, DoneEvent):
                stats, timing = event.stats, event.timing
        return stats["emitted"] / timing["decode_s"], stats["tokens_per_pass"], stats["acceptance_rate"]

    configs = [(d, a) for d in drafters for a in modes]
    print(f"{'prompt':6s} {'drafter':14s} {'mode':9s} {'speed-up (median, runs)':>28s} "
          f"{'tok/pass':>8s} {'accept':>7s}", flush=True)
    for prompt_name, prompt in (("copy", COPY_PROMPT), ("novel", NOVEL_PROMPT)):
        if prompt_name not in prompts:
            continue
        for drafter, adaptive_on in configs:
            ratios = []
            for _ in range(repeats):
                base, _, _ = once(prompt, "none", False)
                rate, per_pass, accept = once(prompt, drafter, adaptive_on)
                ratios.append(rate / base)
            runs = " ".join(f"{r:.2f}" for r in ratios)
            print(f"{prompt_name:6s} {drafter:14s} {'adaptive' if adaptive_on else 'fixed 8':9s} "
                  f"{st.median(ratios):7.3f} ({runs:>18s}) {per_pass:8.2f} {accept:7.2f}", flush=True)


def batched_rows_forward(target, root: int, rows: list[list[int]]):  # pragma: no cover
    """The paper's naive layout, for measurement: k copies of the context, one row each."""
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache

    width = max(len(r) for r in rows)
    inputs = mx.array([[root] + r + [r[-1]] * (width - len(r)) for r in rows], dtype=mx.uint32)
    offset = target.offset
    caches = []
    for c in target.cache:
        copy = KVCache()
        copy.keys = mx.repeat(c.keys[..., :offset, :], len(rows), axis=0)
        copy.values = mx.repeat(c.values[..., :offset, :], len(rows), axis=0)
        copy.offset = offset
        caches.append(copy)
    return target.model(inputs, cache=caches)


def tree_vs_batch(context: int, shapes, repeats: int = 5) -> None:  # pragma: no cover
    """Seconds per verify pass of k rows x w tokens: tree mask over one copy vs k copies."""
    import random

    import mlx.core as mx

    from .decode import DraftTree, Target
    from .models import load_model

    loaded = load_model(None)
    target = Target(loaded.model)
    rng = random.Random(0)
    target.prefill([rng.randrange(100, 40000) for _ in range(context)])
    print(f"context {context} tokens; best of {repeats} (ms)")
    print(f"{'k x w':>7s} {'tree nodes':>10s} {'tree':>8s} {'batch':>8s} {'chain 1+w':>9s}")
    for k, w in shapes:
        rows = [[rng.randrange(100, 40000) for _ in range(w)] for _ in range(k)]
        tree = DraftTree(7, rows)
        times = {"tree": [], "batch": [], "chain": []}
        for _ in range(repeats):
            for kind in times:
                start = target.offset
                began = time.perf_counter()
                if kind == "tree":
                    out = target.forward_tree(tree)
                elif kind == "batch":
                    out = batched_rows_forward(target, 7, rows)
                else:
                    out = target.forward([7] + rows[0])
                mx.eval(out)
                times[kind].append(time.perf_counter() - began)
                target.trim(target.offset - start)
        print(f"{k:3d} x {w:<3d} {len(tree):10d} {min(times['tree']) * 1e3:8.1f} "
              f"{min(times['batch']) * 1e3:8.1f} {min(times['chain']) * 1e3:9.1f}")


def main() -> None:  # pragma: no cover - a measurement tool
    import argparse

    import engine  # noqa: F401  (OpenBLAS preload)
    from .decode import Target
    from .model_ngrams import model_key
    from .models import load_model

    parser = argparse.ArgumentParser(prog="python -m engine.adaptive")
    parser.add_argument("--compare", help="comma-separated drafters to compare with none")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--adaptive-only", action="store_true", help="compare adaptive mode only")
    parser.add_argument("--prompts", default="copy,novel", help="which of copy,novel to run")
    parser.add_argument("--remeasure", action="store_true", help="measure c(n) again")
    parser.add_argument("--tree-vs-batch", type=int, metavar="CONTEXT",
                        help="time multi-row verification both ways at this context length")
    args = parser.parse_args()
    if args.tree_vs_batch:
        tree_vs_batch(args.tree_vs_batch, [(2, 4), (5, 4), (10, 4), (10, 10)])
        return
    loaded = load_model(None)
    target = Target(loaded.model)
    prompt = list(loaded.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 20))
    target.prefill(prompt)
    key = model_key(loaded)
    if args.remeasure:
        cost_path(key).unlink(missing_ok=True)
    curve = cost_curve_for(key, target)
    print(f"verify cost c(n) for {loaded.name} (cached in {cost_path(key)}):")
    for n in curve.lengths:
        print(f"  n={n:4d}  {curve.base(n) * 1000:8.1f} ms  ({curve.base(n) / curve.base(1):.2f}x one token)")
    if args.compare:
        compare(args.compare.split(","), args.max_tokens, args.repeats,
                (True,) if args.adaptive_only else (False, True), args.prompts.split(","))


if __name__ == "__main__":  # pragma: no cover
    main()
