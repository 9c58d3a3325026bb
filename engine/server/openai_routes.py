"""OpenAI's routes: ``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions``."""

from __future__ import annotations

import json
from dataclasses import replace

from fastapi import APIRouter, Request

from .state import Front, ServerState, answering, openai_error
from . import embeddings as embeddings_shape
from . import openai_responses
from .requests import ApiError, ParsedRequest, typed
from .responses import Shaper

RESPONSES = Front(
    failure=openai_error,
    stream=openai_responses.stream,
    whole=openai_responses.whole,
    media_type="text/event-stream",
    stream_headers={"Cache-Control": "no-cache"},
)
OPENAI = Front(
    failure=openai_error,
    stream=lambda answer, shaper: answer.chunks(),
    whole=lambda answer, shaper: answer.whole(),
    media_type="text/event-stream",
    stream_headers={"Cache-Control": "no-cache"},
)


def _not_a_streamed_list(prompt: list) -> None:
    """A 400 for a streamed list of prompts (one stream answers one prompt)."""
    if len(prompt) > 1 and all(isinstance(p, (str, list)) for p in prompt):
        raise ApiError(
            400,
            "A list of prompts is answered whole: send it with 'stream': false, or stream "
            "each prompt in its own request.",
            param="stream",
        )


def openai_router(state: ServerState) -> APIRouter:
    router = APIRouter()
    options = state.options
    model_card = {
        "id": options.model_name,
        "object": "model",
        "created": options.created,
        "owned_by": "draftless",
        "draftless": {
            "speculation": options.speculation,
            "tool_format": options.model_facts.get("tool_format"),
        },
    }

    @router.get("/v1/models")
    async def models():
        return {"object": "list", "data": [model_card]}

    @router.get("/v1/models/{model_id:path}")
    async def model(model_id: str):
        if model_id not in state.served:
            return openai_error(
                ApiError(
                    404,
                    f"The model {model_id!r} does not exist here; this "
                    f"server serves {options.model_name!r}.",
                    "not_found_error",
                    "model_not_found",
                    "model",
                )
            )
        return model_card

    def shaper(parsed: ParsedRequest, chat: bool) -> Shaper:
        echo_logprobs = parsed.echo and parsed.generation.logprobs is not None
        return Shaper(chat, options.model_name, parsed.generation.chat_id, echo_logprobs)

    async def read_for_model(request: Request):
        """The body, once the model it names (if any) is the one served."""
        body = await state.read_body(request)
        if isinstance(body, dict):
            state.check_model(typed(body.get("model"), "string", "model"))
        return body

    async def complete(request: Request, chat: bool):
        try:
            body = await read_for_model(request)
            if (
                isinstance(body, dict)
                and body.get("stream")
                and isinstance(body.get("prompt"), list)
            ):
                _not_a_streamed_list(body["prompt"])
            parsed = await state.admit(request, body, chat)
        except ApiError as error:
            return openai_error(error)
        if parsed.more:
            return await in_turn(request, parsed)
        return await state.respond(request, parsed, shaper(parsed, chat), OPENAI)

    async def in_turn(request: Request, parsed: ParsedRequest):
        """A list of prompts, each answered after the one before (each waits for its turn
        on the engine, as separate requests would): one body, a choice per prompt."""
        bodies = []
        for index, generation in enumerate((parsed.generation, *parsed.more)):
            one = replace(parsed, generation=generation, more=())
            if index:
                try:
                    await state.take_turn(one)
                except ApiError as error:
                    return openai_error(error)
            response = await state.respond(request, one, shaper(one, False), OPENAI)
            if response.status_code != 200:
                return response
            bodies.append(json.loads(response.body))
        return {
            **bodies[0],
            "choices": [{**body["choices"][0], "index": i} for i, body in enumerate(bodies)],
            "usage": {
                **{
                    name: sum(body["usage"][name] for body in bodies)
                    for name in ("prompt_tokens", "completion_tokens", "total_tokens")
                },
                "draftless": [body["usage"]["draftless"] for body in bodies],
            },
            "draftless": [body["draftless"] for body in bodies],
        }

    @router.post("/v1/responses")
    async def responses(request: Request):
        try:
            body = await read_for_model(request)
            parsed = await state.admit(request, openai_responses.chat_body(body), True)
        except ApiError as error:
            return openai_error(error)
        shaper = openai_responses.ResponseShaper(
            body, options.model_name, parsed.generation.chat_id
        )
        return await state.respond(request, parsed, shaper, RESPONSES)

    @router.post("/v1/embeddings")
    async def embeddings(request: Request):
        try:
            body = await read_for_model(request)
            inputs, encoding = embeddings_shape.openai_request(body)
            found = await state.embed(request, inputs, truncate=False, user=body.get("user"))
        except ApiError as error:
            return openai_error(error)
        return embeddings_shape.openai_body(
            options.model_name, found.vectors, found.tokens, encoding
        )

    for path, chat in (("/v1/chat/completions", True), ("/v1/completions", False)):
        router.add_api_route(path, answering(complete, chat), methods=["POST"])
    return router
