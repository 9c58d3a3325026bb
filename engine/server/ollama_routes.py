"""Ollama's routes: ``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/ps``,
``/api/show`` and ``/api/version`` (the shapes are ``ollama.py``'s)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from . import ollama
from .state import Front, ServerState
from .requests import ApiError

OLLAMA = Front(
    failure=ollama.error,
    stream=ollama.lines,
    whole=ollama.whole,
    media_type="application/x-ndjson",
)


def ollama_router(state: ServerState) -> APIRouter:
    router = APIRouter()
    options = state.options

    async def complete(request: Request, chat: bool):
        """``chat`` False: Ollama's generate, run as a chat but answered as a generate."""
        try:
            body = await state.read_body(request)
            model = ollama.model_name(body)
            state.check_model(model.removesuffix(":latest") if model else None)
            loading = not chat and isinstance(body, dict) and not body.get("prompt")
            translated, as_chat = ollama.translate(body, chat)
            if loading:  # how Ollama clients load a model; this one is loaded
                return {
                    "model": model or options.model_name,
                    "created_at": ollama.now(),
                    "response": "",
                    "done": True,
                    "done_reason": "load",
                }
            parsed = await state.admit(request, translated, as_chat)
        except ApiError as error:
            return ollama.error(error)
        shaper = ollama.OllamaShaper(chat, model or options.model_name, parsed.generation.chat_id)
        return await state.respond(request, parsed, shaper, OLLAMA)

    @router.post("/api/chat")
    async def ollama_chat(request: Request):
        return await complete(request, chat=True)

    @router.post("/api/generate")
    async def ollama_generate(request: Request):
        return await complete(request, chat=False)

    @router.get("/api/version")
    async def ollama_version():
        return {"version": ollama.VERSION}

    @router.get("/api/tags")
    async def ollama_tags():
        return {"models": [ollama.model_entry(options.model_name, options.model_facts)]}

    @router.get("/api/ps")
    async def ollama_running():
        return {"models": [ollama.running_entry(options.model_name, options.model_facts)]}

    @router.post("/api/show")
    async def ollama_show(request: Request):
        try:
            body = await state.read_body(request)
            name = ollama.model_name(body)
            if not name or name.removesuffix(":latest") not in state.served:
                raise ApiError(
                    404,
                    f"model {name!r} not found; this server serves {options.model_name!r}.",
                    "not_found_error",
                )
        except ApiError as error:
            return ollama.error(error)
        return ollama.show(options.model_facts)

    return router
