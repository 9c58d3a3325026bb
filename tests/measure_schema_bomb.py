"""What hostile schemas cost, each figure measured in a fresh process (peak RSS from
resource.getrusage):

    python -m tests.measure_schema_bomb --check
    python -m tests.measure_schema_bomb --compile [--seconds 60]

- ``--check``: engine/formats/schemas.py's check on the bombs (nested ``required`` repeats, the
  longest ``$ref`` chain that fits, the widest lists): its steps, steps per character of
  compact JSON and milliseconds; what the server runs while reading a request.
- ``--compile``: llguidance alone, past the check (with the engine's LLParserLimits), on
  regexes that must hold together (``allOf`` patterns), separate patterns, anyOf unions,
  enums and one pattern's alternations of growing counts: the seconds of the matcher and
  its first mask and the peak RSS; a run past ``--seconds`` is cut off and said so. The
  budget engine/formats/grammar_budget.py sets (1 s, 256 MB) comes from these figures.

The tokenizer is the embedded SmolLM2's (49,152 tokens) once the app has converted it,
else the tests' byte-level one.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMOLLM = Path.home() / ".cache/Draftless/models/SmolLM2-135M-Instruct-float32-v1"
KINDS = {  # name: (a schema of n of them, the counts measured)
    "allof-patterns": (
        lambda n: {"type": "string", "allOf": [{"pattern": f"^.*{i:x}q.*$"} for i in range(n)]},
        (8, 16, 28, 32, 64, 128),
    ),
    "patterned-properties": (
        lambda n: {
            "type": "object",
            "properties": {
                f"p{i}": {"type": "string", "pattern": f"^[a-z]{{{i % 7 + 1}}}[0-9]+{i}$"}
                for i in range(n)
            },
        },
        (128, 512),
    ),
    "anyof-patterns": (
        lambda n: {"anyOf": [{"type": "string", "pattern": f"^.*{i:x}q.*$"} for i in range(n)]},
        (128, 512),
    ),
    "enum": (lambda n: {"enum": [f"value-{i}-" + "x" * (i % 13) for i in range(n)]}, (1000, 5000)),
    "alternation": (
        lambda n: {
            "type": "string",
            "pattern": "^(" + "|".join(f"w{i}[a-z]*{i}" for i in range(n)) + ")$",
        },
        (100, 1000),
    ),
}


def tokenizer():
    from mlx_lm.tokenizer_utils import load

    if (SMOLLM / "tokenizer.json").exists():
        return load(SMOLLM), 49152
    from tests.tiny_model import write_byte_tokenizer

    folder = Path(tempfile.mkdtemp())
    return load(folder), write_byte_tokenizer(folder) + 3


def compile_once(kind: str, count: int) -> str:
    """One compile, in this (fresh) process: llguidance's matcher and first mask."""
    from llguidance import LLMatcher, LLParserLimits, LLTokenizer

    from engine.formats.grammar import JSON_LAYOUT, PARSER_LIMITS, _serialized

    loaded, vocab = tokenizer()
    built = LLTokenizer(
        _serialized(loaded._tokenizer), n_vocab=vocab, eos_token=sorted(loaded.eos_token_ids)
    )
    schema = KINDS[kind][0](count)
    grammar = LLMatcher.grammar_from_json_schema(schema, defaults=JSON_LAYOUT)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    started = time.perf_counter()
    matcher = LLMatcher(built, grammar, limits=LLParserLimits(**PARSER_LIMITS))
    if not matcher.is_error():
        matcher.compute_bitmask()
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    outcome = f"refused: {matcher.get_error()[:60]}" if matcher.is_error() else "compiled"
    chars = len(json.dumps(schema, separators=(",", ":")))
    return (
        f"{kind:<21} {count:>5}  {chars:>7} chars  {seconds:7.3f} s  peak RSS {peak:>5} MB "
        f"({before} MB with the tokenizer)  {outcome}"
    )


def measure_compiles(seconds: float) -> None:
    for kind, (_, counts) in KINDS.items():
        for count in counts:
            command = [sys.executable, "-m", "tests.measure_schema_bomb", "--one", kind, str(count)]
            try:
                subprocess.run(command, check=True, timeout=seconds)
            except subprocess.TimeoutExpired:
                print(f"{kind:<21} {count:>5}  still compiling after {seconds:g} s", flush=True)


def measure_checks() -> None:
    from engine.errors import EngineError
    from engine.formats.schemas import check_schema, schema_check_steps
    from tests.schema_bombs import compact_size, deep_required, reference_chain, widest_within

    bombs = {
        "required 17 x 21 deep": deep_required(21, 17),
        "required, widest": widest_within(lambda n: deep_required(20, n), 1, 20_000),
        "$ref chain, longest": widest_within(reference_chain, 1, 10_000),
        "enum, longest": widest_within(lambda n: {"enum": [0] * n}, 1, 60_000),
        "required + minItems": widest_within(
            lambda n: {
                "properties": {"a": {"minItems": 1, "prefixItems": [{}]}},
                "required": ["a"] * n,
            },
            1,
            60_000,
        ),
        "past the budget": {"enum": [0] * 600_000},  # a 1.2 MB body
    }
    for name, schema in bombs.items():
        started = time.perf_counter()
        try:
            check_schema(schema, "response_format")
            outcome = "passed"
        except EngineError as error:
            outcome = f"refused: {str(error)[:70]}"
        milliseconds = 1000 * (time.perf_counter() - started)
        steps, chars = schema_check_steps(schema), compact_size(schema)
        print(
            f"{name:<22} {chars:>6} chars  {steps:>7} steps  {steps / chars:.2f} a char  "
            f"{milliseconds:6.1f} ms  {outcome}"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.measure_schema_bomb", description=__doc__
    )
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--one", nargs=2, metavar=("KIND", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(compile_once(args.one[0], int(args.one[1])), flush=True)
        return
    if args.check or not args.compile:
        measure_checks()
    if args.compile:
        measure_compiles(args.seconds)


if __name__ == "__main__":
    main()
