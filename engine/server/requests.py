"""OpenAI request bodies → engine requests, with OpenAI-style errors for bad input."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import EngineError
from ..settings import DraftSettings, GenerationRequest, SamplingSettings

DRAFT_KEYS = {"drafter", "draft_count", "ngram_order", "ngram_min", "adaptive", "options"}
ROLES = {"system", "user", "assistant", "developer"}
# Every field a request may carry; the rest get a 400 (a typo must not pass silently).
KNOWN_FIELDS = {"model", "stream", "stream_options", "user", "n", "logprobs", "top_logprobs",
           "frequency_penalty", "presence_penalty", "max_tokens", "max_completion_tokens",
           "temperature", "top_p", "top_k", "min_p", "seed", "repetition_penalty", "stop",
           "draftless", "messages", "prompt", "chat_id", "echo", "suffix", "metadata", "store",
           "parallel_tool_calls", "response_format", "service_tier", "logit_bias"}


class ApiError(Exception):
    """An error the client caused (or can act on), sent as OpenAI's error JSON."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code}}


@dataclass(frozen=True)
class Defaults:
    """What the command line set: used where a request says nothing."""

    model: str | None = None
    draft: DraftSettings = DraftSettings()
    sampling: SamplingSettings = SamplingSettings()
    max_tokens: int = 256


@dataclass(frozen=True)
class ParsedRequest:
    generation: GenerationRequest
    stream: bool
    stop: tuple[str, ...]
    client: str | None


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def _text_of(content, index: int) -> str:
    """A message's content: a string or OpenAI's list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"
                    and isinstance(part.get("text"), str)):
                raise _bad("Only text content parts are supported.", f"messages[{index}].content")
            texts.append(part["text"])
        return "".join(texts)
    if content is None:
        return ""
    raise _bad("Message content must be a string or a list of text parts.",
               f"messages[{index}].content")


def _messages(raw) -> list[dict[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' must be a non-empty list.", "messages")
    messages = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict):
            raise _bad("Each message must be an object with 'role' and 'content'.", f"messages[{index}]")
        role = message.get("role")
        if role not in ROLES:
            raise _bad(f"Unsupported role {role!r}; use system, user or assistant.",
                       f"messages[{index}].role")
        messages.append({"role": "system" if role == "developer" else role,
                         "content": _text_of(message.get("content"), index)})
    return messages


def _prompt(raw) -> str:
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
        raw = raw[0]
    if not isinstance(raw, str):
        raise _bad("'prompt' must be one string (batches of prompts are not supported).", "prompt")
    return raw


def _stop(raw) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if (not isinstance(raw, list) or len(raw) > 4
            or not all(isinstance(s, str) and s for s in raw)):
        raise _bad("'stop' must be a non-empty string or a list of up to 4 of them.", "stop")
    return tuple(raw)


def _draft(raw, default: DraftSettings) -> DraftSettings:
    if raw is None:
        return default
    if not isinstance(raw, dict):
        raise _bad("'draftless' must be an object: {\"drafter\": …, \"draft_count\": …, "
                   "\"ngram_order\": …}.", "draftless")
    unknown = set(raw) - DRAFT_KEYS
    if unknown:
        raise _bad(f"Unknown draftless setting(s): {', '.join(sorted(unknown))}. "
                   f"Known: {', '.join(sorted(DRAFT_KEYS))}.", "draftless")
    if "options" in raw and not isinstance(raw["options"], dict):
        raise _bad("'draftless.options' must be an object.", "draftless.options")
    return replace(default, **raw)


def _sampling(body: dict, default: SamplingSettings) -> SamplingSettings:
    for name in ("frequency_penalty", "presence_penalty"):
        if body.get(name) not in (None, 0, 0.0):
            raise _bad(f"'{name}' is not supported; use 'repetition_penalty'.", name)
    if body.get("n") not in (None, 1):
        raise _bad("Only n=1 is supported.", "n")
    for name in ("logit_bias", "logprobs", "top_logprobs", "echo", "suffix", "response_format"):
        if body.get(name):
            raise _bad(f"'{name}' is not supported by this server.", name)
    values = {name: body[name] for name in ("temperature", "top_p", "top_k", "min_p",
                                            "repetition_penalty", "seed") if body.get(name) is not None}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _bad(f"'{name}' must be a number.", name)
    for name in ("top_k", "seed"):
        if name in values and not isinstance(values[name], int):
            raise _bad(f"'{name}' must be an integer.", name)
    return replace(default, **values)


def parse(body, chat: bool, defaults: Defaults, peer: str | None) -> ParsedRequest:
    """Validate an OpenAI body; raise ApiError (400) for anything the engine cannot honour."""
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    unknown = set(body) - KNOWN_FIELDS
    if unknown:
        raise _bad(f"Unsupported field(s): {', '.join(sorted(unknown))}.")
    if chat:
        messages, prompt = _messages(body.get("messages")), None
    else:
        messages, prompt = None, _prompt(body.get("prompt"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = defaults.max_tokens
    chat_id = body.get("chat_id")
    if chat_id is not None and not isinstance(chat_id, str):
        raise _bad("'chat_id' must be a string.", "chat_id")
    request = GenerationRequest(
        messages=messages, prompt=prompt, raw=not chat, model=defaults.model, chat_id=chat_id,
        max_tokens=max_tokens, draft=_draft(body.get("draftless"), defaults.draft),
        sampling=_sampling(body, defaults.sampling))
    try:
        request = request.validated()
    except (EngineError, TypeError) as error:
        raise _bad(str(error)) from None
    user = body.get("user")
    return ParsedRequest(request, bool(body.get("stream", False)), _stop(body.get("stop")),
                         user if isinstance(user, str) and user else peer)
