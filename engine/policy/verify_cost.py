"""Verify cost c(n): seconds for one target pass over n tokens. This module defines the
curve, its file (parse, load, save) and its timing (``timing_steps``); ``AdaptiveMemory``
holds each model's curve and is the one path that measures it (``measure_in_steps``, which
the service runs between answers), and ``engine.policy.adaptive`` plans with a curve it is given.

Timing a pass needs MLX, everything else here is plain Python: ``mlx.core`` is imported
inside ``timing_steps`` only, so the policy (``engine.policy.adaptive``), which imports this
module, never loads MLX. The timing stays here rather than
in a module of its own because it is a few lines that only make sense next to the curve
they fill, and the service and the benchmark (``engine.bench.runner``) both call it.

- **Measured for this model on this machine** (by the service, in short steps between
  answers, ``measurement_steps``), at ``MEASURE_CONTEXT`` tokens of context, and cached on
  disk ($DRAFTLESS_CACHE_DIR or the user cache dir, ``verify-cost/<model>.json``; a file that is not a sane curve is kept aside as
  ``.corrupt-<stamp>``, reported once and measured again).
- **Before that**, a prior shape (``PRIOR_RATIOS``), put in seconds by the first pass it
  sees. A speed-up estimated on it is a guess and says so (``CostCurve.source``).
- **Named device curves** (``engine/curves/*.json``, shipped with the package): what a pass
  costs on other hardware, for planning and benchmarks (``--cost-curve NAME|FILE``). A FILE
  is a JSON object mapping n to seconds per pass, ``{"1": 0.0084, "2": 0.0130, ...}``.
- **Online**, each pass's measured time rescales the curve (an exponential average of
  observed / predicted, per length), so load on the machine and a prior's wrong shape are
  followed. A named curve is planned on as it is: its seconds are another machine's.
- **Pipelining**: plain decoding queues each one-token pass before the token of the one
  before is read, so the host's work overlaps the device's; a pass that waits for its input
  costs c(1), a pass so queued ``pipelined`` x c(1) (measured beside the curve,
  ``pace_steps``: 0.85 on an H200 with the embedded model in float16; 0.98-0.999 on this
  2-core CPU in float32, where a queued pass saves little). The schedule queues the pass after
  one that sends nothing that way while doing so has gained
  (``schedule.PassSchedule.queues_next_blind``).
- **Context**: a curve is timed after one context; ``context_scale`` (where measured:
  ``engine.policy.context_scale``) gives c(n) after others as a share of it, and a replay
  prices each pass at its own (``at_context``). The policy plans on the curve as timed.
- **Tree passes** (several draft rows in one pass, ``engine.loop.tree``) cost c(n) plus
  ``tree_extra`` seconds: what the per-token rotary positions and the tree's attention mask
  cost where they take other kernels than a chain's. Measured, nothing on this CPU nor on an
  H100 or H200 with cuDNN's attention off (the engine's setting; with it on, 0.8-2.2 ms at a
  512-token context). A named curve states it (``tree_extra_s``); on this machine it is
  learned from the tree passes timed.
"""

from __future__ import annotations

import bisect
import json
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path

from .. import _blas
from ..errors import EngineError
from ..paths import cache_dir
from ..stats import GUESS_CURVE
from ..untrusted import read_regular_file, set_aside, write_atomic
from .context_scale import ContextScale

log = logging.getLogger(__name__)

