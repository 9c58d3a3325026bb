"""Ollama's API over the same service: ``/api/chat``, ``/api/generate``, ``/api/tags``,
``/api/show``, ``/api/ps``, ``/api/version``.

An Ollama body is translated into the OpenAI body it means and checked by the same strict
``requests.parse``; the answer is the same ``Answer`` run (the same queue, key and Guard),
shaped as Ollama's NDJSON lines or one object. Errors are Ollama's ``{"error": "…"}``.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone

from fastapi.responses import JSONResponse

from ..events import DoneEvent, ErrorEvent, PassEvent
from ..models import size_text
from .requests import ApiError, check_fields, checked_schema, typed
from .responses import SafeJSONResponse, Shaper

log = logging.getLogger("engine.server")
# the Ollama API version whose shapes these routes follow (clients compare against it)
VERSION = "0.12.0"
FIELDS = {
    "model": "string",
    "messages": None,
    "prompt": "string",
    "system": "string",
    "stream": "boolean",
    "options": "object",
    "format": None,
    "keep_alive": None,
    "tools": "array",
    "think": None,
    "raw": "boolean",
    "logprobs": "boolean",
    "top_logprobs": "integer",
    "images": None,
    "suffix": "string",
    "template": "string",
    "context": "array",
    "draftless": "object",
    "chat_id": "string",
    "name": "string",  # the older spelling of "model"
}
# option → (OpenAI field, JSON type)
OPTIONS = {
    "temperature": ("temperature", "number"),
    "top_p": ("top_p", "number"),
    "top_k": ("top_k", "integer"),
    "min_p": ("min_p", "number"),
    "seed": ("seed", "integer"),
    "num_predict": ("max_tokens", "integer"),
    "stop": ("stop", "array"),
    "repeat_penalty": ("repetition_penalty", "number"),
    "presence_penalty": ("presence_penalty", "number"),
    "frequency_penalty": ("frequency_penalty", "number"),
}
# options about Ollama's own runtime, with no effect on the answer here
IGNORED_OPTIONS = {
    "num_ctx": "integer",
    "num_batch": "integer",
    "num_gpu": "integer",
    "main_gpu": "integer",
    "num_thread": "integer",
    "use_mmap": "boolean",
    "low_vram": "boolean",
    "numa": "boolean",
    "num_keep": "integer",
}


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def error(error: ApiError) -> JSONResponse:
    return SafeJSONResponse(
        {"error": error.message}, status_code=error.status, headers=error.headers()
    )


def model_name(body) -> str | None:
    """The model a body names: ``model``, or ``name`` as older clients send it."""
    if not isinstance(body, dict):
        return None
    return typed(body.get("model"), "string", "model") or typed(body.get("name"), "string", "name")


def now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def loading(body, chat: bool) -> str | None:
    """How Ollama's clients load or unload a model, with nothing to answer: "load" for a
    generate without a prompt or a chat without messages, "unload" where ``keep_alive`` is
    0 too (this server keeps its one model loaded either way); None for a request to answer."""
    if not isinstance(body, dict) or body.get("messages" if chat else "prompt"):
        return None
    return "unload" if body.get("keep_alive") in (0, "0", "0s", "0m") else "load"


def loaded_answer(model: str, chat: bool, reason: str) -> dict:
    """The answer to a load or unload request."""
    body = {"model": model, "created_at": now()}
    if chat:
        body["message"] = {"role": "assistant", "content": ""}
    else:
        body["response"] = ""
    return {**body, "done": True, "done_reason": reason}


def translate(body, chat: bool) -> tuple[dict, bool]:
    """(the OpenAI body an Ollama body means, whether it is a chat)."""
    check_fields(body, FIELDS)
    for name in ("images", "suffix", "template", "context"):
        if body.get(name):
            raise _bad(f"'{name}' is not supported by this server.", name)
    if body.get("think") not in (None, False):
        raise _bad("'think' is not supported by this server.", "think")
    out = {"stream": body.get("stream", True)}  # Ollama streams unless told not to
    if body.get("format") == "json":
        out["response_format"] = {"type": "json_object"}
    elif isinstance(body.get("format"), dict):
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "format", "schema": checked_schema(body["format"], "format")},
        }
    elif body.get("format") not in (None, ""):
        raise _bad("'format' must be \"json\" or a JSON schema.", "format")
    for name in ("draftless", "chat_id"):
        if name in body:
            out[name] = body[name]
    if body.get("logprobs"):
        out.update(logprobs=True, top_logprobs=body.get("top_logprobs") or 0)
    options = body.get("options") or {}
    for name, value in options.items():
        if name in IGNORED_OPTIONS:
            typed(value, IGNORED_OPTIONS[name], f"options.{name}")
            continue
        if name not in OPTIONS:  # as Ollama does: the answer goes on without it
            log.warning(
                "Ignoring the Ollama option %r: this server does not use it (it uses %s).",
                name,
                ", ".join(sorted(OPTIONS)),
            )
            continue
        field, kind = OPTIONS[name]
        if typed(value, kind, f"options.{name}") is not None:
            out[field] = value
    if out.get("max_tokens") is not None and out["max_tokens"] < 0:  # -1, -2: no limit
        del out["max_tokens"]
    if chat:
        out["messages"] = body.get("messages")
        if body.get("tools"):
            out["tools"] = body["tools"]
        return out, True
    if body.get("tools"):
        raise _bad("'tools' are for /api/chat.", "tools")
    if body.get("raw"):
        if body.get("system"):
            raise _bad("'system' has no place in a raw prompt.", "system")
        if "logprobs" in out:  # a text completion's form: logprobs = alternatives per token
            out["logprobs"] = out.pop("top_logprobs")
        return {**out, "prompt": body.get("prompt")}, False
    system = [{"role": "system", "content": body["system"]}] if body.get("system") else []
    return {**out, "messages": system + [{"role": "user", "content": body.get("prompt")}]}, True


def _calls(calls: list[dict]) -> list[dict]:
    return [
        {"function": {"name": c["name"], "arguments": json.loads(c["arguments"] or "{}")}}
        for c in calls
    ]


class OllamaShaper:
    """Ollama's bodies for one answer: ``message`` (chat) or ``response`` (generate)."""

    def __init__(self, chat: bool, model: str, chat_id: str | None = None):
        self.chat, self.model = chat, model
        self.chat_id = chat_id  # the id to send with the next turn (None: no chat kept)
        self.started = time.perf_counter_ns()
        self.logprobs = Shaper(True, model).logprobs  # OpenAI's chat entries are Ollama's too

    def body(self, text: str, tokens=(), calls=()) -> dict:
        body = {"model": self.model, "created_at": now()}
        if self.chat:
            body["message"] = {"role": "assistant", "content": text}
            if calls:
                body["message"]["tool_calls"] = _calls(list(calls))
        else:
            body["response"] = text
        logprobs = self.logprobs(list(tokens))
        if logprobs:
            body["logprobs"] = logprobs["content"]
        return body

    def done(self, body: dict, done: DoneEvent, finish: str, completion_tokens: int) -> dict:
        timing = done.timing
        return {
            **body,
            **({"chat_id": self.chat_id} if self.chat_id else {}),
            "done": True,
            "done_reason": "length" if finish == "length" else "stop",
            "total_duration": time.perf_counter_ns() - self.started,
            "load_duration": 0,
            "prompt_eval_count": timing.get("prompt_tokens", 0),
            "prompt_eval_duration": int(timing.get("prefill_s", 0) * 1e9),
            "eval_count": completion_tokens,
            "eval_duration": int(timing.get("decode_s", 0) * 1e9),
        }


