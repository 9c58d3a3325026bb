"""Adaptive speculation: draft only as much as pays, judged in tokens per second.

- **Verify cost** ``c(n)``: seconds for one target pass over ``n`` tokens, measured once per
  model on this machine (``measure_cost_curve``) and cached on disk ($DRAFTLESS_CACHE_DIR or
  the user cache dir, ``verify-cost/<model>.json``; a file that is not a sane curve is kept
  aside as ``.corrupt-<stamp>``, reported once and measured again). Measuring never holds up an answer: until it is done (the service measures
  between answers, in steps of one pass) a prior shape (``PRIOR_RATIOS``) is used, put in
  seconds by the first pass it sees. Online, each pass's measured time rescales the curve
  (an exponential average of observed / predicted, per length), so load on the machine and
  a prior's wrong shape are followed.
- **Acceptance**: per drafter, per match class and per draft position i, the probability
  that draft token i is accepted given tokens 0..i-1 were, as counts that fade by a
  factor 0.85 at every pass that drafted in that class (about the last seven count; a
  switch from copying to new text is followed within about twenty passes). Position 0
  starts from a prior of one observation: the drafter's measured acceptance for that match
  class (``CLASS_PRIORS``, so a first answer drafts as long as such matches earn), else
  Beta(0.5, 0.5); position i > 0 from one pseudo-observation at
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

The service owns the curves and the acceptance memory (``AdaptiveMemory``), never this
module. ``python -m engine.bench.costs`` prints a model's cost curve and compares modes.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

from . import _blas
from .decode import Target
from .errors import warn
from .paths import cache_dir
from .untrusted import move_aside, read_regular_file, write_atomic

log = logging.getLogger(__name__)

COST_LENGTHS = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64, 96)
COST_VERSION = 1
MAX_COST_FILE_BYTES = 1 << 20  # a curve file is a few hundred bytes
MAX_POSITIONS = 128
DECAY = 0.85  # per drafted pass
PROBE_INTERVAL = 16  # passes with a proposal but no draft before a 1-token probe
PRIOR_ACCEPT = 0.5
PRIOR_REJECT = 0.5
# Cold start, per drafter and match class (0: not said, then 1-2, 3-5, 6-11, 12+ tokens):
# the prior (accept, reject) pseudo-counts of position 0, so a first answer drafts as much
# as such matches usually earn instead of paying for learning. Fitted on the benchmark's
# tuning prompts (python -m engine.bench.tune), checked on its check prompts.
CLASS_PRIORS: dict[str, dict[int, tuple[float, float]]] = {
    "suffix": {1: (0.35, 0.65), 2: (0.71, 0.29), 3: (0.82, 0.18), 4: (0.98, 0.02)},
    "prompt-lookup": {1: (0.34, 0.66), 2: (0.71, 0.29), 3: (0.77, 0.23), 4: (0.96, 0.04)},
    "ngram-cache": {0: (0.79, 0.21)},
}
DEPTH_PRIOR = 1.0  # pseudo-observations at position i-1's estimate, for position i
MATCH_CLASS_STARTS = (1, 3, 6, 12)  # match lengths where a class begins (0: not said)
SCALE_RATE = 0.1
LOCAL_PRIOR = 5.0  # observations at one length before its own scale outweighs the global one
LOCAL_WEIGHT_CAP = 20
# c(n) / c(1) before this machine was measured: the embedded model on a 2-core x86 CPU with
# OpenBLAS (resources/readme/benchmarks), between a GPU's flat curve and a slow BLAS's steep one.
PRIOR_RATIOS = {1: 1.0, 2: 1.2, 4: 1.5, 8: 1.8, 16: 2.1, 32: 3.2, 64: 5.5, 96: 8.0}


class CostCurve:
    """Piecewise-linear c(n) through measured points, corrected online.

    Timing noise only ever adds time, so the measured points are made non-decreasing by
    taking, for each n, the least time measured at n or any longer pass. Online, every
    pass's observed / predicted ratio feeds a global scale and a per-length scale; a
    length's own scale counts more as its observations accumulate.
    """

    def __init__(self, points: dict[int, float], measured: bool = True):
        self.measured = measured  # False: a prior shape in relative units
        self.anchored = measured  # seconds, not relative units (a prior: after its first pass)
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
        if not self.anchored:
            if seconds > 0:  # a prior's shape, put in this machine's seconds by its first pass
                factor = seconds / self.base(n)
                self.seconds = [s * factor for s in self.seconds]
                self.anchored = True
            return
        predicted = self.base(n)
        if predicted > 0 and seconds > 0:
            ratio = min(max(seconds / predicted, 0.2), 5.0)
            self.scale += SCALE_RATE * (ratio - self.scale)
            local = self.local.setdefault(int(n), [ratio, 0])
            local[0] += SCALE_RATE * (ratio - local[0])
            local[1] += 1

    def to_dict(self) -> dict:
        return {str(n): s for n, s in zip(self.lengths, self.seconds)}


MEASURE_CONTEXT = 512


def cost_path(model_key: str) -> Path:
    # one- and two-row products as sgemv (engine/_blas.py) change c(1) and c(2): their own curve
    products = "-rowgemv" if _blas.row_gemv else ""
    return cache_dir() / "verify-cost" / f"{model_key}{products}-v{COST_VERSION}.json"


def prior_cost_curve() -> CostCurve:
    return CostCurve(PRIOR_RATIOS, measured=False)


def timing_steps(target, lengths=COST_LENGTHS, repeats: int = 3, tokens=None):
    """Time target passes of each length at the cache's current context, one pass per step.

    A generator: each step runs one pass (as the loop does: forward, then argmax of every
    row), undoes it in the cache and yields ``(done, total, samples)`` with ``samples[n]``
    the seconds measured so far at n. Every shape is run once untimed first; then lengths
    are visited round-robin ``repeats`` times, rotated each round, so a burst of load
    elsewhere on the machine inflates one sample rather than one length. ``tokens``: the
    pass's input (default zeros: the cost does not depend on which tokens). Each pass is
    undone by restoring a checkpoint, so recurrent state is put back as well.
    """
    import mlx.core as mx

    lengths = list(lengths)
    tokens = list(tokens) if tokens is not None else [0] * max(lengths)
    start = target.checkpoint()
    samples: dict[int, list[float]] = {n: [] for n in lengths}
    total = (repeats + 1) * len(lengths)
    done = 0
    for rep in range(-1, repeats):
        shift = max(rep, 0) % len(lengths)
        for n in lengths[shift:] + lengths[:shift]:
            began = time.perf_counter()
            mx.argmax(target.forward(tokens[:n]), axis=-1).tolist()
            elapsed = time.perf_counter() - began
            target.restore(start)
            if rep >= 0:
                samples[n].append(elapsed)
            done += 1
            yield done, total, samples


def measure_cost_curve(target, lengths=COST_LENGTHS, repeats: int = 3) -> dict[int, float]:
    """The least time of each length (see ``timing_steps``) at the chat's context length.

    The passes run on a cache of their own (the same context length, at most
    ``MEASURE_CONTEXT`` tokens), never the chat's: a chat's cache is left as it was.
    """
    probe = Target(target.model)
    probe.prefill([0] * min(target.offset, MEASURE_CONTEXT))
    samples: dict[int, list[float]] = {}
    for _, _, samples in timing_steps(probe, lengths, repeats):
        pass
    return {n: min(values) for n, values in samples.items()}


MAX_COST_LENGTH = 1 << 16
MAX_PASS_SECONDS = 600.0
SLOWER_MARGIN = 2.0  # a longer pass measured as fast as half a shorter one: not noise


def validated_cost_points(data) -> dict[int, float]:
    """The points of a verify-cost file, or ValueError saying what is wrong with them.

    Lengths are integers from 1 (plain decoding must be among them), times finite and
    positive, and the curve monotone enough: no pass more than ``SLOWER_MARGIN`` times
    faster than a shorter one (timing noise only ever adds time).
    """
    if not isinstance(data, dict) or data.get("version") != COST_VERSION:
        raise ValueError("not a version-1 verify-cost file")
    seconds = data.get("seconds")
    if not isinstance(seconds, dict) or not seconds:
        raise ValueError("no timings")
    points = {}
    for length, value in seconds.items():
        if not (isinstance(length, str) and length.isdigit() and 1 <= int(length) <= MAX_COST_LENGTH):
            raise ValueError(f"length {length!r} is not an integer from 1 to {MAX_COST_LENGTH}")
        if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
                or not 0 < value <= MAX_PASS_SECONDS):
            raise ValueError(f"time {value!r} for length {length} is not a positive number of seconds")
        points[int(length)] = float(value)
    if 1 not in points:
        raise ValueError("no timing for a one-token pass")
    slowest = 0.0
    for length in sorted(points):
        if points[length] * SLOWER_MARGIN < slowest:
            raise ValueError(f"a {length}-token pass is timed far faster than a shorter one")
        slowest = max(slowest, points[length])
    return points


def load_cost_curve(model_key: str) -> CostCurve | None:
    """The cached curve, or None: missing, or bad (then kept aside, said once, re-measured)."""
    path = cost_path(model_key)
    if not path.exists():
        return None
    try:
        data = read_regular_file(path, MAX_COST_FILE_BYTES).decode("utf-8")
        return CostCurve(validated_cost_points(json.loads(data)))
    except (OSError, ValueError, RecursionError) as error:
        try:
            kept = f"kept as {move_aside(path).name}"
        except OSError as move_error:
            kept = f"left in place ({move_error})"
        warn(f"Ignoring the verify-cost file {path} ({error}); it was {kept} and this "
             "machine's verify speed will be measured again.")
        return None


def save_cost_curve(model_key: str, curve: CostCurve) -> None:
    path = cost_path(model_key)
    try:
        write_atomic(path, json.dumps({"version": COST_VERSION, "seconds": curve.to_dict()}))
    except OSError as error:
        log.warning("Could not save the verify-cost curve %s: %s", path, error)


class AcceptanceTracker:
    """Decayed per-position acceptance counts of one drafter."""

    def __init__(self, prior_accept: float = PRIOR_ACCEPT, prior_reject: float = PRIOR_REJECT):
        self.accepted = [0.0] * MAX_POSITIONS
        self.reached = [0.0] * MAX_POSITIONS
        self.prior_accept = prior_accept
        self.prior_reject = prior_reject

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
                p = (self.accepted[0] + self.prior_accept) / (
                    self.reached[0] + self.prior_accept + self.prior_reject)
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


class AdaptiveMemory:
    """Cost curves (per model) and acceptance trackers (per model and drafter) of one owner:
    the service keeps one for the process, a benchmark one per run. Never module globals."""

    def __init__(self):
        self.curves: dict[str, CostCurve] = {}
        self.trackers: dict[tuple[str, str], dict[int, AcceptanceTracker]] = {}

    def curve(self, model_key: str) -> CostCurve:
        """In memory, else on disk, else the prior shape (measure it with ``measure``)."""
        curve = self.curves.get(model_key)
        if curve is None:
            curve = self.curves[model_key] = load_cost_curve(model_key) or prior_cost_curve()
        return curve

    def measured(self, model_key: str) -> bool:
        return self.curve(model_key).measured

    def use_measurement(self, model_key: str, points: dict[int, float]) -> CostCurve:
        """Replace the model's curve by measured points and save them."""
        curve = self.curves[model_key] = CostCurve(points)
        save_cost_curve(model_key, curve)
        return curve

    def measure(self, model_key: str, target) -> CostCurve:
        """Measure the model's curve now on ``target`` (blocking; the service does it in steps)."""
        return self.use_measurement(model_key, measure_cost_curve(target))

    def forget_acceptance(self) -> None:
        self.trackers.clear()

    def policy(self, model_key: str, drafter) -> "AdaptivePolicy":
        """A policy sharing this memory's acceptance counts for (model, drafter)."""
        trackers = self.trackers.setdefault((model_key, drafter.name), {})
        return AdaptivePolicy(self.curve(model_key), trackers, drafter.rows_per_pass,
                              CLASS_PRIORS.get(drafter.name))


class AdaptivePolicy:
    """The decode loop's policy: after the drafter proposed, ``draft_length(limit,
    match_length)`` says how much of the proposal to send; ``record`` after the pass."""

    def __init__(self, curve: CostCurve, trackers: dict[int, AcceptanceTracker] | None = None,
                 rows: int = 1, priors: dict[int, tuple[float, float]] | None = None):
        self.curve = curve
        self.priors = priors or {}
        self.trackers = trackers if trackers is not None else {}
        self.rows = max(1, rows)
        self.last_choice = 0
        self.last_class = 0
        self.idle: dict[int, int] = {}  # per class: passes with a proposal but no draft

    def tracker(self, klass: int) -> AcceptanceTracker:
        """The acceptance memory of one match class."""
        tracker = self.trackers.get(klass)
        if tracker is None:
            prior = self.priors.get(klass, (PRIOR_ACCEPT, PRIOR_REJECT))
            tracker = self.trackers[klass] = AcceptanceTracker(*prior)
        return tracker

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