# 10, 17 and 33: where GPU kernels for a few rows hand over to tiled ones (MLX on Apple
# GPUs: its small-batch quantized kernel up to 10-16 rows, a tile of 32 rows after that, public
# measurements in engine/curves/apple-*.json), so a step there is measured, not interpolated
COST_LENGTHS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 17, 24, 32, 33, 48, 64, 96)
COST_VERSION = 1
MAX_COST_FILE_BYTES = 1 << 20  # a curve file is a few hundred bytes
CURVE_NOISE = 0.03  # sd of a figure in a noisy copy; runs of a measurement differ by 5-14%
MAX_SEED_DIGITS = 9  # NAME~SEED: a longer seed is not one
# how far each timed pass moves the curve's scale (and a length's own) toward what it took,
# about the last 10 passes: never measured; a replay cannot (its passes cost the curve exactly)
SCALE_RATE = 0.1
LOCAL_PRIOR = 5.0  # observations at one length before its own scale outweighs the global one
# the most observations a length's own scale counts for (so at most 20 / 25 of its cost): not
# measured, for the same reason as SCALE_RATE
LOCAL_WEIGHT_CAP = 20
# c(n) / c(1) before a model's curve was measured here: about the embedded model's on this
# project's 2-core x86 CPU with OpenBLAS alone (the committed report's c(3)..c(48), over the
# c(1) = 48.5 ms and c(2) = 59 ms measured without the one-row library): steeper than an
# H100's, flatter at 2 tokens than what public measurements give for an M1/M2 Mac's GPU. A
# guess only plans clear wins (``adaptive.GUESS_MARGIN``) and each pass timed corrects it.
PRIOR_RATIOS = {1: 1.0, 2: 1.2, 4: 1.5, 8: 1.8, 16: 2.1, 32: 3.2, 64: 5.5, 96: 8.0}
CURVES_DIR = Path(__file__).resolve().parents[1] / "curves"
# a verify pass computes logits at every position, a prompt chunk does not: the embedded
# model's output layer is 21% of its weights, so a token verified costs about 1.3 read
OUTPUT_ALLOWANCE = 1.3