async def lines(answer, shaper: OllamaShaper):
    """The streamed answer: one JSON line per pass, then the ``done`` line."""
    called = False
    async for piece in answer.read():
        event = piece.event
        if isinstance(event, PassEvent):
            called = called or bool(piece.calls)
            # a pass whose text is held back (a possible tool call) sends no empty line
            if piece.text or piece.calls or (answer.logprobs and piece.returned):
                yield (
                    json.dumps(
                        {
                            **shaper.body(piece.text, piece.tokens[: piece.returned], piece.calls),
                            "done": False,
                        }
                    )
                    + "\n"
                )
        elif isinstance(event, DoneEvent):
            yield (
                json.dumps(
                    shaper.done(
                        shaper.body(piece.text),
                        event,
                        answer.finish(event, called),
                        piece.completion_tokens,
                    )
                )
                + "\n"
            )
            return
        elif isinstance(event, ErrorEvent):
            yield json.dumps({"error": event.message}) + "\n"
            return


async def whole(answer, shaper: OllamaShaper) -> dict:
    text, tokens, calls, last = await answer.collect()
    body = shaper.body(text, tokens[: last.completion_tokens], calls)
    return shaper.done(
        body, last.event, answer.finish(last.event, bool(calls)), last.completion_tokens
    )


def model_details(facts: dict) -> dict:
    architecture = facts.get("architecture", "")
    return {
        "parent_model": "",
        "format": "mlx",
        "family": architecture,
        "families": [architecture] if architecture else None,
        "parameter_size": size_text(facts["parameters"]) if "parameters" in facts else "",
        "quantization_level": facts.get("weights", "").split(" ")[0],
    }


def model_entry(name: str, facts: dict) -> dict:
    """The model as ``/api/tags`` lists it."""
    return {
        "name": name,
        "model": name,
        "modified_at": now(),
        "size": facts.get("bytes", 0),
        "digest": "",
        "details": model_details(facts),
    }


def running_entry(name: str, facts: dict) -> dict:
    """The model as ``/api/ps`` lists it: loaded for as long as the server runs."""
    return {
        **model_entry(name, facts),
        "expires_at": "9999-12-31T23:59:59Z",
        "size_vram": facts.get("bytes", 0),
        "context_length": facts.get("context_length") or 0,
    }


def capabilities(facts: dict) -> list[str]:
    """Every model calls tools: through its chat template or the generic format."""
    return ["completion", "tools"] if facts.get("tool_format") else ["completion"]


def show(facts: dict) -> dict:
    architecture = facts.get("architecture", "")
    info = {"general.architecture": architecture}
    if "parameters" in facts:
        info["general.parameter_count"] = facts["parameters"]
    if facts.get("context_length"):
        info[f"{architecture}.context_length"] = facts["context_length"]
    return {
        "modelfile": "",
        "parameters": "",
        "template": "",
        "details": model_details(facts),
        "model_info": info,
        "capabilities": capabilities(facts),
        "modified_at": now(),
    }
