"""Command line: ``python -m engine generate | drafters | replay | bench | serve``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import sys

from . import EngineError
from .command_line import add_generation_arguments, log, request_from_args, show_progress
from .events import DoneEvent, ErrorEvent, ModelEvent, PassEvent, ProgressEvent, TokenEvent
from .stats import summary_line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="answer one prompt")
    source = generate.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="the user's message (or the raw text with --raw)")
    source.add_argument("--prompt-file", help="read the prompt from this UTF-8 file")
    generate.add_argument(
        "--raw", action="store_true", help="send the prompt as is, no chat template"
    )
    generate.add_argument("--json", action="store_true", help="print one JSON object at the end")
    add_generation_arguments(generate)
    commands.add_parser("drafters", help="list the drafters")
    replay = commands.add_parser(
        "replay",
        help="answer once, then replay every drafter over "
        "the answer's own tokens (no model passes)",
    )
    from .runtime.replay import add_replay_arguments

    add_generation_arguments(replay)
    add_replay_arguments(replay)
    bench = commands.add_parser("bench", help="measure drafters against plain decoding")
    from .bench.cli import add_bench_arguments

    add_bench_arguments(bench)
    serve = commands.add_parser("serve", help="OpenAI-compatible HTTP server")
    add_generation_arguments(serve)
    from .server import add_serve_arguments

    add_serve_arguments(serve)
    return parser


def read_prompt_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as error:
        raise EngineError(f"Cannot read the prompt file: {error}") from None
    except UnicodeDecodeError as error:
        raise EngineError(
            f"The prompt file {path} is not UTF-8 text (byte 0x{error.object[error.start]:02x} "
            f"at offset {error.start}). Save it as UTF-8 and try again."
        ) from None


class _WarningLine(logging.Handler):
    """The engine's warnings (a bad file set aside, drafts dropped) as stderr lines."""

    def emit(self, record):
        log(f"warning: {record.getMessage()}")


async def measure_once(service, model) -> None:
    """Measure the model's verify cost on this machine where it never was (a few seconds,
    once; the engine keeps it): an answer on a curve not measured decodes plainly. Ctrl-C
    stops it, the answer already out."""
    async for event in service.measure(model):
        if isinstance(event, ProgressEvent):
            show_progress(event)
        elif isinstance(event, ErrorEvent):
            log(f"warning: could not measure the verify cost: {event.message}")


async def run_generate(args) -> int:
    from .runtime.service import EngineService

    prompt = read_prompt_file(args.prompt_file) if args.prompt_file else args.prompt
    # a chat id keeps the answer's session, so measuring the curve after it times passes at
    # the answer's context instead of reading MEASURE_CONTEXT tokens anew (on a 4-bit model
    # on this CPU, 51 of the 68 seconds the measurement took)
    request = dataclasses.replace(request_from_args(args, prompt, args.raw), chat_id="generate")
    service = EngineService(build_tables_inline=True)  # one answer: nobody else waits
    done = None
    try:
        async for event in service.generate(request):
            if isinstance(event, ProgressEvent):
                show_progress(event)
            elif isinstance(event, ModelEvent):
                log(
                    f"model: {event.name} ({event.path}; {event.details}); speculation: {event.speculation}"
                )
            elif isinstance(event, TokenEvent) and not args.json:
                print(event.text, end="", flush=True)
            elif isinstance(event, ErrorEvent):
                raise EngineError(event.message)
            elif isinstance(event, DoneEvent):
                done = event
            elif isinstance(event, PassEvent):
                pass
        print_answer(done, args.json)
        drafted = done.stats.get("drafter", "none") != "none"
        if drafted and args.adaptive and not args.cost_curve:  # the next answer plans on
            await measure_once(service, args.model)  # this machine's curve, not a guess
    finally:
        service.shutdown()
    return 0


def print_answer(done: DoneEvent, as_json: bool) -> None:
    """The answer's end: one JSON object on stdout, or a summary line on stderr."""
    stats = dict(done.stats)
    if as_json:
        print(
            json.dumps(
                {
                    "text": done.text,
                    "tokens": done.tokens,
                    "from_draft": done.from_draft,
                    "finish_reason": done.finish_reason,
                    "stats": stats,
                    "timing": done.timing,
                }
            ),
            flush=True,
        )
    else:
        print()
        log(
            f"[{done.finish_reason}] {summary_line(stats, done.timing)} · "
            f"speculation {stats['speculation']}"
        )


def main(argv=None) -> int:
    from .server import import_mlx_lm_keeping_open_file_limit

    import_mlx_lm_keeping_open_file_limit()  # before build_parser's imports reach mlx-lm
    args = build_parser().parse_args(argv)
    engine_log = logging.getLogger("engine")
    if not any(isinstance(handler, _WarningLine) for handler in engine_log.handlers):
        engine_log.addHandler(_WarningLine(logging.WARNING))
    try:
        if args.command == "drafters":
            from .drafters import DEFAULT_DRAFTER, DRAFTERS

            for name, cls in DRAFTERS.items():
                print(f"{name:16} {cls.summary}{'  (default)' if name == DEFAULT_DRAFTER else ''}")
            return 0
        if args.command == "replay":
            from .runtime.replay import run_replay

            return run_replay(args)
        if args.command == "bench":
            from .bench.cli import run_bench

            return run_bench(args)
        if args.command == "serve":
            from .server import run_serve

            return run_serve(args)
        return asyncio.run(run_generate(args))
    except EngineError as error:
        log(f"error: {error}")
        return 2
    except KeyboardInterrupt:
        log("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
