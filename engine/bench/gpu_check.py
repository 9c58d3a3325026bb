"""The check to run on a lent accelerator: the default against plain decoding, on real chat,
measured beside predicted, in a few minutes.

``python -m engine.bench.gpu_check [--model M] [--conversations FILE] [--max-tokens N]
[--repeats R] [--out DIR]`` runs the benchmark suite (``suite.Suite``) with plain decoding and
the default drafter only: it measures this device's verify cost and pipelined pace (every pass
length the default sends runs there first, so a GPU's kernels and CUDA graphs for those shapes
are built before anything is timed), warms each config up on a short answer, then answers each
conversation's user turns in interleaved rounds (plain greedy decoding the reference every
answer must equal), and prints per category the measured speed-up, the replay's prediction for
the same answers on the curve measured there, and measured / predicted (also in
``DIR/report.md`` and ``DIR/results.json``).

The default conversations are the committed dev sample of real chat (31 conversations, 51 user
turns, from ShareGPT, MT-bench and HumanEval's dev split, ``resources/readme/benchmarks/
gpu-dev``). At 128 tokens an answer, two rounds of two configs and the reference make 255
answers: about 4 minutes of decoding on an H200 with the embedded model at the 5-6 ms a pass
that ``results.md`` reports for the H200 (an estimate, not yet timed there), within the 8
minutes a lent device's call allows.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..drafters import DEFAULT_DRAFTER
from ..errors import EngineError
from .runner import BenchConfig, load_averages, log
from .suite import Suite

DEV_SAMPLE = Path("resources/readme/benchmarks/gpu-dev/dev-sample.jsonl")
# every pass length the default's policy sends on a flat curve at its draft count (trees
# of up to 64 nodes), each timed before the answers, so its kernels are built
WARM_LENGTHS = [1, 2, 3, 4, 5, 6, 8, 9, 12, 16, 17, 24, 32, 33, 48, 64, 65]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.gpu_check", description=__doc__)
    parser.add_argument("--model", help="model folder or id (default: the embedded one)")
    parser.add_argument(
        "--conversations",
        default=str(DEV_SAMPLE),
        help="a conversations file (default: %(default)s)",
    )
    parser.add_argument("--max-tokens", type=int, default=128, help="per answer (default 128)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds (default 2)")
    parser.add_argument(
        "--per-category", type=int, default=100, help="conversations of each category"
    )
    parser.add_argument("--out", default="gpu-check", help="report folder (default gpu-check)")
    return parser


def config(args, argv: list[str]) -> BenchConfig:
    return BenchConfig(
        out=Path(args.out),
        model=args.model,
        drafters=[DEFAULT_DRAFTER],
        max_tokens=args.max_tokens,
        repeats=args.repeats,
        conversations=args.conversations,
        per_task=args.per_category,
        verify_ns=list(WARM_LENGTHS),
        oracle=False,
        mlx_lm=False,
        command="python -m engine.bench.gpu_check " + shlex.join(argv),
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    loads = load_averages()
    log(f"load average at start: {', '.join(f'{x:.2f}' for x in loads) if loads else 'n/a'}")
    try:
        return Suite(config(args, argv)).run()
    except EngineError as error:
        log(f"error: {error}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
