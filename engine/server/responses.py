"""Engine events → OpenAI response bodies, with Draftless's provenance alongside.

Each streamed chunk holds the tokens of one target pass; its ``draftless`` object says
which pass emitted them and which were accepted drafts. The last chunk's ``usage`` carries
the engine's statistics (``usage.draftless``: tokens per pass, acceptance, per position).
"""

from __future__ import annotations

import codecs
import json
import time
import uuid

from fastapi.responses import JSONResponse

from ..events import DoneEvent, TokenEvent, TokenLogprob

FINISH = {"stop": "stop", "length": "length", "cancelled": "stop"}
SYSTEM_FINGERPRINT = "fp_draftless"


class SafeJSONResponse(JSONResponse):
    """JSON whose text may hold what a client sent, lone surrogates included (a field name
    quoted in an error): those are written as JSON escapes instead of failing to encode."""

    def render(self, content) -> bytes:
        return json.dumps(
            content, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode("utf-8", "backslashreplace")


def returned_tokens(tokens: list[TokenEvent], characters: int) -> int:
    """How many of ``tokens`` the first ``characters`` of their text reach into."""
    count = seen = 0
    for token in tokens:
        if seen >= characters:
            break
        seen += len(token.text)
        count += 1
    return count


def usage(prompt_tokens: int, done: DoneEvent, completion_tokens: int | None = None) -> dict:
    """OpenAI's usage; ``completion_tokens`` when a stop string cut the answer short."""
    stats = dict(done.stats)
    emitted = len(done.tokens) if completion_tokens is None else completion_tokens
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": emitted,
        "total_tokens": prompt_tokens + emitted,
        "draftless": {**stats, "finish_reason": done.finish_reason, "timing": dict(done.timing)},
    }


def provenance(tokens: list[TokenEvent]) -> dict:
    return {
        "tokens": [t.token for t in tokens],
        "texts": [t.text for t in tokens],
        "from_draft": [t.from_draft for t in tokens],
        "pass_index": [t.pass_index for t in tokens],
        "draft_position": [t.draft_position for t in tokens],
        "drafter": tokens[0].drafter if tokens else None,
    }


def _entry(item: TokenLogprob) -> dict:
    return {
        "token": item.text,
        "logprob": item.logprob,
        "bytes": list(item.raw or item.text.encode()),
    }


def _by_text(alternatives) -> dict[str, float]:
    """A text completion's alternatives, text to log-probability, best first: tokens that
    share a text (bytes of one character) keep the likelier's figure."""
    shown: dict[str, float] = {}
    for item in alternatives:
        shown.setdefault(item.text, item.logprob)
    return shown


def tool_calls(calls: list[dict]) -> list[dict]:
    """Engine tool calls in OpenAI's shape."""
    return [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for c in calls
    ]


def tool_call_deltas(deltas: list[dict]) -> list[dict]:
    """Tool-call progress in OpenAI's stream shape, one entry per call index: a call's
    first carries its ``id``, ``type`` and ``function.name``, then ``function.arguments``
    pieces."""
    shaped: dict[int, dict] = {}
    for delta in deltas:
        entry = shaped.setdefault(delta["index"], {"index": delta["index"], "function": {}})
        if "name" in delta:
            entry.update(id=delta["id"], type="function")
            entry["function"].update(name=delta["name"], arguments="")
        if "arguments" in delta:
            entry["function"]["arguments"] = (
                entry["function"].get("arguments", "") + delta["arguments"]
            )
    return list(shaped.values())


