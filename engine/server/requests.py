"""OpenAI request bodies → engine requests, with OpenAI-style errors for bad input."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from ..errors import EngineError
from ..formats.schemas import check_schema, forced_call_schema
from ..formats.stop_strings import MAX_STOP_CHARS, MAX_STOPS, valid_stop_strings
from ..settings import (
    LOGPROBS_RANGE,
    MAX_TOKENS_RANGE,
    DraftSettings,
    GenerationRequest,
    SamplingSettings,
)

DRAFT_TYPES = {
    "drafter": "string",
    "draft_count": "integer",
    "ngram_order": "integer",
    "ngram_min": "integer",
    "adaptive": "boolean",
    "policy": "string",
    "options": "object",
}
ROLES = {"system", "user", "assistant", "developer", "tool"}
# Every field a request may carry, with its JSON type where the server reads it (None: read
# below); the rest get a 400 (a typo must not pass silently).
FIELD_TYPES = {
    "model": "string",
    "stream": "boolean",
    "stream_options": "object",
    "user": "string",
    "n": "integer",
    "logprobs": None,
    "top_logprobs": "integer",
    "frequency_penalty": "number",
    "presence_penalty": "number",
    "max_tokens": "integer",
    "max_completion_tokens": "integer",
    "temperature": "number",
    "top_p": "number",
    "top_k": "integer",
    "min_p": "number",
    "seed": "integer",
    "repetition_penalty": "number",
    "stop": None,
    "draftless": "object",
    "messages": None,
    "prompt": None,
    "chat_id": "string",
    "echo": "boolean",
    "suffix": "string",
    "metadata": "object",
    "store": "boolean",
    "parallel_tool_calls": "boolean",
    "response_format": "object",
    "service_tier": "string",
    "logit_bias": "object",
    "tools": "array",
    "functions": "array",
    "tool_choice": None,
    "function_call": None,
    # hints OpenAI documents as optional to honour: checked for type, then ignored
    "reasoning_effort": "string",
    "verbosity": "string",
    "prediction": "object",
    "prompt_cache_key": "string",
    "safety_identifier": "string",
    # accepted while they ask for nothing this server lacks (see ``_unsupported_asks``)
    "modalities": "array",
    "audio": "object",
    "web_search_options": "object",
}
# what the server answers in: a ``modalities`` list may name only these
TEXT_MODALITIES = ["text"]
MAX_CHAT_ID_CHARS = 256
MAX_TEMPERATURE = 2.0  # OpenAI's bound (the engine itself would take up to 5)
_JSON_TYPES = {
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "object": (dict,),
    "array": (list,),
}


class ApiError(Exception):
    """An error the client caused (or can act on), sent as OpenAI's error JSON."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        retry_after: int = 1,
    ):
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = (
            status,
            message,
            kind,
            code,
            param,
        )
        self.retry_after = retry_after  # seconds, for a 429 or 503: when to try again

    def headers(self) -> dict | None:
        """Retry-After for a 429 or 503."""
        return {"Retry-After": str(self.retry_after)} if self.status in (429, 503) else None

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


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
    include_usage: bool = False  # stream_options.include_usage: a last chunk with usage
    echo: bool = False  # a text completion's answer begins with its prompt
    # a text completion's further prompts, answered in turn after ``generation``'s
    more: tuple[GenerationRequest, ...] = ()


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def json_type(value) -> str:
    for name, kinds in _JSON_TYPES.items():
        if isinstance(value, kinds):
            return name
    return "null" if value is None else type(value).__name__


def typed(value, kind: str, name: str):
    """``value`` if it is None or of the JSON type ``kind``, else a 400 naming ``name``.
    Booleans are not numbers here (JSON keeps them apart), and strings must be valid text."""
    if value is None:
        return None
    if isinstance(value, bool) != (kind == "boolean") or not isinstance(value, _JSON_TYPES[kind]):
        raise _bad(
            f"'{name}' must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}; "
            f"got {json_type(value)}.",
            name,
        )
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad(
                f"'{name}' holds a lone surrogate (an unpaired \\ud800-\\udfff escape); "
                "send valid Unicode text.",
                name,
            ) from None
    return value


