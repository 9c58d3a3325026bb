"""``python -m engine bench``: command-line arguments to a suite run (see ``suite.py``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from ..errors import EngineError
from .report import render
from .suite import QUICK_TASKS, BenchConfig, Suite
from .workloads import TASK_ORDER

OPTIONS = {  # BenchConfig field: (type, help); a list is comma-separated
    "drafters": (list, "drafters, or `all` (default: the default drafter and a few others)"),
    "tasks": (list, "tasks (default: all): " + ", ".join(TASK_ORDER)),
    "split": (str, "prompt set: `check` (the report's, default) or `tuning`"),
    "per_task": (int, "chats per task (default 2)"),
    "max_tokens": (int, "most new tokens per answer (default 512; quick: 128)"),
    "repeats": (int, "interleaved rounds per chat and config (default 3; quick: 1)"),
    "draft_count": (int, "draft tokens per pass at most (default: the engine's)"),
    "ngram_order": (int, "max n-gram order (default: the engine's)"),
    "ngram_min": (int, "min n-gram order (default: the engine's)"),
    "verify_repeats": (int, "repeats per n for c(n) (default 7; quick: 5)"),
    "model": (str, "mlx-lm model folder (default: the embedded SmolLM2-135M-Instruct)"),
}


def add_bench_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="4 chats, 1 round, 128 tokens")
    parser.add_argument("--out", help="report folder (default: bench-report)")
    parser.add_argument("--render", metavar="RESULTS", help="report.md again from a results.json")
    for name, (kind, text) in OPTIONS.items():
        flag = "--prompts-per-task" if name == "per_task" else "--" + name.replace("_", "-")
        choices = ("check", "tuning") if name == "split" else None
        parser.add_argument(
            flag, dest=name, type=kind if kind is int else str, choices=choices, help=text
        )
    parser.add_argument("--no-oracle", action="store_true", help="skip the oracle (the limit)")
    parser.add_argument("--no-adaptive", action="store_true", help="always draft the draft count")


def config_from_args(args) -> BenchConfig:
    cfg = BenchConfig(out=Path(args.out or "bench-report"), quick=args.quick)
    if args.quick:
        cfg.tasks, cfg.per_task, cfg.max_tokens, cfg.repeats = list(QUICK_TASKS), 1, 128, 1
        cfg.verify_repeats, cfg.verify_ns = 5, [1, 2, 3, 4, 5, 8, 12, 16, 17]
    for name, (kind, _) in OPTIONS.items():
        value = getattr(args, name)
        if value is not None and kind is list:
            value = [v.strip() for v in value.split(",") if v.strip()]
        if value is not None:
            setattr(cfg, name, value)
    cfg.oracle, cfg.adaptive = not args.no_oracle, cfg.adaptive and not args.no_adaptive
    cfg.verify_ns = sorted(set(cfg.verify_ns) | {cfg.draft_count + 1})
    given = sys.argv[1:] if sys.argv[1:2] == ["bench"] else ["bench", *getattr(args, "_argv", [])]
    cfg.command = "python -m engine " + shlex.join(given)
    return cfg


def render_results(path: str, out: str | None) -> int:
    """Render a results.json (a committed run) into report.md."""
    source = Path(path)
    try:
        results = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise EngineError(f"Cannot read the benchmark results {source}: {error}") from None
    folder = Path(out) if out else source.parent
    try:
        render(results, folder)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise EngineError(
            f"{source} is not a results.json written by `python -m engine bench` "
            f"({type(error).__name__}: {error})."
        ) from None
    print(f"report: {folder / 'report.md'}", file=sys.stderr)
    return 0


def run_bench(args) -> int:
    if args.render:
        return render_results(args.render, args.out)
    return Suite(config_from_args(args)).run()
