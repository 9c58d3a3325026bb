"""What a pass costs at other contexts than the one its curve was measured at.

A verify curve c(n) is timed after one context (``verify_cost.MEASURE_CONTEXT`` tokens in the
service, the benchmark's prefix there). A pass reads the whole cache, so it costs more after
a longer context and less after a shorter one, and a long pass more so than a one-token one
(its attention grows with n x context). Measured on this project's 2-core AMD EPYC, the
embedded model in float32 (2026-12-02, medians of 2 runs of 5): a one-token pass 125 / 128 /
151 ms after 128 / 384 / 1,152 tokens of context, a 16-token pass 214 / 259 / 355 ms, a
48-token pass 370 / 508 / 702 ms. Neither a constant nor a line in the context fits both
ends, so the scale is a grid: c(n, context) / c(n) measured at a few lengths and contexts,
interpolated linearly in both and held at the grid's edges (never extrapolated).

Worked example: a grid measured at contexts (128, 384, 1152) and lengths (1, 16) with ratios
((0.98, 0.83), (1.0, 1.0), (1.18, 1.37)): a 16-token pass after 768 tokens of context costs
1.185 x c(16), halfway between 1.0 and 1.37; an 8-token pass after 64 tokens (held at 128)
costs 0.98 + 7/15 x (0.83 - 0.98) = 0.91 x c(8).

Pure Python but ``scale_steps``, which imports MLX inside, as ``verify_cost.timing_steps``
does.
"""

from __future__ import annotations

import bisect
import statistics
import time
from dataclasses import dataclass

# the grid the benchmark measures: contexts as shares of its curve's own (one third, the curve's,
# three times), lengths spanning the passes the policy sends (1 to 32 of them)
CONTEXT_SHARES = (1 / 3, 1.0, 3.0)
SCALE_LENGTHS = (1, 8, 32)
# rounds of the grid: the figures above are medians of 5; two such runs differed by 1-15% at
# one point of the grid, so the benchmark's scale is as noisy as its curve (CURVE_NOISE)
SCALE_REPEATS = 5
MAX_RATIO = 100.0  # a ratio beyond this is no measurement of one model's passes


def _between(points, x: float) -> tuple[int, int, float]:
    """Where ``x`` falls among sorted ``points``: (i, j, t) with x = points[i] + t x
    (points[j] - points[i]), held at the ends."""
    if x <= points[0]:
        return 0, 0, 0.0
    if x >= points[-1]:
        last = len(points) - 1
        return last, last, 0.0
    j = bisect.bisect_right(points, x)
    return j - 1, j, (x - points[j - 1]) / (points[j] - points[j - 1])


@dataclass(frozen=True)
class ContextScale:
    """c(n) after ``context`` tokens as a share of the curve's own c(n): ``ratios[i][j]``
    measured at ``contexts[i]`` and ``lengths[j]``; interpolated (module docstring)."""

    contexts: tuple[int, ...]
    lengths: tuple[int, ...]
    ratios: tuple[tuple[float, ...], ...]
    source: str = ""

    def __call__(self, n: float, context: float) -> float:
        i0, i1, s = _between(self.contexts, context)
        j0, j1, t = _between(self.lengths, n)

        def at(i: int) -> float:
            row = self.ratios[i]
            return row[j0] + t * (row[j1] - row[j0])

        return at(i0) + s * (at(i1) - at(i0))

    def to_dict(self) -> dict:
        return {
            "contexts": list(self.contexts),
            "lengths": list(self.lengths),
            "ratios": [list(row) for row in self.ratios],
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data) -> ContextScale:
        """A scale from JSON data; ValueError naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("context_scale is not an object")
        contexts, lengths, ratios = (data.get(k) for k in ("contexts", "lengths", "ratios"))
        for name, values in (("contexts", contexts), ("lengths", lengths)):
            if (
                not isinstance(values, list)
                or not 1 <= len(values) <= 16
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)
                or values != sorted(set(values))
            ):
                raise ValueError(f"context_scale {name} must be 1-16 rising positive integers")
        if not isinstance(ratios, list) or len(ratios) != len(contexts):
            raise ValueError("context_scale ratios must hold one row per context")
        for row in ratios:
            if not isinstance(row, list) or len(row) != len(lengths):
                raise ValueError("context_scale ratios must hold one ratio per length")
            for value in row:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError("context_scale ratios must be numbers")
                if not 0 < value <= MAX_RATIO:
                    raise ValueError(f"context_scale ratio {value!r} is not in (0, {MAX_RATIO:g}]")
        source = data.get("source", "")
        return cls(
            tuple(contexts),
            tuple(lengths),
            tuple(tuple(float(v) for v in row) for row in ratios),
            source if isinstance(source, str) else "",
        )


def scale_steps(
    targets: dict, reference: int, tokens, lengths=SCALE_LENGTHS, repeats=SCALE_REPEATS
):
    """Time passes of ``lengths`` on each of ``targets`` ({context: a Target whose cache holds
    that many tokens}), in ``repeats`` rounds after an untimed one, every context and length
    once a round (so a burst of load elsewhere inflates one sample, not one context), each
    pass undone. A generator of short steps (one pass each); its value: the ``ContextScale``
    of the medians against those at ``reference`` (one of the contexts)."""
    import mlx.core as mx

    contexts = sorted(targets)
    samples = {(c, n): [] for c in contexts for n in lengths}
    marks = {c: targets[c].checkpoint() for c in contexts}
    for round_ in range(-1, repeats):
        for context in contexts if round_ % 2 else contexts[::-1]:
            target = targets[context]
            for n in lengths:
                began = time.perf_counter()
                mx.argmax(target.forward(list(tokens[:n])), axis=-1).tolist()
                elapsed = time.perf_counter() - began
                target.restore(marks[context])
                if round_ >= 0:
                    samples[context, n].append(elapsed)
                yield
    median = {key: statistics.median(values) for key, values in samples.items()}
    ratios = tuple(
        tuple(round(median[c, n] / median[reference, n], 4) for n in lengths) for c in contexts
    )
    return ContextScale(tuple(contexts), tuple(lengths), ratios)
