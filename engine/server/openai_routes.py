"""OpenAI's routes: ``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions``."""

from __future__ import annotations

from fastapi import APIRouter, Request

from .state import Front, ServerState, openai_error
from .requests import ApiError, typed
from .responses import Shaper

OPENAI = Front(
    failure=openai_error,
    stream=lambda answer, shaper: answer.chunks(),
    whole=lambda answer, shaper: answer.whole(),
    media_type="text/event-stream",
    stream_headers={"Cache-Control": "no-cache"},
)


def openai_router(state: ServerState) -> APIRouter:
    router = APIRouter()
    options = state.options
    model_card = {
        "id": options.model_name,
        "object": "model",
        "created": 0,
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

    async def complete(request: Request, chat: bool):
        try:
            body = await state.read_body(request)
            if isinstance(body, dict):
                state.check_model(typed(body.get("model"), "string", "model"))
            parsed = await state.admit(request, body, chat)
        except ApiError as error:
            return openai_error(error)
        shaper = Shaper(chat, options.model_name, parsed.generation.chat_id)
        return await state.respond(request, parsed, shaper, OPENAI)

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await complete(request, chat=True)

    @router.post("/v1/completions")
    async def completions(request: Request):
        return await complete(request, chat=False)

    return router
