"""Tool calling for a model whose chat template has none: llama.cpp's generic format.

A system preamble lists the tools as JSON and says how to answer; the answer is one-line
JSON under a grammar (engine/formats/grammar.py's ``generic_tool_grammar``): calls
``{"tool_calls": [{"name": …, "arguments": {…}}, …]}`` (one, where ``parallel_tool_calls``
is off) or, where the model may choose (``tool_choice`` "auto"), a reply
``{"response": "…"}``. ``GenericAnswerScanner`` reads that JSON as it streams: each call
goes through ``ToolCallScanner`` as it closes (the same OpenAI deltas as a template's
calls), a reply's string comes out as plain text, decoded as it is written. Earlier calls
become the assistant's JSON answers; each tool result is shown with the call it answers
(its name and arguments), in a ``<tool_response>`` block as Hermes and Qwen templates show
results, consecutive results in one user message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .schemas import forced_call_schema
from .tool_calls import ToolCallScanner, json_value_prefix

# the answer's openings, as the grammar's one-line layout (engine/formats/grammar.py's
# JSON_LAYOUT: ", " and ": ") writes them
CALLS_OPENING = '{"tool_calls": ['
REPLY_OPENING = '{"response": "'
CALL = '{"name": <a tool\'s name>, "arguments": {<its arguments>}}'
REPLY_FORM = '{"response": <your answer, as a JSON string>}'


def answer_schema(tools: list[dict], forced: Sequence[str] | None, parallel: bool = True) -> dict:
    """The answer's JSON schema: calls to the tools (``forced``: to those; ``parallel``
    False: one call), or, where no call is forced, calls or a reply."""
    call = forced_call_schema(tools, forced or [tool["function"]["name"] for tool in tools])
    calls = {
        "type": "object",
        "properties": {
            "tool_calls": {
                "type": "array",
                "items": call,
                "minItems": 1,
                **({} if parallel else {"maxItems": 1}),
            }
        },
        "required": ["tool_calls"],
        "additionalProperties": False,
    }
    if forced:
        return calls
    reply = {
        "type": "object",
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
        "additionalProperties": False,
    }
    return {"anyOf": [calls, reply]}


def preamble(tools: list[dict], forced: Sequence[str] | None, parallel: bool = True) -> str:
    """The system text that lists the tools and says how to answer. Where several calls
    may go out, the form shows two: the built-in model then makes one call per city for
    "Paris and Tokyo" (tests/test_tool_agents.py); shown one call, it stopped after Paris,
    and shown one call and ", …", it went on to a third. The reply's placeholder is not
    quoted: quoted, the model answered a tool's result with the placeholder's text."""
    listed = "\n".join(json.dumps(tool["function"], ensure_ascii=False) for tool in tools)
    form = f'{{"tool_calls": [{CALL}{", " + CALL if parallel else ""}]}}'
    if forced:
        how = f"Answer by calling {', '.join(forced)}, as JSON: {form}"
    else:
        how = (
            f"To call tools, answer with JSON: {form}\n"
            f"To answer directly, answer with JSON: {REPLY_FORM}"
        )
    return f"You can call these tools:\n{listed}\n{how}"


def _call_object(call: dict) -> dict:
    function = call["function"]
    return {"name": function["name"], "arguments": function.get("arguments", {})}


def _answered_call(message: dict, calls: list[dict]) -> dict | None:
    """The earlier call a tool result answers (and no longer waits for): the one its
    ``tool_call_id`` names, else the first waiting call of its tool's name, else the first
    waiting call."""
    name = message.get("name") or message.get("tool_name")
    for matches in (
        lambda call: message.get("tool_call_id") and call.get("id") == message["tool_call_id"],
        lambda call: name and call["function"]["name"] == name,
        lambda call: True,
    ):
        found = next((call for call in calls if matches(call)), None)
        if found is not None:
            calls.remove(found)
            return found
    return None


def _result_text(message: dict, call: dict | None) -> str:
    if call is not None:
        shown = _call_object(call)
    else:
        name = message.get("name") or message.get("tool_name")
        shown = {"name": name} if name else {}
    heading = json.dumps(shown, ensure_ascii=False) + "\n" if shown else ""
    return f"<tool_response>\n{heading}{message['content']}\n</tool_response>"


def generic_messages(
    messages: list[dict],
    tools: list[dict],
    forced: Sequence[str] | None,
    parallel: bool = True,
) -> list[dict]:
    """``messages`` as a template without tools takes them: the preamble opens the system
    message (one is added where there is none), an assistant's calls are its JSON answer,
    and each tool result, with the call it answers, is a user message (consecutive ones
    together)."""
    text = preamble(tools, forced, parallel)
    out: list[dict] = []
    if messages and messages[0]["role"] == "system":
        out.append({"role": "system", "content": f"{text}\n\n{messages[0]['content']}"})
        messages = messages[1:]
    else:
        out.append({"role": "system", "content": text})
    waiting: list[dict] = []  # the last assistant message's calls no result has answered
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            waiting = list(message["tool_calls"])
            calls = {"tool_calls": [_call_object(call) for call in waiting]}
            out.append({"role": "assistant", "content": json.dumps(calls, ensure_ascii=False)})
        elif message["role"] == "tool":
            result = _result_text(message, _answered_call(message, waiting))
            if out[-1].get("tool_results"):
                out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n{result}"}
            else:
                out.append({"role": "user", "content": result, "tool_results": True})
        else:
            out.append({"role": message["role"], "content": message["content"]})
    return [{k: v for k, v in m.items() if k != "tool_results"} for m in out]


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
        # each call of the list, from its "{" to its "}" (``json_value_prefix``), is fed to
        # this scanner and flushed as it closes: no markers around it, one call each
        self.calls = ToolCallScanner(tools, "", "", lambda text, tools: json.loads(text))
        self.form: str | None = None  # "calls" or "reply", once the opening shows which
        self.held = ""  # the answer so far, until the form is known; then what is unread
        self.call = None  # the text of the call under way (None: between calls)
        self.ended = False  # the reply's string, or the list of calls, has closed

    def feed(self, text: str) -> tuple[str, list[dict], list[dict]]:
        self.held += text
        if self.form is None:
            if self.held.startswith(CALLS_OPENING):
                self.form, self.held = "calls", self.held[len(CALLS_OPENING) :]
            elif self.held.startswith(REPLY_OPENING):
                self.form, self.held = "reply", self.held[len(REPLY_OPENING) :]
            else:
                return "", [], []
        if self.ended:
            return "", [], []
        if self.form == "calls":
            return self._read_calls()
        length, self.ended = _string_prefix(self.held)
        whole, self.held = self.held[:length], self.held[length:]
        return json.loads(f'"{whole}"'), [], []

    def _read_calls(self) -> tuple[str, list[dict], list[dict]]:
        """The calls of the list that closed, and the progress of the one under way."""
        calls, deltas = [], []
        while not self.ended:
            if self.call is None:  # between calls: ", " before the next, "]" after the last
                self.held = self.held.lstrip(", ")
                if not self.held.startswith("{"):
                    self.ended = self.held.startswith("]")
                    break
                self.call = ""
            text = self.call + self.held
            length, closed = json_value_prefix(text)
            new, self.held = text[len(self.call) : length], text[length:]
            self.call += new
            _, _, moved = self.calls.feed(new)
            deltas += moved
            if not closed:
                break
            _, done, moved = self.calls.flush()
            calls, deltas, self.call = calls + done, deltas + moved, None
        return "", calls, deltas

    def flush(self) -> tuple[str, list[dict], list[dict]]:
        """At the end: a call cut short is its text; a reply cut short gives what it held;
        an answer of neither form (cut before its opening) is its text."""
        held, self.held = self.held, ""
        if self.form == "calls":
            return (self.call + held if self.call is not None else ""), [], []
        return ("" if self.form == "reply" else held), [], []
