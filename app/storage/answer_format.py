"""A chat's answer format: free text (the default), any JSON object, or JSON that follows
a schema the person pasted. The engine constrains the answer to it (engine/formats/grammar.py).

A schema is checked with the engine's bounded check (engine/formats/schemas.py) when it is set and
again when it is read back from the chat history, so no schema reaches the engine unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import EngineError
from engine.formats.schemas import MAX_SCHEMA_CHARS, check_schema
from engine.untrusted import parse_json

TEXT, JSON_OBJECT, JSON_SCHEMA = "text", "json_object", "json_schema"
# the names the chat's list shows ("…": choosing it opens the schema's editor, also to edit)
KINDS = {TEXT: "Text answers", JSON_OBJECT: "JSON object", JSON_SCHEMA: "JSON schema…"}
# a pasted schema keeps its indentation: the check's limit is on compact JSON, so allow
# the blanks of a pretty-printed one but do not parse megabytes to find it too large
MAX_PASTED_CHARS = 4 * MAX_SCHEMA_CHARS
ANY_OBJECT = {"type": "object"}  # what "JSON object" asks, as the server reads json_object


@dataclass(frozen=True)
class AnswerFormat:
    kind: str = TEXT
    text: str = ""  # the schema as pasted (JSON_SCHEMA only)
    schema: dict | None = field(default=None, compare=False)  # checked; None: free text


def answer_format(kind: str, text: str = "") -> AnswerFormat:
    """The format ``kind`` (with the pasted schema ``text``), checked; a ValueError says in
    a sentence what is wrong with it."""
    if kind == TEXT:
        return AnswerFormat()
    if kind == JSON_OBJECT:
        return AnswerFormat(JSON_OBJECT, "", check_schema(ANY_OBJECT, "schema"))
    if kind != JSON_SCHEMA:
        raise ValueError(f"{kind!r:.40} is not an answer format")
    if not text.strip():
        raise ValueError("Paste a JSON schema first.")
    if len(text) > MAX_PASTED_CHARS:
        raise ValueError(
            f"The schema is {len(text):,} characters long; at most {MAX_SCHEMA_CHARS:,} "
            "characters as compact JSON are allowed."
        )
    try:
        schema = parse_json(text)
    except ValueError as error:
        raise ValueError(f"The schema is not JSON: {error}.") from None
    if not isinstance(schema, dict):
        raise ValueError("The schema must be a JSON object, such as {\"type\": \"object\"}.")
    try:
        checked = check_schema(schema, "schema")
    except EngineError as error:
        raise ValueError(f"The schema cannot be used: {error}") from None
    return AnswerFormat(JSON_SCHEMA, text, checked)
