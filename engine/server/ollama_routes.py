"""Ollama's routes: ``/api/chat``, ``/api/generate``, ``/api/tags``, ``/api/ps``,
``/api/show`` and ``/api/version`` (the shapes are ``ollama.py``'s)."""

from __future__ import annotations

import asyncio
import json
import time

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from . import embeddings, ollama
from .state import Front, ServerState, answering
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
            loading = ollama.loading(body, chat)
            translated, as_chat = await asyncio.to_thread(ollama.translate, body, chat)
            if loading:  # how Ollama clients load a model; this one is loaded
                return ollama.loaded_answer(model or options.model_name, chat, loading)
            parsed = await state.admit(request, translated, as_chat)
        except ApiError as error:
            return ollama.error(error)
        shaper = ollama.OllamaShaper(chat, model or options.model_name, parsed.generation.chat_id)
        return await state.respond(request, parsed, shaper, OLLAMA)

    for path, chat in (("/api/chat", True), ("/api/generate", False)):
        router.add_api_route(path, answering(complete, chat), methods=["POST"])

    async def named(request: Request, refusal: str) -> tuple[dict, str]:
        """The body and the model it names, which must be the one served (``refusal``: the
        404's message, with ``{name}`` and ``{served}``)."""
        body = await state.read_body(request)
        name = ollama.model_name(body)
        if not name or name.removesuffix(":latest") not in state.served:
            raise ApiError(
                404,
                refusal.format(name=repr(name), served=repr(options.model_name)),
                "not_found_error",
            )
        return body, name

    @router.api_route("/", methods=["GET", "HEAD"])
    async def running():  # what Ollama's CLI asks to find the server
        return PlainTextResponse("Ollama is running")

    @router.post("/api/pull")
    async def pull(request: Request):
        """The served model is here already: success; any other cannot be pulled."""
        try:
            body, _ = await named(
                request,
                "This server cannot pull {name}: it serves {served} only, chosen when it "
                "started (python -m engine serve --model …).",
            )
        except ApiError as error:
            return ollama.error(error)
        if body.get("stream") is False:
            return {"status": "success"}
        lines = [{"status": "pulling manifest"}, {"status": "success"}]
        return PlainTextResponse(
            "".join(json.dumps(line) + "\n" for line in lines), media_type="application/x-ndjson"
        )

    async def embed(request: Request, older: bool):
        try:
            body = await state.read_body(request)
            model = ollama.model_name(body)
            state.check_model(model.removesuffix(":latest") if model else None)
            inputs, truncate = embeddings.ollama_request(body, older)
            started = time.perf_counter_ns()
            found = await state.embed(request, inputs, truncate)
        except ApiError as error:
            return ollama.error(error)
        if older:
            return {"embedding": found.vectors[0]}
        return {
            "model": model or options.model_name,
            "embeddings": found.vectors,
            "total_duration": time.perf_counter_ns() - started,
            "load_duration": 0,
            "prompt_eval_count": found.tokens,
        }

    @router.post("/api/embed")
    async def ollama_embed(request: Request):
        return await embed(request, older=False)

    @router.post("/api/embeddings")
    async def ollama_embeddings(request: Request):
        return await embed(request, older=True)

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
            await named(request, "model {name} not found; this server serves {served}.")
        except ApiError as error:
            return ollama.error(error)
        return ollama.show(options.model_facts)

    return router