class Shaper:
    """Builds the JSON bodies of one response (chat or text completion)."""

    def __init__(
        self, chat: bool, model: str, chat_id: str | None = None, echo_logprobs: bool = False
    ):
        self.chat = chat
        self.model = model
        self.chat_id = chat_id  # the id to send with the next turn (None: no chat kept)
        self.echo_logprobs = echo_logprobs  # an echoed prompt's logprobs were asked for
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        # where the next token starts in a text completion's text, in characters: its
        # bytes so far decoded (a character split over tokens starts at its first)
        self.text_offset = 0
        self.offset_decoder = codecs.getincrementaldecoder("utf-8")("ignore")

    def logprobs(self, tokens: list[TokenEvent], prompt=None) -> dict | None:
        """OpenAI's ``logprobs`` of a choice for ``tokens``; None when none were asked for.
        ``prompt`` (a ``PromptEvent``, text completions' ``echo``): its tokens come first,
        the first with null figures (nothing comes before it)."""
        tokens = [t for t in tokens if t.logprob is not None]
        if prompt is not None and not self.chat:
            return self._echoed(prompt, tokens)
        if not tokens:
            return None
        if self.chat:
            return {
                "content": [
                    {**_entry(t.logprob), "top_logprobs": [_entry(top) for top in t.top_logprobs]}
                    for t in tokens
                ],
                "refusal": None,
            }
        offsets = []
        for t in tokens:
            offsets.append(self.text_offset)
            raw = t.logprob.raw or t.logprob.text.encode()
            self.text_offset += len(self.offset_decoder.decode(raw))
        return {
            "tokens": [t.logprob.text for t in tokens],
            "token_logprobs": [t.logprob.logprob for t in tokens],
            "top_logprobs": [_by_text(t.top_logprobs) for t in tokens],
            "text_offset": offsets,
        }

    def _echoed(self, prompt, tokens: list[TokenEvent]) -> dict:
        """A text completion's ``logprobs`` with the prompt's tokens before the answer's."""
        first, *rest = prompt.tokens
        self.text_offset += len(self.offset_decoder.decode(first.text.encode()))
        shown = self.logprobs(rest + tokens) or {
            "tokens": [],
            "token_logprobs": [],
            "top_logprobs": [],
            "text_offset": [],
        }
        return {
            "tokens": [first.text] + shown["tokens"],
            "token_logprobs": [None] + shown["token_logprobs"],
            "top_logprobs": [None] + shown["top_logprobs"],
            "text_offset": [0] + shown["text_offset"],
        }

    def _envelope(self, streamed: bool) -> dict:
        kind = "chat.completion" if self.chat else "text_completion"
        return {
            "id": self.id,
            "object": kind + (".chunk" if streamed and self.chat else ""),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
        }

    def chunk(
        self,
        text: str,
        finish: str | None = None,
        extra: dict | None = None,
        first: bool = False,
        tokens: list[TokenEvent] = (),
        deltas: list[dict] = (),
        prompt=None,
    ) -> dict:
        """One streamed chunk; ``first`` carries the role (with content null where its pass
        gave no text, as OpenAI sends it where a tool call comes first); ``deltas``:
        tool-call progress (``ToolCallEvent.deltas``); ``prompt``: a ``PromptEvent`` to
        echo before the text (a text completion's ``echo``)."""
        logprobs = self.logprobs(list(tokens), prompt if self.echo_logprobs else None)
        if prompt is not None and not self.chat:
            text = prompt.text + text
        if self.chat:
            delta = {}
            if first:
                delta["role"] = "assistant"
            if first:  # null until there is text (a tool call may come first)
                delta["content"] = text or None
            elif text:
                delta["content"] = text
            if deltas:
                delta["tool_calls"] = tool_call_deltas(deltas)
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": logprobs}
        body = {**self._envelope(True), "choices": [choice]}
        if first and self.chat_id:
            body["chat_id"] = self.chat_id
        if extra:
            body.update(extra)
        return body

    def usage_chunk(self, use: dict) -> dict:
        """The last streamed chunk when the client asked for usage: no choices, only usage."""
        return {**self._envelope(True), "choices": [], "usage": use}

    def whole(
        self,
        text: str,
        finish: str,
        tokens: list[TokenEvent],
        use: dict,
        calls: list[dict] = (),
        prompt=None,
    ) -> dict:
        """The whole response; ``prompt``: a ``PromptEvent`` to echo before the text."""
        logprobs = self.logprobs(
            tokens[: use["completion_tokens"]], prompt if self.echo_logprobs else None
        )
        if prompt is not None and not self.chat:
            text = prompt.text + text
        if self.chat:
            message = {"role": "assistant", "content": text}
            if calls:
                message.update(content=text or None, tool_calls=tool_calls(calls))
            choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": logprobs}
        body = {
            **self._envelope(False),
            "choices": [choice],
            "usage": use,
            "draftless": provenance(tokens),
        }
        if self.chat_id:
            body["chat_id"] = self.chat_id
        return body