def _text_of(content, index: int) -> str:
    """A message's content: a string or OpenAI's list of text parts."""
    param = f"messages[{index}].content"
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                raise _bad("Only text content parts are supported.", param)
            texts.append(typed(part["text"], "string", param))
        return "".join(texts)
    if content is not None and not isinstance(content, str):
        raise _bad("Message content must be a string or a list of text parts.", param)
    return typed(content, "string", param) or ""


def _arguments(raw, param: str) -> dict:
    """A tool call's arguments as the chat template takes them: an object (OpenAI sends
    JSON text, Ollama an object)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise _bad("Tool call arguments must be JSON text of an object.", param) from None
    if not isinstance(raw, dict):
        raise _bad("Tool call arguments must be an object.", param)
    return raw


def _tool_calls(raw, index: int) -> list[dict]:
    """An assistant message's earlier tool calls, for the chat template."""
    param = f"messages[{index}].tool_calls"
    if not isinstance(raw, list):
        raise _bad(
            "'tool_calls' must be a list of {\"function\": {\"name\", \"arguments\"}}.", param
        )
    calls = []
    for call in raw:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _bad("Each tool call needs a function with a name.", param)
        calls.append(
            {
                "id": typed(call.get("id"), "string", param) or "",
                "type": "function",
                "function": {
                    "name": typed(function["name"], "string", param),
                    "arguments": _arguments(function.get("arguments"), param),
                },
            }
        )
    return calls


def messages_of(raw) -> list[dict]:
    """Chat messages (OpenAI's or Ollama's) as the chat template takes them."""
    if not isinstance(raw, list) or not raw:
        raise _bad(
            "'messages' must be a non-empty list of {\"role\": …, \"content\": …} objects.",
            "messages",
        )
    messages = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict):
            raise _bad(
                "Each message must be an object with 'role' and 'content'.", f"messages[{index}]"
            )
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise _bad(
                f"Unsupported role {role!r}; use system, user, assistant or tool.",
                f"messages[{index}].role",
            )
        if message.get("images"):  # Ollama's form of image input
            raise _bad("Only text content is supported.", f"messages[{index}].images")
        shaped = {
            "role": "system" if role == "developer" else role,
            "content": _text_of(message.get("content"), index),
        }
        if role == "assistant" and message.get("tool_calls"):
            shaped["tool_calls"] = _tool_calls(message["tool_calls"], index)
        for name in ("tool_call_id", "name", "tool_name"):
            if role == "tool" and message.get(name) is not None:
                shaped[name] = typed(message[name], "string", f"messages[{index}].{name}")
        messages.append(shaped)
    if not any(m["content"].strip() or m.get("tool_calls") for m in messages):
        raise _bad(
            "Every message's 'content' is empty: send at least one message with text to answer.",
            "messages",
        )
    return messages


def _prompt_of(raw, param: str) -> str | tuple[int, ...]:
    """One prompt: text, or the model's token ids."""
    if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
        if any(isinstance(t, bool) or t < 0 for t in raw):
            raise _bad("A prompt of token ids holds ids of 0 or more.", param)
        return tuple(raw)
    if not isinstance(raw, str):
        raise _bad("'prompt' must be a string, a list of token ids, or a list of either.", param)
    if not typed(raw, "string", param).strip():
        raise _bad("'prompt' is empty: send some text to continue.", param)
    return raw


def _prompts(raw) -> list[str | tuple[int, ...]]:
    """The prompts of a text completion, answered in turn: a string, a list of token ids,
    or a non-empty list of strings or of token-id lists."""
    if raw is None:
        raise _bad("'prompt' is missing: send the text to continue.", "prompt")
    if isinstance(raw, list) and raw and all(isinstance(p, (str, list)) for p in raw):
        return [_prompt_of(p, f"prompt[{i}]") for i, p in enumerate(raw)]
    return [_prompt_of(raw, "prompt")]


def _stop(raw) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not valid_stop_strings(raw):
        raise _bad(
            f"'stop' must be a non-empty string or a list of up to {MAX_STOPS} of them, "
            f"each at most {MAX_STOP_CHARS} characters.",
            "stop",
        )
    return tuple(typed(s, "string", "stop") for s in raw)


def _draft(raw, default: DraftSettings) -> DraftSettings:
    if raw is None:
        return default
    unknown = set(raw) - set(DRAFT_TYPES)
    if unknown:
        raise _bad(
            f"Unknown draftless setting(s): {', '.join(sorted(unknown))}. "
            f"Known: {', '.join(sorted(DRAFT_TYPES))}.",
            "draftless",
        )
    values = {
        name: typed(value, DRAFT_TYPES[name], f"draftless.{name}")
        for name, value in raw.items()
        if value is not None
    }
    return replace(default, **values)


