"""The JSON schemas constrained decoding compiles (engine/formats/grammar.py): the limits a schema
is held to before llguidance sees it, and the schema of a forced tool call.

A schema comes from a client (``response_format``, Ollama's ``format``, a forced tool's
``parameters``), so its size and the work it asks of the grammar engine are bounded here,
before any engine time is spent: the server checks while parsing the request and the
engine checks again before compiling (the app and the command line send schemas too).
Pure Python, no MLX: the server's request parsing imports it.
"""

from __future__ import annotations

import json

from ..errors import EngineError

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
# The check's own work, in steps: one per value it walks, part of a ``$ref`` it follows,
# and input it wires or settles in the reference analysis. Each stands for at least two
# characters of compact JSON ("0," or "{}"), so the steps are linear in the schema's size:
# at most 0.5 a character over 2,000 generated schemas and the widest bombs within
# MAX_SCHEMA_CHARS (tests/test_schema_check.py; `python -m tests.measure_schema_bomb
# --check`: the slowest took 13 ms here). 4 a character is the budget, under 0.15 s here;
# a schema past it is refused where it is, never checked to the end.
STEPS_PER_CHAR = 4
MAX_CHECK_STEPS = STEPS_PER_CHAR * MAX_SCHEMA_CHARS
# how many endless references an error names (a chain may hold thousands)
NAMED_REFERENCES = 8


class CheckedSchema(dict):
    """A schema ``check_schema`` has passed (a shallow copy): the engine does not check it
    again. Only its checker makes one; it is read, never changed."""


def check_schema(schema, field: str) -> CheckedSchema:
    """``schema``, marked as checked; an EngineError naming ``field`` and the limit when it
    is past one of the limits above, or when no finite JSON value can follow it. The
    work is linear in the schema's size and at most MAX_CHECK_STEPS steps
    (``schema_check_steps`` counts them)."""
    return _SchemaCheck(field).run(schema)


def schema_check_steps(schema) -> int:
    """How many steps ``check_schema`` takes on ``schema`` (for the tests' budget)."""
    check = _SchemaCheck("schema")
    try:
        check.run(schema)
    except EngineError:
        pass
    return check.steps


class _SchemaCheck:
    """One schema's check, counting its steps against MAX_CHECK_STEPS."""

    def __init__(self, field: str):
        self.field = field
        self.steps = 0

    def step(self, count: int = 1) -> None:
        self.steps += count
        if self.steps > MAX_CHECK_STEPS:
            raise _past(
                self.field,
                f"takes more than {MAX_CHECK_STEPS:,} steps to check (the budget of "
                f"{MAX_SCHEMA_CHARS:,} characters of plain schema)",
            )

    def run(self, schema) -> CheckedSchema:
        if isinstance(schema, CheckedSchema):
            return schema
        references = self.walk(schema)
        try:
            size = len(json.dumps(schema, separators=(",", ":"), allow_nan=False))
        except (TypeError, ValueError) as error:
            raise EngineError(f"'{self.field}' must be a JSON schema ({error}).") from None
        if size > MAX_SCHEMA_CHARS:
            raise _past(
                self.field, f"is {size:,} characters as compact JSON; at most {MAX_SCHEMA_CHARS:,}"
            )
        endless = _EndlessReferences(self, schema, references).endless()
        if endless:
            named = ", ".join(endless[:NAMED_REFERENCES])
            if len(endless) > NAMED_REFERENCES:
                named += f" and {len(endless) - NAMED_REFERENCES:,} more"
            raise EngineError(
                f"'{self.field}' has no JSON value that ends: its required properties (or "
                f"non-empty arrays) through {named} always lead back to themselves, so an "
                "answer could never close. Make one of them optional."
            )
        return CheckedSchema(schema) if isinstance(schema, dict) else schema

    def walk(self, schema) -> list[str]:
        """Count the schema against the nesting, size, branch and regex limits; return
        its ``$ref`` values, each once, in the order first seen."""
        nodes = branches = regexes = 0
        references: dict[str, None] = {}
        pending = [(schema, 1)]
        while pending:
            value, depth = pending.pop()
            self.step()
            if not isinstance(value, (dict, list)):
                continue
            nodes += 1
            if depth > MAX_SCHEMA_DEPTH:
                raise _past(self.field, f"is nested more than {MAX_SCHEMA_DEPTH} levels deep")
            if nodes > MAX_SCHEMA_NODES:
                raise _past(self.field, f"has more than {MAX_SCHEMA_NODES:,} objects and arrays")
            children = list(value.values()) if isinstance(value, dict) else value
            pending.extend((child, depth + 1) for child in reversed(children))  # in order
            if isinstance(value, list):
                continue
            branches += sum(len(value[k]) for k in BRANCH_KEYS if isinstance(value.get(k), list))
            regexes += sum(isinstance(value.get(k), str) for k in ("pattern", "format"))
            if isinstance(value.get("patternProperties"), dict):
                regexes += len(value["patternProperties"])
            if isinstance(value.get("$ref"), str):
                references[value["$ref"]] = None
        if branches > MAX_SCHEMA_BRANCHES:
            raise _past(
                self.field,
                f"has {branches:,} anyOf/oneOf/allOf branches; at most {MAX_SCHEMA_BRANCHES:,}",
            )
        if regexes > MAX_SCHEMA_REGEXES:
            raise _past(
                self.field,
                f"has {regexes:,} regular expressions (pattern, format, patternProperties); "
                f"at most {MAX_SCHEMA_REGEXES}",
            )
        return list(references)


