"""The JSON schemas constrained decoding compiles (engine/grammar.py): the limits a schema
is held to before llguidance sees it, and the schema of a forced tool call.

A schema comes from a client (``response_format``, Ollama's ``format``, a forced tool's
``parameters``), so its size and the work it asks of the grammar engine are bounded here,
before any engine time is spent: the server checks while parsing the request and the
engine checks again before compiling (the app and the command line send schemas too).
Pure Python, no MLX: the server's request parsing imports it.
"""

from __future__ import annotations

import json

from .errors import EngineError

# The limits, measured with tests/measure_schema_bomb.py (llguidance 1.9.1, SmolLM2's
# 49,152-token vocabulary, one CPU core of this Linux box). Real schemas (OpenAI-style tool
# and response schemas: OpenAI itself caps nesting at 10 object levels and 5,000 properties)
# stay well inside every one.
# serialized size (compact JSON): 2,000 one-line properties (about 60 KB) compile in 0.6 s
MAX_SCHEMA_CHARS = 65_536
# JSON nesting of the schema document: 10 object levels take about 30 (object, properties,
# property); llguidance's own parser gives up at 128
MAX_SCHEMA_DEPTH = 64
# objects and arrays in the schema document: bounds the checks below and the compile
MAX_SCHEMA_NODES = 8_192
# anyOf/oneOf/allOf branches, all together: llguidance flattens nested unions into one
# parser row and fails mid-answer past 2,000 items in a row (measured: an anyOf of 5,000
# objects, and 50 anyOfs of 50, both stop the answer at its first token)
MAX_SCHEMA_BRANCHES = 1_000
# regular expressions ("pattern", "format", "patternProperties" keys): each one intersected
# costs every token's mask; 128 copies of one pattern under allOf cost 7 ms a token, 256
# cost 20 ms (and 2,000 cost 1.7 s of compile before the first token)
MAX_SCHEMA_REGEXES = 128
BRANCH_KEYS = ("anyOf", "oneOf", "allOf")


def check_schema(schema, field: str) -> None:
    """Raise an EngineError naming ``field`` and the limit when ``schema`` is past one of
    the limits above, or when no finite JSON value can follow it."""
    nodes = branches = regexes = 0
    pending = [(schema, 1)]
    while pending:
        value, depth = pending.pop()
        if not isinstance(value, (dict, list)):
            continue
        nodes += 1
        if depth > MAX_SCHEMA_DEPTH:
            raise _past(field, f"is nested more than {MAX_SCHEMA_DEPTH} levels deep")
        if nodes > MAX_SCHEMA_NODES:
            raise _past(field, f"has more than {MAX_SCHEMA_NODES:,} objects and arrays")
        children = value.values() if isinstance(value, dict) else value
        pending.extend((child, depth + 1) for child in children)
        if isinstance(value, list):
            continue
        branches += sum(len(value[k]) for k in BRANCH_KEYS if isinstance(value.get(k), list))
        regexes += sum(isinstance(value.get(k), str) for k in ("pattern", "format"))
        if isinstance(value.get("patternProperties"), dict):
            regexes += len(value["patternProperties"])
    if branches > MAX_SCHEMA_BRANCHES:
        raise _past(
            field, f"has {branches:,} anyOf/oneOf/allOf branches; at most {MAX_SCHEMA_BRANCHES:,}"
        )
    if regexes > MAX_SCHEMA_REGEXES:
        raise _past(
            field,
            f"has {regexes:,} regular expressions (pattern, format, patternProperties); at "
            f"most {MAX_SCHEMA_REGEXES}",
        )
    try:
        size = len(json.dumps(schema, separators=(",", ":"), allow_nan=False))
    except (TypeError, ValueError) as error:
        raise EngineError(f"'{field}' must be a JSON schema ({error}).") from None
    if size > MAX_SCHEMA_CHARS:
        raise _past(field, f"is {size:,} characters as compact JSON; at most {MAX_SCHEMA_CHARS:,}")
    endless = endless_refs(schema)
    if endless:
        raise EngineError(
            f"'{field}' has no JSON value that ends: its required properties (or non-empty "
            f"arrays) through {', '.join(endless)} always lead back to themselves, so an "
            "answer could never close. Make one of them optional."
        )


def _past(field: str, what: str) -> EngineError:
    return EngineError(f"'{field}' is too complex for this server: the schema {what}.")


