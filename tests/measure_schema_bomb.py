"""Seconds and peak memory of the allOf pattern bomb (one pattern repeated N times), each
run in a fresh process (peak RSS from resource.getrusage):

    python -m tests.measure_schema_bomb [160 2000]

- check: engine/schemas.py's check_schema, what the server runs while reading the request;
- engine: engine/grammar.py's json_schema_grammar + GrammarConstraint, the engine's path;
- compile: llguidance alone past the check (with the engine's LLParserLimits), then 40
  masks and tokens of '"ab0ab0…': what the schema would cost without the check.

The tokenizer is the embedded SmolLM2's (49,152 tokens) once the app has converted it,
else the tests' byte-level one.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMOLLM = Path.home() / ".cache/Draftless/models/SmolLM2-135M-Instruct-float32-v1"


def tokenizer():
    from mlx_lm.tokenizer_utils import load

    if (SMOLLM / "tokenizer.json").exists():
        return load(SMOLLM), 49152
    from tests.tiny_model import write_byte_tokenizer

    folder = Path(tempfile.mkdtemp())
    return load(folder), write_byte_tokenizer(folder) + 3


def run(count: int, phase: str) -> str:
    from engine.errors import EngineError
    from engine.grammar import JSON_LAYOUT, GrammarConstraint, json_schema_grammar
    from engine.schemas import check_schema

    schema = {"type": "string", "allOf": [{"pattern": "^.*0.*$"}] * count}
    loaded, vocab = (None, 0) if phase == "check" else tokenizer()
    if loaded is not None:  # llguidance's view of the tokenizer, built once per model
        GrammarConstraint(loaded, json_schema_grammar({"type": "string"}), vocab)
    started = time.perf_counter()
    try:
        if phase == "check":
            check_schema(schema, "response_format")
        elif phase == "engine":
            GrammarConstraint(loaded, json_schema_grammar(schema), vocab)
        else:
            from llguidance import LLMatcher

            grammar = LLMatcher.grammar_from_json_schema(schema, defaults=JSON_LAYOUT)
            constraint = GrammarConstraint(loaded, grammar, vocab)
            text = '"' + "ab0" * 40
            for token in list(loaded.encode(text, add_special_tokens=False))[:40]:
                constraint.masks([], 1)
                constraint.accept([token])
        outcome = "ran"
    except EngineError as error:
        outcome = f"refused: {error}"
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return f"{count:>5} patterns  {phase:<7} {seconds:7.3f} s  peak RSS {peak:>5} MB  {outcome}"


def main(counts: list[int]) -> None:
    if len(counts) == 2 and counts[0] < 0:  # one measurement, in this (fresh) process
        print(run(-counts[0], ("check", "engine", "compile")[counts[1]]), flush=True)
        return
    for count in counts:
        for phase in range(3):
            subprocess.run(
                [sys.executable, "-m", "tests.measure_schema_bomb", str(-count), str(phase)],
                check=True,
            )


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [160, 2000])
