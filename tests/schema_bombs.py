"""The hostile schemas of issue 58, built at any size: for the check's tests
(test_schema_check.py), the compile budget's (test_grammar_budget.py), the server's
(test_server_hostile.py), the measurements (measure_schema_bomb.py) and the load tool
(hostile_load.py)."""

from __future__ import annotations

import json

from engine.formats.schemas import MAX_SCHEMA_CHARS, MAX_SCHEMA_REGEXES


def compact_size(schema) -> int:
    return len(json.dumps(schema, separators=(",", ":")))


def deep_required(depth: int, repeats: int, name: str = "a") -> dict:
    """Objects nested ``depth`` deep, each requiring its one property ``repeats`` times:
    the old check took ``repeats ** depth`` steps."""
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {name: schema}, "required": [name] * repeats}
    return schema


def reference_chain(length: int) -> dict:
    """``length`` definitions, each only a reference to the next, listed so that the old
    check's rounds settled one a round (quadratic)."""
    schema = {f"{i:x}": {"$ref": f"#/{i + 1:x}"} for i in range(length)}
    schema[f"{length:x}"] = {"type": "string"}
    return {**schema, "$ref": "#/0"}


def widest_within(build, low: int, high: int) -> dict:
    """The largest ``build(n)`` within the size limit (a bisection over n)."""
    while low < high:
        middle = (low + high + 1) // 2
        if compact_size(build(middle)) <= MAX_SCHEMA_CHARS:
            low = middle
        else:
            high = middle - 1
    return build(low)


def regex_bomb(count: int = MAX_SCHEMA_REGEXES) -> dict:
    """A string that must match ``count`` distinct patterns at once: at 128, 5 KB within
    every limit of engine/formats/schemas.py (llguidance ran past 120 s on it)."""
    return {
        "type": "string",
        "allOf": [{"pattern": f"^.*{i:x}[a-z]{{0,3}}q[0-9]*.*$"} for i in range(count)],
    }


def response_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "bomb", "schema": schema}}
