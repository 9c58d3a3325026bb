"""Tool calls in a model's output, found with mlx-lm's tool parsers.

mlx-lm's tokenizer wrapper names, per model (from its chat template or vocabulary), the text
that opens and closes a tool call and the parser for what lies between
(``mlx_lm.tool_parsers``). ``ToolCallScanner`` takes the answer's text as it streams, gives
back the text outside tool calls, and the calls parsed as each one closes.
"""

from __future__ import annotations

import json
import uuid

from .errors import EngineError


def tool_call_support(tokenizer, name: str) -> None:
    """Raise EngineError (naming ``tools``) unless the model's chat template takes tools."""
    if not getattr(tokenizer, "has_tool_calling", False):
        raise EngineError(
            f"'tools' cannot be used with {name}: its chat template has no tool "
            "calling support (no tool-call markers mlx-lm knows)."
        )


def _held_prefix(text: str, marker: str) -> int:
    """How many characters at the end of ``text`` may begin ``marker``."""
    return max(
        (k for k in range(min(len(marker) - 1, len(text)), 0, -1) if text.endswith(marker[:k])),
        default=0,
    )


class ToolCallScanner:
    def __init__(self, tokenizer, tools: list[dict]):
        self.start, self.end = tokenizer.tool_call_start, tokenizer.tool_call_end or ""
        self.parser = tokenizer.tool_parser
        self.tools = tools
        self.held = ""
        self.inside = False

    def feed(self, text: str) -> tuple[str, list[dict]]:
        """(the text outside tool calls that is known now, the calls that closed)."""
        out, calls = "", []
        self.held += text
        while True:
            if self.inside:
                cut = self.held.find(self.end) if self.end else -1
                if cut < 0:
                    return out, calls
                body, self.held = self.held[:cut], self.held[cut + len(self.end) :]
                self.inside = False
                found = self._parse(body)
                if found is None:  # not a call after all: the text stays text
                    out += self.start + body + self.end
                calls += found or []
            else:
                cut = self.held.find(self.start)
                if cut < 0:
                    keep = _held_prefix(self.held, self.start)
                    out, self.held = (
                        out + self.held[: len(self.held) - keep],
                        self.held[len(self.held) - keep :],
                    )
                    return out, calls
                out, self.held = out + self.held[:cut], self.held[cut + len(self.start) :]
                self.inside = True

    def flush(self) -> tuple[str, list[dict]]:
        """At the end of the answer: the held text, or the call it closes (a parser whose
        calls have no end marker runs to the end)."""
        held, inside = self.held, self.inside
        self.held, self.inside = "", False
        if inside:
            found = self._parse(held) if not self.end else None
            return ("", found) if found else (self.start + held, [])
        return held, []

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
                    "id": call.get("id") or "call_" + uuid.uuid4().hex[:24],
                    "name": call["name"],
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments, ensure_ascii=False),
                }
            )
        return calls
