"""``python -m engine bench``: command-line arguments to a suite run (see ``suite.py``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from ..errors import EngineError
from .report import render
from .suite import QUICK_TASKS, BenchConfig, Suite


def add_bench_arguments(parser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few prompts, one round, up to 128 tokens, no sweep, no peers' "
        "repeats (a few minutes on a laptop CPU)",
    )
    parser.add_argument(
        "--out",
        help="report folder (default: bench-report; with --render: the results file's folder)",
    )
    parser.add_argument(
        "--render",
        metavar="RESULTS_JSON",
        help="write report.md and plots again from a results.json, measuring nothing",
    )
    parser.add_argument(
        "--drafters",
        help="comma-separated drafters, or `all` (default: the "
        "engine's default drafter and a few others to compare)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        help="most new tokens per answer; answers end at "
        "end-of-answer first (default 512; quick: 128)",
    )
    parser.add_argument(
        "--repeats", type=int, help="interleaved rounds per chat and config (default 3; quick: 1)"
    )
    parser.add_argument(
        "--split",
        choices=("check", "tuning"),
        help="prompt set: `check` (the "
        "report's, default) or `tuning` (the one the defaults were tuned on)",
    )
    parser.add_argument(
        "--no-oracle",
        action="store_true",
        help="skip the oracle (a drafter handed the plain answer: the limit)",
    )
    parser.add_argument(
        "--model", help="mlx-lm model folder (default: the embedded SmolLM2-135M-Instruct)"
    )
    parser.add_argument(
        "--tasks",
        help="comma-separated tasks: code-edit, rag, structured, "
        "open-question, humaneval, mt-bench, novel",
    )
    parser.add_argument("--prompts-per-task", type=int, help="chats per task (default 2)")
    parser.add_argument(
        "--draft-count", type=int, help="draft tokens per pass (default: the engine's)"
    )
    parser.add_argument("--ngram-order", type=int, help="max n-gram order (default: the engine's)")
    parser.add_argument("--ngram-min", type=int, help="min n-gram order (default: the engine's)")
    parser.add_argument(
        "--no-peers", action="store_true", help="skip the Hugging Face and llama.cpp peers"
    )
    parser.add_argument(
        "--hf-prompts-per-task", type=int, help="chats per task for the peers (default 2)"
    )
    parser.add_argument("--hf-tasks", help="tasks the peers run (default: all the run's tasks)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the draft-count sweep")
    parser.add_argument("--sweep-counts", help="draft counts for the sweep (default 1,2,4,8,16)")
    parser.add_argument(
        "--verify-repeats", type=int, help="repeats per n for c(n) (default 7; quick: 3)"
    )
    parser.add_argument(
        "--no-adaptive",
        action="store_true",
        help="draft a fixed draft count every pass (default: the engine's adaptive setting)",
    )
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")


def config_from_args(args):
    def split(text):
        return [part.strip() for part in text.split(",") if part.strip()] if text else None

    cfg = BenchConfig(out=Path(args.out or "bench-report"), model=args.model, quick=args.quick)
    if args.quick:
        cfg.tasks, cfg.per_task, cfg.max_tokens, cfg.repeats = list(QUICK_TASKS), 1, 128, 1
        cfg.sweep, cfg.verify_repeats, cfg.mtbench_turns = False, 5, 1
        cfg.hf_prompts_per_task = 1
        cfg.verify_ns = [1, 2, 3, 4, 5, 8, 12, 16, 17]
    if args.drafters:
        cfg.drafters = split(args.drafters)
    if args.tasks:
        cfg.tasks = split(args.tasks)
    if args.hf_tasks:
        cfg.hf_tasks = split(args.hf_tasks)
    for name in (
        "max_tokens",
        "draft_count",
        "ngram_order",
        "ngram_min",
        "verify_repeats",
        "hf_prompts_per_task",
        "repeats",
        "split",
    ):
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    if args.prompts_per_task is not None:
        cfg.per_task = args.prompts_per_task
    if args.sweep_counts:
        cfg.sweep_counts = [int(x) for x in split(args.sweep_counts)]
    cfg.hf_peer = cfg.llama_peer = not args.no_peers
    cfg.oracle = not args.no_oracle
    cfg.sweep = cfg.sweep and not args.no_sweep
    cfg.plots = not args.no_plots
    if args.no_adaptive:
        cfg.adaptive = False
    cfg.command = (
        "python -m engine " + shlex.join(sys.argv[1:])
        if sys.argv[1:2] == ["bench"]
        else "python -m engine bench " + shlex.join(getattr(args, "_argv", []))
    )
    return cfg


def render_results(path: str, out: str | None, plots: bool) -> int:
    """Render a results.json (a committed run) into report.md and plots."""
    source = Path(path)
    try:
        results = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise EngineError(f"Cannot read the benchmark results {source}: {error}") from None
    folder = Path(out) if out else source.parent
    try:
        render(results, folder, plots=plots)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise EngineError(
            f"{source} is not a results.json written by `python -m engine bench` "
            f"({type(error).__name__}: {error})."
        ) from None
    print(f"report: {folder / 'report.md'}", file=sys.stderr)
    return 0


def run_bench(args) -> int:
    if args.render:
        return render_results(args.render, args.out, not args.no_plots)
    cfg = config_from_args(args)
    try:
        cfg.verify_ns = sorted(set(cfg.verify_ns) | {cfg.draft_count + 1})
    except TypeError:
        pass
    return Suite(cfg).run()