class CostCurve:
    """Piecewise-linear c(n) through measured points, corrected online.

    Timing noise only ever adds time, so the measured points are made non-decreasing by
    taking, for each n, the least time measured at n or any longer pass. Online, every
    pass's observed / predicted ratio feeds a global scale and a per-length scale; a
    length's own scale counts more as its observations accumulate.
    """

    def __init__(
        self,
        points: dict[int, float],
        measured: bool = True,
        source: str = "measured",
        fixed: bool = False,
        tree_extra: float = 0.0,
        pipelined: float | None = None,
        context_scale: ContextScale | None = None,
    ):
        self.tree_extra = tree_extra  # seconds a tree pass costs beyond c(its node count)
        # c(n) after other contexts than the one measured, as a share of it (None: not
        # measured, every pass priced at the measured context)
        self.context_scale = context_scale
        # a token's time when each one-token pass is queued before the token of the one
        # before is read (plain decoding's pipelining), as a share of c(1), a pass waited
        # for; None: not measured (``pace_steps``)
        self.pipelined = pipelined
        self.measured = measured  # False: a prior shape in relative units
        self.anchored = measured  # seconds, not relative units (a prior: after its first pass)
        self.source = source  # what an estimate made on this curve names ("measured", a device)
        self.fixed = fixed  # another device's seconds: passes timed here do not rescale it
        self.lengths = sorted(points)
        seconds = [points[n] for n in self.lengths]
        for i in range(len(seconds) - 2, -1, -1):
            seconds[i] = min(seconds[i], seconds[i + 1])
        self.seconds = seconds
        self._base: dict[float, float] = {}  # base(n) of ``seconds`` as they are
        self.scale = 1.0
        self.local: dict[int, list[float]] = {}  # n -> [ratio average, observations]
        self.spans: dict[int, float] = {}  # a guess: prompt chunks of n tokens, least seconds
        self.shape = list(seconds)  # a guess: the prior's relative shape
        self.one_token: float | None = None  # a guess: the least one-token pass seen

    def base(self, n: float) -> float:
        known = self._base.get(n)  # the policy asks for hundreds of lengths a pass
        if known is None:
            known = self._base[n] = self._interpolated(n)
        return known

    def queued_base(self) -> float:
        """A one-token pass queued before the last token is read, plain decoding's token:
        ``base(1)`` x the pipelined share (whole where it is not measured)."""
        return self.base(1) * (self.pipelined or 1.0)

    def context_share(self, n: float, context: float) -> float:
        """What an n-token pass after ``context`` tokens costs as a share of one after the
        context the curve was timed at (``context_scale``; 1 where none was measured)."""
        scale = self.context_scale
        return scale(n, context) if scale is not None else 1.0

    def at_context(self, n: float, context: float) -> float:
        """``base(n)`` after ``context`` tokens of context."""
        return self.base(n) * self.context_share(n, context)

    def _interpolated(self, n: float) -> float:
        xs, ys = self.lengths, self.seconds
        if n <= xs[0]:
            return ys[0]
        i = bisect.bisect_left(xs, n)
        if i < len(xs):
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

    def tree_cost(self, n: float) -> float:
        """A tree pass over n nodes (root included)."""
        return self(n) + max(self.tree_extra, 0.0)

    @property
    def guess(self) -> bool:
        """Whether this is the prior shape, not a curve measured for the model."""
        return not self.measured and not self.fixed

    def observe_span(self, n: int, seconds: float) -> None:
        """A guess learns from the prompt's chunks too: reading n tokens in one pass is what
        verifying n tokens costs on this model and machine, less the output layer. A model
        whose passes cost n times a one-token pass (4-bit on MLX's CPU backend) is so found
        steep before its first draft, not after a slow first answer."""
        if self.guess and n > 1 and seconds > 0:
            self.spans[n] = min(seconds, self.spans.get(n, seconds))
            if self.anchored:
                self._refit_guess()

    def _refit_guess(self) -> None:
        """A guess, in seconds, from the least one-token pass seen: once a prompt chunk was
        timed, the line from there whose slope is that chunk's time per token, plus
        ``OUTPUT_ALLOWANCE`` for the output layer a verify pass runs at every position and a
        prompt chunk does not (evidence from this model on this machine); before that, the
        prior's shape."""
        one = self.one_token
        self._base.clear()
        if self.spans:
            per_token = self.spans[max(self.spans)] / max(self.spans)
            self.seconds = [one + OUTPUT_ALLOWANCE * per_token * (n - 1) for n in self.lengths]
        else:
            self.seconds = [ratio / self.shape[0] * one for ratio in self.shape]

    def observe(self, n: int, seconds: float) -> None:
        if self.fixed or seconds <= 0:
            return
        if self.guess and (n == 1 or not self.anchored):
            # c(1) is the least one-token pass seen, so a burst of load is not taken for the
            # model's speed (before anchoring, self.seconds is the shape in relative units)
            one = seconds if n == 1 else seconds * self.base(1) / self.base(n)
            self.one_token = min(one, self.one_token or one)
            self.anchored = True
            self._refit_guess()
            return
        predicted = self.base(n)
        if predicted > 0 and seconds > 0:
            ratio = min(max(seconds / predicted, 0.2), 5.0)
            if not self.guess:  # a guess keeps c(1) its least; longer passes learn per length
                self.scale += SCALE_RATE * (ratio - self.scale)
            local = self.local.setdefault(int(n), [ratio, 0])
            local[0] += SCALE_RATE * (ratio - local[0])
            local[1] += 1

    def observe_tree(self, n: int, seconds: float) -> None:
        """A tree pass of n nodes took ``seconds``: what it cost beyond c(n) is the extra."""
        if not self.fixed and seconds > 0 and self.anchored:
            self.tree_extra += SCALE_RATE * (seconds - self(n) - self.tree_extra)

    def to_dict(self) -> dict:
        return {str(n): s for n, s in zip(self.lengths, self.seconds)}


MEASURE_CONTEXT = 512
# A pass of n tokens costing this share of what plain decoding pays for n tokens or more: no
# draft it sends is worth its risk, even if all of it is kept. On the shipped curves (c(n) over
# n c(1) at their pipelined share, n = 2-64) cpu-epyc-2core-135m-4bit is 0.97 or more at every
# n, every other curve 0.73 or less at some n of 2-4: any bound between sorts them alike
HOPELESS = 0.9


