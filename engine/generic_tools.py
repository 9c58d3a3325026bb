"""Tool calling for a model whose chat template has none: llama.cpp's generic format.

A system preamble lists the tools as JSON and says how to answer; the answer is one-line
JSON under a grammar (engine/grammar.py's ``generic_tool_grammar``): a call
``{"tool_call": {"name": …, "arguments": {…}}}`` or, where the model may choose
(``tool_choice`` "auto"), a reply ``{"response": "…"}``. ``GenericAnswerScanner`` reads that
JSON as it streams: a call goes through ``ToolCallScanner`` (the same OpenAI deltas as a
template's calls), a reply's string comes out as plain text, decoded as it is written.
Earlier calls and tool results in the history become plain messages any template takes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .schemas import forced_call_schema
from .tool_calls import ToolCallScanner

# the answer's openings, as the grammar's one-line layout (engine/grammar.py's
# JSON_LAYOUT: ", " and ": ") writes them
CALL_OPENING = '{"tool_call": '
REPLY_OPENING = '{"response": "'
CALL_FORM = '{"tool_call": {"name": <a tool\'s name>, "arguments": {<its arguments>}}}'
REPLY_FORM = '{"response": "<your answer>"}'


def answer_schema(tools: list[dict], forced: Sequence[str] | None) -> dict:
    """The answer's JSON schema: a call to one of the tools (``forced``: to one of those),
    or, where no call is forced, a call or a reply."""
    call = {
        "type": "object",
        "properties": {
            "tool_call": forced_call_schema(
                tools, forced or [tool["function"]["name"] for tool in tools]
            )
        },
        "required": ["tool_call"],
        "additionalProperties": False,
    }
    if forced:
        return call
    reply = {
        "type": "object",
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
        "additionalProperties": False,
    }
    return {"anyOf": [call, reply]}


def preamble(tools: list[dict], forced: Sequence[str] | None) -> str:
    """The system text that lists the tools and says how to answer."""
    listed = "\n".join(json.dumps(tool["function"], ensure_ascii=False) for tool in tools)
    if forced:
        how = f"Answer by calling one of {', '.join(forced)}, as JSON: {CALL_FORM}"
    else:
        how = (
            f"To call a tool, answer with JSON: {CALL_FORM}\n"
            f"To answer directly, answer with JSON: {REPLY_FORM}"
        )
    return f"You can call these tools:\n{listed}\n{how}"


def _call_text(call: dict) -> str:
    function = call["function"]
    return json.dumps(
        {"tool_call": {"name": function["name"], "arguments": function.get("arguments", {})}},
        ensure_ascii=False,
    )


def generic_messages(
    messages: list[dict], tools: list[dict], forced: Sequence[str] | None
) -> list[dict]:
    """``messages`` as a template without tools takes them: the preamble opens the system
    message (one is added where there is none), an assistant's calls are its JSON answers,
    and tool results (consecutive ones together) are a user message."""
    text = preamble(tools, forced)
    out: list[dict] = []
    if messages and messages[0]["role"] == "system":
        out.append({"role": "system", "content": f"{text}\n\n{messages[0]['content']}"})
        messages = messages[1:]
    else:
        out.append({"role": "system", "content": text})
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = "\n".join(_call_text(call) for call in message["tool_calls"])
            out.append({"role": "assistant", "content": calls})
        elif message["role"] == "tool":
            name = message.get("name") or message.get("tool_name")
            result = f"Tool result{f' ({name})' if name else ''}: {message['content']}"
            if out[-1].get("tool_results"):
                out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n{result}"}
            else:
                out.append({"role": "user", "content": result, "tool_results": True})
        else:
            out.append({"role": message["role"], "content": message["content"]})
    return [{k: v for k, v in m.items() if k != "tool_results"} for m in out]


def _parse_call(text: str, tools) -> dict:
    """The call of an answer's text after ``CALL_OPENING``: the call object, then "}"."""
    return json.loads(text.strip().removesuffix("}"))


def _string_prefix(raw: str) -> tuple[int, bool]:
    """How much of ``raw`` (a JSON string's inside, from its start) holds whole characters
    (no escape cut short, no surrogate pair cut in two), and whether the string ends there."""
    i = 0
    while i < len(raw):
        if raw[i] == '"':
            return i, True
        if raw[i] != "\\":
            i += 1
            continue
        size = 6 if raw[i + 1 : i + 2] == "u" else 2
        if raw[i + 1 : i + 2] == "u" and "d800" <= raw[i + 2 : i + 6].lower() <= "dbff":
            size = 12  # a high surrogate: its low half comes with it
        if i + size > len(raw):
            break
        i += size
    return i, False


class GenericAnswerScanner:
    """Reads a generic-format answer as it streams, with ``ToolCallScanner``'s interface:
    ``feed`` and ``flush`` give (text, calls closed, OpenAI call deltas)."""

    def __init__(self, tools: list[dict]):
        self.calls = ToolCallScanner(tools, CALL_OPENING, "", _parse_call)
        self.form: str | None = None  # "call" or "reply", once the opening shows which
        self.held = ""  # the answer so far, until the form is known; then the reply's text
        self.ended = False  # the reply's string has closed

    def feed(self, text: str) -> tuple[str, list[dict], list[dict]]:
        if self.form == "call":
            return self.calls.feed(text)
        self.held += text
        if self.form is None:
            if self.held.startswith(CALL_OPENING):
                self.form, held, self.held = "call", self.held, ""
                return self.calls.feed(held)
            if not self.held.startswith(REPLY_OPENING):
                return "", [], []
            self.form, self.held = "reply", self.held[len(REPLY_OPENING) :]
        if self.ended:
            return "", [], []
        length, self.ended = _string_prefix(self.held)
        whole, self.held = self.held[:length], self.held[length:]
        return json.loads(f'"{whole}"'), [], []

    def flush(self) -> tuple[str, list[dict], list[dict]]:
        """At the end: a call closes; a reply cut short gives what it held; an answer of
        neither form (cut before its opening) is its text."""
        if self.form == "call":
            return self.calls.flush()
        held, self.held = self.held, ""
        return ("" if self.form == "reply" else held), [], []
