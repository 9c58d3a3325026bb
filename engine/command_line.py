"""Command-line pieces shared by ``python -m engine`` and ``python -m engine serve``:
the generation flags, the request they make, and stderr progress lines."""

from __future__ import annotations

import argparse
import sys

from .events import ProgressEvent
from .policy.verify_cost import curve_from_spec
from .settings import POLICY_KINDS, DraftSettings, GenerationRequest, SamplingSettings


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        help="mlx-lm model folder or Hugging Face id (default: the embedded SmolLM2-135M-Instruct)",
    )
    parser.add_argument(
        "--drafter",
        default="default",
        help="how drafts are guessed "
        "(default: the engine's default drafter; see `python -m engine drafters`)",
    )
    parser.add_argument(
        "--draft-count",
        type=int,
        default=DraftSettings.draft_count,
        help="most draft tokens per pass; with --no-adaptive, exactly this many "
        "whenever the drafter has a guess (default %(default)s)",
    )
    parser.add_argument(
        "--adaptive",
        action=argparse.BooleanOptionalAction,
        default=DraftSettings.adaptive,
        help="let the engine choose each pass's draft length from the measured "
        "verify cost and acceptance (default); --no-adaptive drafts a fixed "
        "--draft-count",
    )
    parser.add_argument(
        "--policy",
        choices=POLICY_KINDS,
        default=DraftSettings.policy,
        help="how the adaptive policy judges acceptance: per match class (adaptive) or a "
        "logistic model learned as the chat runs (calibrated) (default %(default)s)",
    )
    parser.add_argument(
        "--ngram-order",
        type=int,
        default=DraftSettings.ngram_order,
        help="longest n-gram the drafter matches (default %(default)s)",
    )
    parser.add_argument(
        "--ngram-min",
        type=int,
        default=DraftSettings.ngram_min,
        help="shortest n-gram the drafter matches (default %(default)s)",
    )
    parser.add_argument(
        "--temperature", type=float, default=0.0, help="0 is greedy (default); above 0 samples"
    )
    parser.add_argument(
        "--top-p",
        type=float,
        default=1.0,
        help="nucleus sampling threshold when sampling (default 1.0: off)",
    )
    parser.add_argument("--seed", type=int, help="random seed for sampling")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="most new tokens in the answer (default %(default)s)",
    )
    parser.add_argument(
        "--cost-curve",
        metavar="NAME|FILE",
        help="plan drafts and estimate the speed-up on this verify-cost curve: a "
        "shipped device curve by name (see engine/curves) or a JSON file mapping "
        'n to seconds per pass, {"1": 0.0084, "2": 0.0130, ...} (default: this '
        "model's curve measured on this machine); wall-clock times stay this "
        "machine's",
    )


def request_from_args(args, prompt: str, raw: bool) -> GenerationRequest:
    return GenerationRequest(
        messages=None if raw else [{"role": "user", "content": prompt}],
        prompt=prompt if raw else None,
        raw=raw,
        model=args.model,
        max_tokens=args.max_tokens,
        draft=DraftSettings(
            drafter=args.drafter,
            draft_count=args.draft_count,
            ngram_order=args.ngram_order,
            ngram_min=args.ngram_min,
            adaptive=args.adaptive,
            policy=args.policy,
            cost_curve=curve_from_spec(args.cost_curve) if args.cost_curve else None,
        ),
        sampling=SamplingSettings(temperature=args.temperature, top_p=args.top_p, seed=args.seed),
    ).validated()


_progress_line_open = False


def log(message: str) -> None:
    global _progress_line_open
    if _progress_line_open:
        print(file=sys.stderr)
        _progress_line_open = False
    print(message, file=sys.stderr, flush=True)


def show_progress(event: ProgressEvent) -> None:
    """One self-overwriting stderr line per stage of long work."""
    global _progress_line_open
    share = f" {event.done * 100 // event.total}%" if event.total > 1 else ""
    print(f"\r{event.message}{share}\033[K", file=sys.stderr, end="", flush=True)
    _progress_line_open = event.done < event.total
    if not _progress_line_open:
        print(file=sys.stderr)
