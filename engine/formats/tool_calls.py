"""Tool calls in a model's output, found with mlx-lm's tool parsers.

mlx-lm's tokenizer wrapper names, per model (from its chat template or vocabulary), the text
that opens and closes a tool call and the parser for what lies between
(``mlx_lm.tool_parsers``). ``ToolCallScanner`` takes the answer's text as it streams, gives
back the text outside tool calls, the calls parsed as each one closes, and the calls'
progress as OpenAI streams it (``deltas``): first a call's index, id and name, then pieces
of its arguments' JSON text. A call written as JSON with its name first
(``{"name": …, "arguments": {…}}``, the common ``<tool_call>`` markup) streams its arguments
as the model writes them; a call in other markup streams whole as it closes.
"""

from __future__ import annotations

import json
import re
import uuid


def tool_format(tokenizer) -> str:
    """How a model calls tools: "template" where its chat template takes tools and mlx-lm
    knows its call markup, else "generic" (engine/formats/generic_tools.py's JSON answers)."""
    return "template" if getattr(tokenizer, "has_tool_calling", False) else "generic"


def _held_prefix(text: str, marker: str) -> int:
    """How many characters at the end of ``text`` may begin ``marker``."""
    return max(
        (k for k in range(min(len(marker) - 1, len(text)), 0, -1) if text.endswith(marker[:k])),
        default=0,
    )


# a JSON call whose name is written and whose arguments have begun
_NAMED_JSON_CALL = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*')


def json_value_prefix(text: str) -> tuple[int, bool]:
    """How much of ``text`` (which starts a JSON object or array) lies inside that value,
    and whether the value is complete there."""
    depth, in_string, escaped = 0, False, False
    for i, char in enumerate(text):
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1, True
    return len(text), False


class ToolCallScanner:
    """``start`` and ``end``: the text around a call (no end: a call runs to the end of the
    answer); ``parser(text, tools)``: the call (or calls) between them, as mlx-lm's tool
    parsers give it."""

    def __init__(self, tools: list[dict], start: str, end: str, parser):
        self.start, self.end = start, end
        self.parser = parser
        self.tools = tools
        self.held = ""
        self.inside = False
        self.count = 0  # calls streamed so far: the next call's index
        self.streaming: dict | None = None  # the call under way: index, id, arguments sent

    @classmethod
    def for_model(cls, tokenizer, tools: list[dict]) -> ToolCallScanner:
        """The scanner of the call markup mlx-lm names for the model's tokenizer."""
        return cls(
            tools, tokenizer.tool_call_start, tokenizer.tool_call_end or "", tokenizer.tool_parser
        )

    def feed(self, text: str) -> tuple[str, list[dict], list[dict]]:
        """(the text outside tool calls that is known now, the calls that closed, the
        calls' progress as OpenAI stream deltas)."""
        out, calls, deltas = "", [], []
        self.held += text
        while True:
            if self.inside:
                cut = self.held.find(self.end) if self.end else -1
                if cut < 0:
                    deltas += self._progress(self.held)
                    return out, calls, deltas
                body, self.held = self.held[:cut], self.held[cut + len(self.end) :]
                self.inside = False
                deltas += self._progress(body)
                found = self._parse(body)
                if found is None:  # not a call after all: the text stays text
                    out += self.start + body + self.end
                calls += found or []
                deltas += self._closed(found or [])
            else:
                cut = self.held.find(self.start)
                if cut < 0:
                    keep = _held_prefix(self.held, self.start)
                    out, self.held = (
                        out + self.held[: len(self.held) - keep],
                        self.held[len(self.held) - keep :],
                    )
                    return out, calls, deltas
                out, self.held = out + self.held[:cut], self.held[cut + len(self.start) :]
                self.inside = True

    def flush(self) -> tuple[str, list[dict], list[dict]]:
        """At the end of the answer: the held text, or the call it closes (a parser whose
        calls have no end marker runs to the end), and that call's last deltas."""
        held, inside = self.held, self.inside
        self.held, self.inside = "", False
        if inside:
            found = self._parse(held) if not self.end else None
            if found:
                return "", found, self._progress(held) + self._closed(found)
            return self.start + held, [], []
        return held, [], []

    def _progress(self, body: str) -> list[dict]:
        """Deltas for what the call under way has newly written: its start once its name
        is known, then its arguments' JSON text as far as it goes."""
        named = _NAMED_JSON_CALL.match(body)
        if named is None:
            return []
        deltas = []
        if self.streaming is None:
            try:
                name = json.loads(named.group(1))
            except ValueError:
                return []
            self.streaming = {"index": self.count, "id": new_call_id(), "sent": 0}
            self.count += 1
            deltas.append(
                {"index": self.streaming["index"], "id": self.streaming["id"], "name": name}
            )
        arguments = body[named.end() :]
        if not arguments.startswith(("{", "[")):
            return deltas
        length, _ = json_value_prefix(arguments)
        new = arguments[self.streaming["sent"] : length]
        if new:
            deltas.append({"index": self.streaming["index"], "arguments": new})
            self.streaming["sent"] = length
            self.streaming["text"] = arguments[:length]
        return deltas

    def _closed(self, calls: list[dict]) -> list[dict]:
        """Deltas that finish the calls of one closed call markup: a streamed call keeps
        its id and the argument text it streamed (when it parses to the same value); any
        other call streams whole now."""
        deltas, streamed = [], self.streaming
        self.streaming = None
        for call in calls:
            if streamed is not None and streamed.get("text") is not None:
                if _same_json(streamed["text"], call["arguments"]):
                    call.update(id=streamed["id"], arguments=streamed["text"])
                    streamed = None
                    continue
            if streamed is not None:  # a start was streamed, the arguments were not
                call["id"] = streamed["id"]
                deltas.append({"index": streamed["index"], "arguments": call["arguments"]})
                streamed = None
                continue
            deltas.append({"index": self.count, "id": call["id"], "name": call["name"]})
            deltas.append({"index": self.count, "arguments": call["arguments"]})
            self.count += 1
        return deltas

    def _parse(self, text: str) -> list[dict] | None:
        """OpenAI-style calls ({"id", "name", "arguments" as JSON text}), None if unparsable."""
        try:
            parsed = self.parser(text, self.tools)
        except Exception:  # whatever the model wrote, a call that does not parse is text
            return None
        calls = []
        for call in parsed if isinstance(parsed, list) else [parsed]:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                return None
            arguments = call.get("arguments", {})
            calls.append(
                {
                    "id": call.get("id") or new_call_id(),
                    "name": call["name"],
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments, ensure_ascii=False),
                }
            )
        return calls


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _same_json(a: str, b: str) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return False