def costs_its_length(cost, lengths, pipelined: float | None = None) -> bool:
    """Whether a pass of each of ``lengths`` tokens costs (``cost(n)``, seconds) at least
    ``HOPELESS`` of what plain decoding pays for as many tokens: n one-token passes, each
    ``pipelined`` of c(1) where it queues them (``CostCurve.pipelined``)."""
    one = cost(1) * (pipelined or 1.0)
    return all(cost(n) >= HOPELESS * n * one for n in lengths)


def cost_path(model_key: str) -> Path:
    # one- and two-row products as sgemv (engine/_blas.py) change c(1) and c(2): their own curve
    products = "-rowgemv" if _blas.row_gemv else ""
    return cache_dir() / "verify-cost" / f"{model_key}{products}-v{COST_VERSION}.json"


def prior_cost_curve() -> CostCurve:
    return CostCurve(PRIOR_RATIOS, measured=False, source=GUESS_CURVE)


def timing_steps(target, lengths=COST_LENGTHS, repeats: int = 3, tokens=None, warm=True):
    """Time target passes of each length at the cache's current context, one pass per step.

    A generator: each step runs one pass (as the loop does: forward, then argmax of every
    row), undoes it in the cache and yields ``(done, total, samples)`` with ``samples[n]``
    the seconds measured so far at n. Where ``warm``, every shape is run once untimed first
    (a shape this process has run needs no warming); then lengths are visited round-robin
    ``repeats`` times, rotated each round, so a burst of load elsewhere on the machine
    inflates one sample rather than one length. ``tokens``: the
    pass's input (default zeros: the cost does not depend on which tokens). Each pass is
    undone by restoring a checkpoint, so recurrent state is put back as well.
    """
    import mlx.core as mx

    lengths = list(lengths)
    tokens = list(tokens) if tokens is not None else [0] * max(lengths)
    start = target.checkpoint()
    samples: dict[int, list[float]] = {n: [] for n in lengths}
    total = (repeats + warm) * len(lengths)
    done = 0
    for rep in range(-1 if warm else 0, repeats):
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


PROBED_LENGTHS = 4  # lengths timed first, together