SAMPLING = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
)


def _sampling(body: dict, default: SamplingSettings) -> SamplingSettings:
    if body.get("n") not in (None, 1):
        raise _bad("Only n=1 is supported.", "n")
    for name in ("logit_bias", "suffix", "functions", "function_call"):
        if body.get(name) not in (None, False, [], {}, "", 0, "none"):
            raise _bad(f"'{name}' is not supported by this server.", name)
    values = {name: body[name] for name in SAMPLING if body.get(name) is not None}
    if values.get("temperature", 0) > MAX_TEMPERATURE:
        raise _bad(
            f"temperature must be a number from 0 to {MAX_TEMPERATURE:g}; "
            f"got {values['temperature']!r}.",
            "temperature",
        )
    return replace(default, **values)


def json_schema_of(raw) -> dict | None:
    """The JSON schema a ``response_format`` asks the answer to follow; None for free text."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    if raw is None or kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema" and isinstance(raw.get("json_schema"), dict):
        schema = raw["json_schema"].get("schema")
        typed(schema, "object", "response_format.json_schema.schema")
        return checked_schema(schema or {}, "response_format")
    raise _bad(
        "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} "
        "or {\"type\": \"json_schema\", \"json_schema\": {\"name\": …, "
        "\"schema\": …}}.",
        "response_format",
    )


def checked_schema(schema: dict, field: str) -> dict:
    """``schema`` marked as checked (the engine does not check it again) if it is within
    the limits of engine/formats/schemas.py, else a 400 naming them."""
    try:
        return check_schema(schema, field)
    except EngineError as error:
        raise _bad(str(error), field) from None


def _logprobs(body: dict, chat: bool) -> int | None:
    """How many alternatives per token to report; None: no log-probabilities. Chat takes
    ``logprobs: true`` and ``top_logprobs``; text completions ``logprobs: N``."""
    low, high = LOGPROBS_RANGE
    wanted, top = body.get("logprobs"), body.get("top_logprobs")
    if chat:
        typed(wanted, "boolean", "logprobs")
        if top is not None and not low <= top <= high:
            raise _bad(f"'top_logprobs' must be from {low} to {high}.", "top_logprobs")
        if top is not None and not wanted:
            raise _bad("'top_logprobs' needs 'logprobs': true.", "top_logprobs")
        return (top or 0) if wanted else None
    if top is not None:
        raise _bad(
            "Text completions take 'logprobs': N for N alternatives per token.", "top_logprobs"
        )
    typed(wanted, "integer", "logprobs")
    if wanted is not None and not low <= wanted <= high:
        raise _bad(f"'logprobs' must be from {low} to {high}.", "logprobs")
    return wanted


def tools_of(raw, choice, chat: bool = True) -> tuple[list | None, tuple[str, ...] | None]:
    """(the function tools offered to the model, None for none; the names of those one of
    which it must call, None when it decides) from ``tools`` and ``tool_choice``."""
    if not raw or choice == "none":
        if choice not in (None, "auto", "none"):
            raise _bad("'tool_choice' forces a call, but no 'tools' were given.", "tool_choice")
        return None, None
    if not chat:
        raise _bad("'tools' are for chat completions.", "tools")
    tools = []
    for tool in raw:
        function = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
        ):
            raise _bad(
                "Each tool must be {\"type\": \"function\", \"function\": "
                "{\"name\": …, \"parameters\": …}}.",
                "tools",
            )
        typed(function.get("description"), "string", "tools.function.description")
        typed(function.get("parameters"), "object", "tools.function.parameters")
        tools.append({"type": "function", "function": function})
    names = tuple(tool["function"]["name"] for tool in tools)
    if choice in (None, "auto"):
        return tools, None
    if choice == "required":
        forced = names
    else:
        named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        if not (isinstance(named, str) and named in names):
            raise _bad(
                "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                "{\"type\": \"function\", \"function\": {\"name\": …}} naming one of the "
                "tools.",
                "tool_choice",
            )
        forced = (named,)
    checked_schema(forced_call_schema(tools, forced), "tools")
    return tools, forced


def _unsupported_asks(body: dict) -> None:
    """A 400 for fields that, set, ask for output this server cannot give (audio, web
    search); null or text-only values are what SDKs and proxies send by default."""
    for name in ("audio", "web_search_options"):
        if body.get(name) is not None:
            raise _bad(
                f"'{name}' is not supported by this server (send null or leave it out).", name
            )
    modalities = body.get("modalities")
    if modalities is not None and any(m not in TEXT_MODALITIES for m in modalities):
        raise _bad(
            "This server answers in text only: 'modalities' may be [\"text\"].", "modalities"
        )


def check_fields(body, fields: dict) -> None:
    """A 400 unless ``body`` is a JSON object whose every field is one of ``fields``, of the
    JSON type named there (None: checked where it is read)."""
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    unknown = set(body) - set(fields)
    if unknown:
        raise _bad(f"Unsupported field(s): {', '.join(sorted(unknown))}.")
    for name, kind in fields.items():
        if kind is not None and name in body:
            typed(body[name], kind, name)


def _max_tokens(body: dict, chat: bool, default: int) -> int:
    """The answer's token limit (``max_completion_tokens``, else ``max_tokens``); 0, for a
    text completion, reads the prompt alone."""
    value = body.get("max_completion_tokens")  # a present null defers to max_tokens
    param = "max_completion_tokens"
    if value is None:
        value, param = body.get("max_tokens"), "max_tokens"
    if value is None:
        return default
    low, high = (1 if chat else 0), MAX_TOKENS_RANGE[1]
    if not low <= value <= high:
        raise _bad(f"{param} must be an integer from {low} to {high}; got {value!r}.", param)
    return value


def _engine_param(message: str) -> str | None:
    """The field an engine error names first ("top_p must be …"), where it is one."""
    name = message.split(" ", 1)[0]
    if name in FIELD_TYPES:
        return name
    return f"draftless.{name}" if name in DRAFT_TYPES else None


def parse(body, chat: bool, defaults: Defaults) -> ParsedRequest:
    """Validate an OpenAI body; raise ApiError (400) for anything the engine cannot honour."""
    check_fields(body, FIELD_TYPES)
    _unsupported_asks(body)
    echo = bool(typed(body.get("echo"), "boolean", "echo"))
    if echo and chat:
        raise _bad("'echo' is for text completions.", "echo")
    prompts = [None] if chat else _prompts(body.get("prompt"))
    if len(body.get("chat_id") or "") > MAX_CHAT_ID_CHARS:
        raise _bad(f"'chat_id' must be at most {MAX_CHAT_ID_CHARS} characters.", "chat_id")
    if len(prompts) > 1 and body.get("chat_id") is not None:
        raise _bad("A list of prompts keeps no chat: leave 'chat_id' out.", "chat_id")
    options = body.get("stream_options") or {}
    include_usage = typed(options.get("include_usage"), "boolean", "stream_options.include_usage")
    tools, forced = tools_of(body.get("tools"), body.get("tool_choice"), chat)
    json_schema = json_schema_of(body.get("response_format"))
    if forced and json_schema is not None:
        raise _bad(
            "A forced 'tool_choice' and a JSON 'response_format' cannot both hold.", "tool_choice"
        )
    logprobs = _logprobs(body, chat)
    request = GenerationRequest(
        messages=messages_of(body.get("messages")) if chat else None,
        raw=not chat,
        model=defaults.model,
        chat_id=body.get("chat_id"),
        max_tokens=_max_tokens(body, chat, defaults.max_tokens),
        draft=_draft(body.get("draftless"), defaults.draft),
        sampling=_sampling(body, defaults.sampling),
        logprobs=logprobs,
        prompt_logprobs=(logprobs or 0) if echo else None,
        tools=tools,
        forced_tools=forced,
        parallel_tool_calls=body.get("parallel_tool_calls") is not False,
        json_schema=json_schema,
    )
    requests = []
    for prompt in prompts:
        asked = request
        if isinstance(prompt, tuple):
            asked = replace(request, prompt_ids=prompt)
        elif prompt is not None:
            asked = replace(request, prompt=prompt)
        try:
            requests.append(asked.validated())
        except (EngineError, TypeError, ValueError) as error:
            raise _bad(str(error), _engine_param(str(error))) from None
    return ParsedRequest(
        requests[0],
        bool(body.get("stream")),
        _stop(body.get("stop")),
        bool(include_usage),
        echo,
        tuple(requests[1:]),
    )