def _past(field: str, what: str) -> EngineError:
    return EngineError(f"'{field}' is too complex for this server: the schema {what}.")


class _EndlessReferences:
    """Which values can end, as one AND/OR circuit settled in time linear in its size.

    Each schema value is a gate: an object is the AND of what it needs (its ``$ref``'s
    target, its ``allOf`` parts, an OR over each ``anyOf``/``oneOf``, its distinct required
    properties, the items ``minItems`` asks for); ``false`` never ends; anything else ends.
    A gate ends once all of its inputs have (an OR once one has): the least fixed point,
    so targets that only require each other never end. Each input is wired once and
    settled once, and each value gets one gate however often it is named."""

    def __init__(self, check: _SchemaCheck, schema, references: list[str]):
        self.check = check
        self.schema = schema
        self.gates: dict[int, int] = {}  # id(value) -> its gate
        self.needs: list[int] = []  # inputs still to end, per gate (an OR needs one)
        self.feeds: list[list[int]] = []  # the gates each gate is an input of
        self.unbuilt: list[tuple[int, object]] = []
        self.targets = {}  # each resolvable reference -> its target's gate, in order
        for reference in references:
            target = self.resolve(reference)
            if target is not None:
                self.targets[reference] = self.gate_of(target)

    def endless(self) -> list[str]:
        root = self.gate_of(self.schema)
        self.build()
        ended = self.settle()
        if ended[root]:
            return []
        return [reference for reference, gate in self.targets.items() if not ended[gate]]

    def resolve(self, reference: str):
        """The value a local JSON-pointer ``$ref`` ("#", "#/$defs/A") points at; None if none."""
        if reference != "#" and not reference.startswith("#/"):
            return None
        value = self.schema
        for part in reference[2:].split("/") if reference != "#" else []:
            self.check.step()
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return None
        return value

    def new_gate(self, needs: int) -> int:
        self.check.step()
        self.needs.append(needs)
        self.feeds.append([])
        return len(self.needs) - 1

    def gate_of(self, value) -> int:
        """The gate of ``value`` (a schema), wired later by ``build``."""
        gate = self.gates.get(id(value))
        if gate is None:
            gate = self.gates[id(value)] = self.new_gate(0 if value is not False else 1)
            if isinstance(value, dict):
                self.unbuilt.append((gate, value))
        return gate

    def wire(self, source: int, gate: int) -> None:
        self.check.step()
        self.needs[gate] += 1
        self.feeds[source].append(gate)

    def build(self) -> None:
        while self.unbuilt:
            gate, value = self.unbuilt.pop()
            for kind, part in _needed_parts(value, self.targets, self.check):
                if kind == "any":  # any one of these schemas
                    either = self.new_gate(1)
                    for option in part:
                        self.check.step()
                        self.feeds[self.gate_of(option)].append(either)
                    self.wire(either, gate)
                else:
                    self.wire(part if kind == "gate" else self.gate_of(part), gate)

    def settle(self) -> list[bool]:
        needs = list(self.needs)
        ended = [need == 0 for need in needs]
        ready = [gate for gate, done in enumerate(ended) if done]
        while ready:
            for fed in self.feeds[ready.pop()]:
                self.check.step()
                needs[fed] -= 1
                if needs[fed] == 0 and not ended[fed]:
                    ended[fed] = True
                    ready.append(fed)
        return ended


def _needed_parts(value: dict, targets: dict[str, int], check: _SchemaCheck):
    """What an object schema needs to end, as (kind, part): ("gate", its reference's
    target gate), ("all", a schema that must end), ("any", schemas one of which must)."""
    reference = value.get("$ref")
    if isinstance(reference, str) and reference in targets:
        yield "gate", targets[reference]
    if isinstance(value.get("allOf"), list):
        for part in value["allOf"]:
            yield "all", part
    for key in ("anyOf", "oneOf"):
        if value.get(key) and isinstance(value[key], list):
            yield "any", value[key]
    properties = value.get("properties")
    if isinstance(properties, dict) and isinstance(value.get("required"), list):
        check.step(len(value["required"]))
        for name in dict.fromkeys(n for n in value["required"] if isinstance(n, str)):
            yield "all", properties.get(name, True)
    least = value.get("minItems")
    if isinstance(least, int) and least > 0:
        prefix = value.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        for part in prefix[:least]:
            yield "all", part
        if least > len(prefix):
            yield "all", value.get("items", True)


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