def measurement_step_count(context: int, lengths=COST_LENGTHS, repeats: int = 3) -> int:
    """The steps ``measurement_steps`` takes at most: the context's chunks, then every length
    timed (it stops sooner on a curve that costs its length)."""
    return -(-context // max(lengths)) + (repeats + 1) * len(lengths)


def measurement_steps(
    target, context: int, lengths=COST_LENGTHS, repeats: int = 3, pipelined: float | None = None
):
    """``timing_steps`` after ``context`` tokens of context are read into ``target``'s cache,
    all in short steps: the context goes in chunks no longer than the longest timed pass, so
    no step takes longer than a timed pass. Lengths up to ``PROBED_LENGTHS`` are timed
    first, together; then each longer one in turn, up to the first that costs its length
    (``costs_its_length``, plain decoding's pace ``pipelined``: 4-bit on MLX's CPU backend,
    where timing them all took minutes): drafting cannot pay there, and the curve goes on at
    the slope of the last two, about c(1) a token. Yields ``samples`` as ``timing_steps``
    gives them (empty while the context is read), at most ``measurement_step_count`` times."""
    chunk = max(lengths)
    for start in range(0, context, chunk):
        target.prefill([0] * min(chunk, context - start))
        yield {}
    groups = [[n for n in lengths if n <= PROBED_LENGTHS]]
    groups += [[n] for n in lengths if n > PROBED_LENGTHS]
    samples: dict[int, list[float]] = {}
    for group in groups:
        before = samples
        for _, _, timed in timing_steps(target, group, repeats):
            samples = {**before, **timed}
            yield samples
        least = {n: min(times) for n, times in samples.items()}
        if costs_its_length(least.__getitem__, group, pipelined):
            return


PACE_TOKENS = 8  # one-token passes a step of ``pace_steps`` runs: a step stays short
PACE_ROUNDS = 3


def pace_steps(target, tokens: int = PACE_TOKENS, rounds: int = PACE_ROUNDS):
    """A token's time two ways over ``tokens`` one-token passes at the cache's context: each
    pass waited for before the next is built (c(1)), and each queued before the last one's
    token is read (plain decoding's pipelining). A generator of short steps, one run a step,
    the two ways interleaved after a run of each untimed; each run is undone in the cache.
    Its value (``StopIteration.value``): the pipelined time as a share of the waited one (the
    least run of each way), or None where ``target`` cannot queue a pass so."""
    import mlx.core as mx

    if not getattr(target, "pipelines", True):
        return None
    start = target.checkpoint()
    least = {"waited": float("inf"), "pipelined": float("inf")}

    def step(token):
        return mx.argmax(target.forward(token), axis=-1)

    for round_ in range(-1, rounds):
        for way in ("waited", "pipelined")[:: 1 if round_ % 2 else -1]:
            began = time.perf_counter()
            token = mx.array([0], dtype=mx.uint32)
            if way == "waited":
                for _ in range(tokens):
                    token = mx.array(step(token).tolist(), dtype=mx.uint32)
            else:
                pending = step(token)
                mx.async_eval(pending)
                for made in range(1, tokens + 1):
                    following = step(pending) if made < tokens else None
                    if following is not None:
                        mx.async_eval(following)
                    pending.item()
                    pending = following
            elapsed = time.perf_counter() - began
            target.restore(start)
            if round_ >= 0:
                least[way] = min(least[way], elapsed)
            yield
    return least["pipelined"] / least["waited"]


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
        if not (
            isinstance(length, str) and length.isdigit() and 1 <= int(length) <= MAX_COST_LENGTH
        ):
            raise ValueError(f"length {length!r} is not an integer from 1 to {MAX_COST_LENGTH}")
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            # fails for NaN and infinities too (math.isfinite would overflow on 10**400)
            or not 0 < value <= MAX_PASS_SECONDS
        ):
            raise ValueError(
                f"time {value!r} for length {length} is not a positive number of seconds"
            )
        points[int(length)] = float(value)
    if 1 not in points:
        raise ValueError("no timing for a one-token pass")
    slowest = 0.0
    for length in sorted(points):
        if points[length] * SLOWER_MARGIN < slowest:
            raise ValueError(f"a {length}-token pass is timed far faster than a shorter one")
        slowest = max(slowest, points[length])
    return points


