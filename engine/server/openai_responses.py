"""OpenAI's Responses API (``POST /v1/responses``) over the chat path: text, streaming,
function tools and structured output (``text.format``).

A Responses body is translated into the chat completions body it means (``chat_body``)
and checked by the same ``requests.parse``; the answer is the same ``Answer`` run, shaped
as a ``response`` object or as its stream of typed events (``response.created``, the
output items' events, ``response.completed``). Nothing is stored: ``previous_response_id``
and ``background`` are refused; send the conversation as ``input`` items.
"""

from __future__ import annotations

import json
import time
import uuid

from ..events import DoneEvent, ErrorEvent, PassEvent
from .requests import ApiError, check_fields, typed

FIELDS = {
    "model": "string",
    "input": None,
    "instructions": "string",
    "stream": "boolean",
    "tools": "array",
    "tool_choice": None,
    "text": "object",
    "max_output_tokens": "integer",
    "temperature": "number",
    "top_p": "number",
    "seed": "integer",
    "parallel_tool_calls": "boolean",
    "store": "boolean",
    "metadata": "object",
    "user": "string",
    "previous_response_id": "string",
    "background": "boolean",
    "reasoning": "object",
    "truncation": "string",
    "include": "array",
    "service_tier": "string",
    "prompt_cache_key": "string",
    "safety_identifier": "string",
    "stream_options": "object",
    "draftless": "object",
    "chat_id": "string",
}
# carried over to the chat body as they are
SAME = ("stream", "temperature", "top_p", "seed", "parallel_tool_calls", "user", "draftless")


def _bad(message: str, param: str) -> ApiError:
    return ApiError(400, message, param=param)


def _text(content, param: str) -> str | list:
    """A message's content: a string, or input_text/output_text parts as chat text parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad("A message's content must be a string or a list of text parts.", param)
    parts = []
    for part in content:
        if not (isinstance(part, dict) and part.get("type") in ("input_text", "output_text")):
            raise _bad("Only input_text and output_text content parts are supported.", param)
        parts.append({"type": "text", "text": part.get("text")})
    return parts


def _messages(raw, instructions) -> list[dict]:
    """``input`` (a string or a list of items) as chat messages: messages, then
    function calls (an assistant message's tool calls) and their outputs (tool messages)."""
    messages = [{"role": "system", "content": instructions}] if instructions else []
    if isinstance(raw, str):
        return messages + [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise _bad("'input' must be a string or a non-empty list of items.", "input")
    for index, item in enumerate(raw):
        param = f"input[{index}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            messages.append(
                {"role": item.get("role"), "content": _text(item.get("content"), param)}
            )
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            }
            last = messages[-1] if messages else {}
            if last.get("role") == "assistant" and last.get("tool_calls") is not None:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": output if isinstance(output, str) else json.dumps(output),
                }
            )
        else:
            raise _bad(
                "Each input item must be a message, a function_call or a function_call_output.",
                param,
            )
    return messages


def _tools(raw) -> list[dict]:
    tools = []
    for tool in raw or []:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise _bad("Only function tools are supported.", "tools")
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(raw):
    if isinstance(raw, dict) and raw.get("type") == "function":
        return {"type": "function", "function": {"name": raw.get("name")}}
    return raw


def _response_format(text) -> dict | None:
    shape = (text or {}).get("format")
    if shape is None or shape.get("type") in ("text", "json_object"):
        return shape
    if shape.get("type") == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": shape.get("name", "format"), "schema": shape.get("schema")},
        }
    raise _bad("'text.format' must be text, json_object or json_schema.", "text.format")


def chat_body(body) -> dict:
    """The chat completions body a Responses body means."""
    check_fields(body, FIELDS)
    for name in ("previous_response_id", "background"):
        if body.get(name):
            raise _bad(
                f"'{name}' is not supported: this server stores no responses; send the "
                "whole conversation as 'input' items.",
                name,
            )
    chat = {name: body[name] for name in SAME if name in body}
    chat["messages"] = _messages(body.get("input"), body.get("instructions"))
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("tools"):
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    response_format = _response_format(typed(body.get("text"), "object", "text"))
    if response_format is not None:
        chat["response_format"] = response_format
    if body.get("stream_options") is not None:
        chat["stream_options"] = body["stream_options"]
    if body.get("chat_id") is not None:
        chat["chat_id"] = body["chat_id"]
    return chat


class ResponseShaper:
    """The ``response`` object of one answer, and the events that stream it."""

    def __init__(self, body: dict, model: str, chat_id: str | None = None):
        self.id = "resp_" + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.model = model
        self.chat_id = chat_id
        self.echoed = {  # what the request set, as OpenAI's response repeats it
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [],
            "text": body.get("text") or {"format": {"type": "text"}},
        }
        self.sequence = 0

    def response(self, status: str, output: list, done: DoneEvent | None = None, tokens=0):
        body = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "error": None,
            "incomplete_details": None,
            **self.echoed,
        }
        if status == "incomplete":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        if done is not None:
            prompt = done.timing.get("prompt_tokens", 0)
            body["usage"] = {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + tokens,
                "draftless": dict(done.stats),
            }
        if self.chat_id:
            body["chat_id"] = self.chat_id
        return body

    def event(self, kind: str, **fields) -> bytes:
        """One server-sent event of the stream, numbered."""
        self.sequence += 1
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def message_item(item_id: str, text: str, status: str = "completed") -> dict:
    shown = status == "completed"  # (an open item's parts are added by their own events)
    content = [{"type": "output_text", "text": text, "annotations": []}] if shown else []
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": content,
    }


