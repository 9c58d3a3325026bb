"""One adaptive-policy constant swept by replay: the default's predicted speed-up (one process,
drafter time uncharged, each curve's pipelined share and tree extra, as the device table) per
value, curve and conversations file, and each value's geometric mean against the first.

``python -m engine.bench.sweep DECAY 0.85,0.7,0.95 --conversations F [F ...] [--curves A,B]``
(the first value is the one compared against; fit on the tuning files, judge on dev).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from ..errors import EngineError
from ..policy import adaptive
from ..policy.verify_cost import named_curves
from ..settings import DraftSettings
from .tune import conversation_answers, geomean, predict

CURVES = ",".join(  # the Macs people own, a flat GPU curve and this CPU
    (
        "apple-m2pro-7b-4bit-estimate",
        "apple-m4pro-8b-4bit-estimate",
        "apple-m5max-70b-4bit",
        "h100-7b-bf16",
        "cpu-epyc-2core-135m-f32",
    )
)


def sweep(name: str, values: Sequence[float], named: Sequence, chats: dict, key: str, eos: int):
    """{(value, curve name): predicted speed-up over ``chats``} with ``adaptive.<name>`` set
    to each value in turn (put back after)."""
    kept = getattr(adaptive, name)
    default = DraftSettings().validated()
    plan = {
        "drafter_name": default.drafter,
        "draft_count": default.draft_count,
        "adaptive": default.adaptive,
        "policy": default.policy,
    }
    figures = {}
    try:
        for value in values:
            setattr(adaptive, name, type(kept)(value))
            for curve in named:
                per_task = predict(
                    chats, key, eos, curve.seconds, plan,
                    tree_extra=curve.tree_extra_s, pipelined=curve.pipelined_share,
                )  # fmt: skip
                figures[value, curve.name] = geomean(per_task.values())
    finally:
        setattr(adaptive, name, kept)
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.sweep", description=__doc__)
    parser.add_argument("name", help="a numeric constant of engine/policy/adaptive.py")
    parser.add_argument("values", help="comma-separated; the first is the baseline")
    parser.add_argument("--conversations", nargs="+", required=True, metavar="FILE")
    parser.add_argument("--curves", default=CURVES, help="comma-separated curve names")
    args = parser.parse_args(argv)
    if not isinstance(getattr(adaptive, args.name, None), (int, float)):
        raise EngineError(f"{args.name} is not a numeric constant of engine/policy/adaptive.py")
    values = [float(v) for v in args.values.split(",")]
    curves = named_curves()
    unknown = [c for c in args.curves.split(",") if c not in curves]
    if unknown:
        raise EngineError(f"no curve named {', '.join(unknown)}")
    named = [curves[c] for c in args.curves.split(",")]
    ratios: dict[float, list[float]] = {v: [] for v in values}
    for path in args.conversations:
        chats, key, eos = conversation_answers([path])
        figures = sweep(args.name, values, named, chats, key, eos)
        for value in values:
            cells = [f"{figures[value, c.name]:.4f}" for c in named]
            print(f"{path}  {args.name}={value:g}  " + "  ".join(cells), flush=True)
            ratios[value] += [figures[value, c.name] / figures[values[0], c.name] for c in named]
    for value, each in ratios.items():
        mean = math.exp(sum(map(math.log, each)) / len(each))
        print(f"{args.name}={value:g}: {mean:.4f}x the first ({min(each):.3f}-{max(each):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
