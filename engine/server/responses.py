"""Engine events → OpenAI response bodies, with Draftless's provenance alongside.

Each streamed chunk holds the tokens of one target pass; its ``draftless`` object says
which pass emitted them and which were accepted drafts. The last chunk's ``usage`` carries
the engine's statistics (``usage.draftless``: tokens per pass, acceptance, per position).
"""

from __future__ import annotations

import time
import uuid

from ..events import DoneEvent, TokenEvent

FINISH = {"stop": "stop", "length": "length", "cancelled": "stop"}


class StopMatcher:
    """Cuts the text at the first stop string, holding back text that may begin one."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = stops
        self.held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        if not self.stops:
            return text
        self.held += text
        cuts = [self.held.find(s) for s in self.stops if s in self.held]
        if cuts:
            self.stopped = True
            out, self.held = self.held[:min(cuts)], ""
            return out
        keep = max((k for s in self.stops for k in range(1, len(s))
                    if self.held.endswith(s[:k])), default=0)
        out = self.held[:len(self.held) - keep]
        self.held = self.held[len(out):]
        return out

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out


def usage(prompt_tokens: int, done: DoneEvent) -> dict:
    stats = dict(done.stats)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": len(done.tokens),
            "total_tokens": prompt_tokens + len(done.tokens),
            "draftless": {**stats, "finish_reason": done.finish_reason,
                          "timing": dict(done.timing)}}


def provenance(tokens: list[TokenEvent]) -> dict:
    return {"tokens": [t.token for t in tokens], "texts": [t.text for t in tokens],
            "from_draft": [t.from_draft for t in tokens],
            "pass_index": [t.pass_index for t in tokens],
            "draft_position": [t.draft_position for t in tokens],
            "drafter": tokens[0].drafter if tokens else None}


class Shaper:
    """Builds the JSON bodies of one response (chat or text completion)."""

    def __init__(self, chat: bool, model: str):
        self.chat = chat
        self.model = model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())

    def _envelope(self, streamed: bool) -> dict:
        kind = "chat.completion" if self.chat else "text_completion"
        return {"id": self.id, "object": kind + (".chunk" if streamed and self.chat else ""),
                "created": self.created, "model": self.model}

    def chunk(self, text: str, finish: str | None = None, extra: dict | None = None,
              first: bool = False) -> dict:
        if self.chat:
            delta = {"content": text}
            if first:
                delta["role"] = "assistant"
            choice = {"index": 0, "delta": delta if (text or first) else {}, "finish_reason": finish,
                      "logprobs": None}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        body = {**self._envelope(True), "choices": [choice]}
        if extra:
            body.update(extra)
        return body

    def whole(self, text: str, finish: str, tokens: list[TokenEvent], use: dict) -> dict:
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": finish, "logprobs": None}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        return {**self._envelope(False), "choices": [choice], "usage": use,
                "draftless": provenance(tokens)}