def call_item(call: dict, status: str = "completed") -> dict:
    return {
        "type": "function_call",
        "id": "fc_" + call["id"].removeprefix("call_"),
        "call_id": call["id"],
        "name": call["name"],
        "arguments": call.get("arguments", ""),
        "status": status,
    }


def _status(answer, done: DoneEvent, called: bool) -> str:
    return "incomplete" if answer.finish(done, called) == "length" else "completed"


async def whole(answer, shaper: ResponseShaper) -> dict:
    text, _, calls, last = await answer.collect()
    output = [message_item("msg_" + uuid.uuid4().hex[:24], text)] if text else []
    output += [call_item(call) for call in calls]
    status = _status(answer, last.event, bool(calls))
    return shaper.response(status, output, last.event, last.completion_tokens)


class _Items:
    """The output items of a streamed response as they open and close."""

    def __init__(self, shaper: ResponseShaper):
        self.shaper = shaper
        self.output: list[dict] = []
        self.message: dict | None = None  # the message item while it is open
        self.calls: dict[int, dict] = {}  # tool-call index → its item while it is open

    def text(self, text: str):
        event = self.shaper.event
        if self.message is None:
            self.message = message_item("msg_" + uuid.uuid4().hex[:24], "", "in_progress")
            self.message["index"] = len(self.output)
            self.output.append(self.message)
            where = {"output_index": self.message["index"]}
            yield event("response.output_item.added", item=_public(self.message), **where)
            part = {"type": "output_text", "text": "", "annotations": []}
            self.message["content"] = [part]
            yield event(
                "response.content_part.added",
                item_id=self.message["id"],
                content_index=0,
                part=part,
                **where,
            )
        self.message["content"][0]["text"] += text
        yield event(
            "response.output_text.delta",
            item_id=self.message["id"],
            output_index=self.message["index"],
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def call_progress(self, delta: dict):
        event = self.shaper.event
        if "name" in delta:
            item = call_item({"id": delta["id"], "name": delta["name"]}, "in_progress")
            item["index"] = len(self.output)
            self.output.append(item)
            self.calls[delta["index"]] = item
            yield event(
                "response.output_item.added", output_index=item["index"], item=_public(item)
            )
        item = self.calls.get(delta["index"])
        if item is not None and delta.get("arguments"):
            item["arguments"] += delta["arguments"]
            yield event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=item["index"],
                delta=delta["arguments"],
            )

    def call_closed(self, call: dict):
        index = next((i for i, item in self.calls.items() if item["call_id"] == call["id"]), None)
        item = self.calls.pop(index) if index is not None else None
        if item is None:  # a call that streamed whole as it closed
            yield from self.call_progress({"index": -1, "id": call["id"], "name": call["name"]})
            item = self.calls.pop(-1)
        item.update(arguments=call["arguments"], status="completed")
        where = {"item_id": item["id"], "output_index": item["index"]}
        yield self.shaper.event(
            "response.function_call_arguments.done",
            arguments=item["arguments"],
            name=item["name"],
            **where,
        )
        yield self.shaper.event(
            "response.output_item.done", output_index=item["index"], item=_public(item)
        )

    def close_message(self):
        if self.message is None:
            return
        message, event = self.message, self.shaper.event
        part = message["content"][0]
        where = {"item_id": message["id"], "output_index": message["index"], "content_index": 0}
        yield event("response.output_text.done", text=part["text"], logprobs=[], **where)
        yield event("response.content_part.done", part=part, **where)
        message["status"] = "completed"
        yield event(
            "response.output_item.done", output_index=message["index"], item=_public(message)
        )
        self.message = None


def _public(item: dict) -> dict:
    return {k: v for k, v in item.items() if k != "index"}


async def stream(answer, shaper: ResponseShaper):
    """The response's events: created, in progress, each output item's, then completed
    (or incomplete, or failed)."""
    items = _Items(shaper)
    started = shaper.response("in_progress", [])
    yield shaper.event("response.created", response=started)
    yield shaper.event("response.in_progress", response=started)
    called = False
    async for piece in answer.read():
        event = piece.event
        if isinstance(event, (PassEvent, DoneEvent)):
            if piece.text:
                for sent in items.text(piece.text):
                    yield sent
            for delta in piece.deltas:
                for sent in items.call_progress(delta):
                    yield sent
            for call in piece.calls:
                called = True
                for sent in items.call_closed(call):
                    yield sent
        if isinstance(event, DoneEvent):
            for sent in items.close_message():
                yield sent
            status = _status(answer, event, called)
            output = [_public(item) for item in items.output]
            final = shaper.response(status, output, event, piece.completion_tokens)
            yield shaper.event(f"response.{status}", response=final)
            return
        if isinstance(event, ErrorEvent):
            failed = shaper.response("failed", [_public(item) for item in items.output])
            failed["error"] = {"code": "server_error", "message": event.message}
            yield shaper.event("response.failed", response=failed)
            return
