"""JSON output speed: plain against speculative decoding under a JSON schema (not a test).

    python -m engine.bench.json_speed [--rounds 2] [--max-tokens 256] [--out FILE]

On the embedded model, four JSON tasks (rewrite a record with one field changed, rewrite a
list, fill a schema from text, a table to JSON) are answered under their schema (the
server's ``response_format``: constrained decoding, ``engine/grammar.py``) plainly and with
the default drafter, in alternating rounds, in one process, with the model's verify-cost
curve measured first. Every speculative answer must equal the plain one token for token.
Prints (and with ``--out`` writes as Markdown) the median time ratio and tokens per pass per
task, with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from ..events import DoneEvent
from .scratch import scratch_memory
from ..model_ngrams import model_key
from ..models import load_model
from ..session import ChatSession
from ..settings import DraftSettings, GenerationRequest
from ..verify_cost import CostCurve, measure_cost_curve
from .runner import load_now

RECORD = {
    "id": 4711,
    "name": "Ada Lovelace",
    "email": "ada@example.org",
    "city": "London",
    "plan": "pro",
    "seats": 12,
    "active": True,
    "tags": ["math", "engines", "notes"],
}
RECORD_TYPES = {"id": "integer", "name": "string", "email": "string", "city": "string",
                "plan": "string", "seats": "integer", "active": "boolean", "tags": "array"}  # fmt: skip
PEOPLE = [{"name": n, "age": a, "city": c} for n, a, c in (
    ("Ana", 31, "Lisbon"), ("Ben", 45, "Leeds"), ("Chen", 28, "Shanghai"),
    ("Dara", 39, "Dublin"), ("Emil", 52, "Oslo"), ("Fay", 24, "Perth"))]  # fmt: skip
PERSON = {"type": "object", "properties": {"name": {"type": "string"},
          "age": {"type": "integer"}, "city": {"type": "string"}},
          "required": ["name", "age", "city"]}  # fmt: skip
TABLE = "| name | age | city |\n|---|---|---|\n" + "\n".join(
    f"| {p['name']} | {p['age']} | {p['city']} |" for p in PEOPLE
)
TASKS = {  # name: (user message, schema)
    "record rewrite": (
        f"Here is a customer record:\n{json.dumps(RECORD, indent=2)}\n"
        "Return the same record as JSON with the city changed to Paris.",
        {
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in RECORD_TYPES.items()},
            "required": list(RECORD_TYPES),
        },
    ),
    "list rewrite": (
        f"People:\n{json.dumps(PEOPLE, indent=2)}\nReturn the same list as JSON with every"
        " age one year higher.",
        {"type": "array", "items": PERSON},
    ),
    "fill a schema": (
        "Ana is 31 and lives in Lisbon. Return her as JSON with name, age and city.",
        PERSON,
    ),
    "table to JSON": (
        f"{TABLE}\nReturn this table as a JSON list.",
        {"type": "array", "items": PERSON},
    ),
}


def answer(session, message: str, schema: dict, drafter: str, max_tokens: int):
    request = GenerationRequest(
        messages=[{"role": "user", "content": message}],
        max_tokens=max_tokens,
        draft=DraftSettings(drafter=drafter),
        json_schema=schema,
    ).validated()
    started = time.perf_counter()
    done = [e for e in session.generate(request) if isinstance(e, DoneEvent)][-1]
    seconds = time.perf_counter() - started - float(done.timing.get("prefill_s", 0.0))
    return list(done.tokens), seconds, done.stats.get("passes", 0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.json_speed")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    loaded = load_model(None)
    memory = scratch_memory()
    session = ChatSession(loaded, memory)
    print("measuring the verify-cost curve…", file=sys.stderr, flush=True)
    # kept in this process only: a benchmark writes nothing into the user's cache
    memory.adaptive.curves[model_key(loaded)] = CostCurve(measure_cost_curve(session.target))
    loads, lines = [load_now()], []
    for task, (message, schema) in TASKS.items():
        times = {"none": [], "default": []}
        for _ in range(args.rounds):
            for drafter in times:
                tokens, seconds, passes = answer(session, message, schema, drafter, args.max_tokens)
                times[drafter].append(seconds)
                if drafter == "none":
                    reference = tokens
                elif tokens != reference:
                    raise SystemExit(f"{task}: the speculative answer differs from plain")
        ratio = statistics.median(times["none"]) / statistics.median(times["default"])
        loads.append(load_now())
        lines.append(
            f"| {task} | {len(reference)} | {ratio:.2f}x | {len(reference) / passes:.2f} | yes |"
        )
        print(lines[-1], flush=True)
    table = [
        "| task | answer tokens | speed-up (median of rounds) | tokens per pass | identical |",
        "|---|---|---|---|---|",
        *lines,
    ]
    header = (
        f"`python -m engine.bench.json_speed --rounds {args.rounds}`: {loaded.name}, default "
        f"drafter against plain, both under the task's JSON schema; 1-minute load "
        f"{min(loads):.1f}–{max(loads):.1f}."
    )
    print(header)
    if args.out:
        with open(args.out, "w") as out:
            out.write("# JSON output speed\n\n" + header + "\n\n" + "\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