def validated_pipelined(data) -> float | None:
    """A curve file's ``pipelined_share`` (absent: None), or ValueError."""
    value = data.get("pipelined_share") if isinstance(data, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 2:
        raise ValueError(f"pipelined_share {value!r} is not a share between 0 and 2")
    return float(value)


def load_cost_curve(model_key: str) -> CostCurve | None:
    """The cached curve, or None: missing, or bad (then kept aside, said once, re-measured)."""
    path = cost_path(model_key)
    if not path.exists():
        return None
    try:
        data = json.loads(read_regular_file(path, MAX_COST_FILE_BYTES).decode("utf-8"))
        return CostCurve(validated_cost_points(data), pipelined=validated_pipelined(data))
    except (OSError, ValueError, RecursionError) as error:
        set_aside(
            path, "verify-cost file", error, "this machine's verify speed will be measured again"
        )
        return None


def save_cost_curve(model_key: str, curve: CostCurve) -> None:
    path = cost_path(model_key)
    try:
        data = {"version": COST_VERSION, "seconds": curve.to_dict()}
        if curve.pipelined is not None:
            data["pipelined_share"] = curve.pipelined
        write_atomic(path, json.dumps(data))
    except OSError as error:
        log.warning("Could not save the verify-cost curve %s: %s", path, error)


@dataclass(frozen=True)
class NamedCurve:
    """A device curve to plan with: its name, where its numbers come from, c(n) in seconds."""

    name: str
    source: str
    seconds: dict[int, float]
    tree_extra_s: float = 0.0  # what a tree pass costs beyond c(n)
    pipelined_share: float | None = None  # ``CostCurve.pipelined``
    context_scale: ContextScale | None = None  # ``CostCurve.context_scale``

    def curve(self) -> "CostCurve":
        return CostCurve(
            self.seconds,
            source=f"{self.name} curve",
            fixed=True,
            tree_extra=self.tree_extra_s,
            pipelined=self.pipelined_share,
            context_scale=self.context_scale,
        )

    def jittered(self, seed: int, noise: float) -> "NamedCurve":
        """A copy with each figure scaled by 1 + N(0, ``noise``): the same curve as another
        run of its measurement might have given it."""
        rng = random.Random(seed)
        seconds = {n: s * max(1 + rng.gauss(0, noise), 0.5) for n, s in self.seconds.items()}
        source = f"A noisy copy (seed {seed}, sd {noise:.0%} per figure) of {self.name}: "
        return NamedCurve(
            f"{self.name}~{seed}",
            source + self.source,
            seconds,
            self.tree_extra_s,
            self.pipelined_share,
            self.context_scale,
        )


def _context_scale(data) -> ContextScale | None:
    scale = data.get("context_scale") if isinstance(data, dict) else None
    return None if scale is None else ContextScale.from_dict(scale)


def _points(seconds) -> dict[int, float]:
    return validated_cost_points({"version": COST_VERSION, "seconds": seconds})


def _tree_extra(data) -> float:
    value = data.get("tree_extra_s", 0.0) if isinstance(data, dict) else 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("tree_extra_s is not a number of seconds")
    if not 0 <= value <= MAX_PASS_SECONDS:
        raise ValueError(f"tree_extra_s {value!r} is not between 0 and {MAX_PASS_SECONDS:g} s")
    return float(value)


def named_curves() -> dict[str, NamedCurve]:
    """The device curves shipped with the package, by name."""
    curves = {}
    for path in sorted(CURVES_DIR.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        curves[path.stem] = NamedCurve(
            path.stem,
            data["source"],
            _points(data["seconds"]),
            _tree_extra(data),
            validated_pipelined(data),
            _context_scale(data),
        )
    return curves


def curve_from_spec(spec: str) -> NamedCurve:
    """``--cost-curve NAME|FILE``: a shipped curve by name, or a JSON file mapping n to
    seconds per pass (or holding that map under ``seconds``); EngineError if neither.
    ``NAME~SEED`` (SEED a number): a noisy copy of that curve, as another run of its
    measurement might have given it (``NamedCurve.jittered``, ``CURVE_NOISE``)."""
    curves = named_curves()
    if spec in curves:
        return curves[spec]
    name, _, seed = spec.partition("~")
    if name in curves and seed.isdecimal() and len(seed) <= MAX_SEED_DIGITS:
        return curves[name].jittered(int(seed), CURVE_NOISE)
    path = Path(spec).expanduser()
    try:
        found = path.exists()
    except OSError:  # a name no file can have (too long, say) is no file
        found = False
    if not found:
        raise EngineError(
            f"No cost curve named {spec!r} and no such file. Named curves: "
            f"{', '.join(curves)} (NAME~SEED: a noisy copy); or give a JSON file such as "
            '{"1": 0.0084, "2": 0.0130, "4": 0.0141}.'
        )
    try:
        data = json.loads(read_regular_file(path, MAX_COST_FILE_BYTES))
        seconds = data.get("seconds", data) if isinstance(data, dict) else data
        if isinstance(seconds, dict) and "median_s" in seconds:  # a report's verify_cost
            seconds = seconds["median_s"]
        points, tree_extra = _points(seconds), _tree_extra(data)
        pipelined, scale = validated_pipelined(data), _context_scale(data)
    except (OSError, ValueError, RecursionError) as error:
        raise EngineError(
            f"The cost curve {path} cannot be used ({error}). It must be a JSON "
            'object mapping n to seconds per pass, e.g. {"1": 0.0084, "2": 0.0130}.'
        ) from None
    return NamedCurve(path.name, f"file {path}", points, tree_extra, pipelined, scale)