def endless_refs(schema) -> list[str]:
    """The local ``$ref`` targets no finite JSON value can follow (each requires itself
    again through required properties, non-empty arrays or allOf), when the schema's own
    values need one of them; else []. Unresolvable references count as satisfiable (the
    grammar engine names those)."""
    targets: dict[str, object] = {}  # each local $ref's target, in the order first seen
    pending = [schema]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            reference = value.get("$ref")
            if isinstance(reference, str) and reference not in targets:
                target = _resolve(schema, reference)
                if target is not None:
                    targets[reference] = target
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    # least fixed point: a target ends once a value following it can end without it
    ends = dict.fromkeys(targets, False)
    changed = True
    while changed:
        changed = False
        for reference in reversed(targets):  # the most deeply nested first: fewer rounds
            if not ends[reference] and _can_end(targets[reference], ends):
                ends[reference] = changed = True
    if _can_end(schema, ends):
        return []
    return [reference for reference, done in ends.items() if not done]


def _can_end(value, ends: dict[str, bool]) -> bool:
    """Whether some finite JSON value follows ``value``, given which targets can."""
    if not isinstance(value, dict):
        return value is not False
    reference = value.get("$ref")
    if isinstance(reference, str) and not ends.get(reference, True):
        return False
    if isinstance(value.get("allOf"), list) and not all(
        _can_end(part, ends) for part in value["allOf"]
    ):
        return False
    for key in ("anyOf", "oneOf"):
        if value.get(key) and isinstance(value[key], list):
            if not any(_can_end(part, ends) for part in value[key]):
                return False
    properties = value.get("properties")
    if isinstance(properties, dict) and isinstance(value.get("required"), list):
        for name in value["required"]:
            if isinstance(name, str) and not _can_end(properties.get(name, True), ends):
                return False
    least = value.get("minItems")
    if isinstance(least, int) and least > 0:
        prefix = value.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        if not all(_can_end(part, ends) for part in prefix[:least]):
            return False
        if least > len(prefix) and not _can_end(value.get("items", True), ends):
            return False
    return True


def _resolve(schema, reference: str):
    """The value a local JSON-pointer ``$ref`` ("#", "#/$defs/A") points at; None if none."""
    if reference != "#" and not reference.startswith("#/"):
        return None
    value = schema
    for part in reference[2:].split("/") if reference != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


# the keywords whose values are schemas, lists of schemas, or maps of names to schemas
SCHEMA_KEYS = ("items", "not", "if", "then", "else", "contains", "additionalProperties")
SCHEMA_LIST_KEYS = ("prefixItems", "anyOf", "oneOf")
SCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions")


def closed_objects(schema, closable: bool = True):
    """A copy of ``schema`` whose objects that list their properties and say nothing of
    others get ``additionalProperties: false`` (OpenAI strict mode's closed objects): a
    forced call then writes only the keys its tool names. A free-form object (no
    ``properties``) stays open, and so do ``allOf`` parts, which other parts extend."""
    if isinstance(schema, list):
        return [closed_objects(part, closable) for part in schema]
    if not isinstance(schema, dict):
        return schema
    closed = dict(schema)
    for key in SCHEMA_KEYS + SCHEMA_LIST_KEYS:
        if key in closed:
            closed[key] = closed_objects(closed[key])
    for key in SCHEMA_MAP_KEYS:
        if isinstance(closed.get(key), dict):
            closed[key] = {name: closed_objects(part) for name, part in closed[key].items()}
    if isinstance(closed.get("allOf"), list):
        closed["allOf"] = [closed_objects(part, closable=False) for part in closed["allOf"]]
    if closable and isinstance(closed.get("properties"), dict):
        closed.setdefault("additionalProperties", False)
    return closed


def forced_call_schema(tools: list[dict], names) -> dict:
    """The schema of a call to one of the tools ``names``: its name and its arguments,
    which follow the tool's parameter schema with its objects closed (``closed_objects``)."""
    calls = [
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "arguments"],
            "properties": {
                "name": {"const": tool["function"]["name"]},
                "arguments": closed_objects(
                    tool["function"].get("parameters") or {"type": "object"}
                ),
            },
        }
        for tool in tools
        if tool["function"]["name"] in names
    ]
    return calls[0] if len(calls) == 1 else {"anyOf": calls}
