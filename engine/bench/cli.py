"""``python -m engine bench``: command-line arguments to a suite run (see ``suite.py``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from ..errors import EngineError
from .plots import MissingSection
from .report import render
from .suite import QUICK_TASKS, BenchConfig, Suite
from .workloads import TASK_ORDER

DEVICES_FILE = "devices.json"  # beside results.json: the device table's figures, if saved
OPTIONS = {  # BenchConfig field: (type, help); a list is comma-separated
    "drafters": (list, "drafters, or `all` (default: the default drafter and a few others)"),
    "tasks": (list, "tasks (default: all): " + ", ".join(TASK_ORDER)),
    "split": (str, "prompt set: `check` (the report's, default) or `tuning`"),
    "conversations": (
        str,
        "a conversations file (python -m engine.bench.conversations) instead of the suite's "
        "prompts: each chat's user turns, the first --prompts-per-task chats of each category",
    ),
    "per_task": (int, "chats per task (default 2)"),
    "max_tokens": (int, "most new tokens per answer (default 512; quick: 128)"),
    "repeats": (int, "interleaved rounds per chat and config (default 3; quick: 1)"),
    "draft_count": (int, "draft tokens per pass at most (default: the engine's)"),
    "ngram_order": (int, "max n-gram order (default: the engine's)"),
    "ngram_min": (int, "min n-gram order (default: the engine's)"),
    "verify_repeats": (int, "repeats per n for c(n) at the start (default 7; quick: 5)"),
    "verify_between": (int, "c(n) repeats after each chat, n its passes used (default 2)"),
    "model": (str, "mlx-lm model folder (default: the embedded SmolLM2-135M-Instruct)"),
}


def add_bench_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="4 chats, 1 round, 128 tokens")
    parser.add_argument("--out", help="report folder (default: bench-report)")
    parser.add_argument(
        "--render",
        metavar="RESULTS",
        help="report.md and its plots again from a results.json (and devices.json beside it)",
    )
    for name, (kind, text) in OPTIONS.items():
        flag = "--prompts-per-task" if name == "per_task" else "--" + name.replace("_", "-")
        choices = ("check", "tuning") if name == "split" else None
        parser.add_argument(
            flag, dest=name, type=kind if kind is int else str, choices=choices, help=text
        )
    parser.add_argument("--no-oracle", action="store_true", help="skip the oracle (the limit)")
    parser.add_argument("--no-mlx-lm", action="store_true", help="skip mlx-lm's plain decoding")
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
    cfg.mlx_lm = not args.no_mlx_lm
    cfg.verify_ns = sorted(set(cfg.verify_ns) | {cfg.draft_count + 1})
    given = sys.argv[1:] if sys.argv[1:2] == ["bench"] else ["bench", *getattr(args, "_argv", [])]
    cfg.command = "python -m engine " + shlex.join(given)
    return cfg


def _read_json(source: Path, what: str) -> dict:
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise EngineError(f"Cannot read the {what} {source}: {error}") from None
    if not isinstance(data, dict):
        raise EngineError(f"{source} is not {what} (a JSON object was expected).")
    return data


def render_results(path: str, out: str | None) -> int:
    """Render a results.json (a committed run) into report.md and its plots; a
    ``devices.json`` beside it (``python -m engine.bench.devices --json``) adds the device
    table's plot."""
    source = Path(path)
    results = _read_json(source, "benchmark results")
    beside = source.parent / DEVICES_FILE
    devices = _read_json(beside, "device table") if beside.is_file() else None
    folder = Path(out) if out else source.parent
    try:
        render(results, folder, devices)
    except MissingSection as error:
        raise EngineError(
            f"{source} {error}: run `python -m engine bench` again to write it."
        ) from None
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        what = "a results.json written by `python -m engine bench`"
        if devices is not None:
            what += f", with a {DEVICES_FILE} by `python -m engine.bench.devices --json` beside it"
        raise EngineError(f"{source} is not {what} ({type(error).__name__}: {error}).") from None
    if devices is None:
        print(f"no {beside}: the device table's plot is left out", file=sys.stderr)
    print(f"report: {folder / 'report.md'}", file=sys.stderr)
    return 0


def run_bench(args) -> int:
    if args.render:
        return render_results(args.render, args.out)
    return Suite(config_from_args(args)).run()
