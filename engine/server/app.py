"""The HTTP app (FastAPI): the middleware, the error handlers, ``/health``, and the two
fronts' routes: OpenAI's (``openai_routes.py``) and Ollama's (``ollama_routes.py``).

Every route but ``/health`` checks ``Authorization: Bearer`` when a key is set (``/health``
then says only "ok" to others). ``guard.Guard`` checks Host, Origin and content-type first.
Answers run one at a time through a fair, bounded queue; a client that goes away cancels
its answer at the engine's next pass. Chats belong to the client they were issued to
(``chats.py``). What the routes share (the queue, the chat ids, reading a body, running an
answer) is ``ServerState``.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from starlette.exceptions import HTTPException

from . import ollama
from .chats import CHAT_ID_HEADER
from .guard import Guard, KeyCheck
from .ollama_routes import ollama_router
from .openai_routes import openai_router
from .requests import ApiError
from .responses import SafeJSONResponse
from .state import ServerOptions, ServerState, openai_error

__all__ = ["ServerOptions", "create_app"]


def create_app(service, options: ServerOptions) -> FastAPI:
    """``service`` is an ``EngineService`` (or anything with its ``generate``)."""
    app = FastAPI(
        title="Draftless",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        default_response_class=SafeJSONResponse,
    )
    state = ServerState(service, options)

    @app.exception_handler(HTTPException)
    async def http_error(request, error: HTTPException):
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        failure = ollama.error if request.url.path.startswith("/api/") else openai_error
        return failure(
            ApiError(
                error.status_code, f"{request.method} {request.url.path}: {error.detail}", kind
            )
        )

    @app.exception_handler(Exception)
    async def internal_error(request, error: Exception):
        return openai_error(
            ApiError(
                500,
                f"Internal error ({type(error).__name__}); see the server's log.",
                "server_error",
            )
        )

    add_middleware(app, options)

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health(request: Request):
        if not state.authorized(request):  # without the key: no word about other clients
            return {"status": "ok"}
        return {
            "status": "ok",
            "model": options.model_name,
            "running": int(state.queue.running),
            "waiting": state.queue.waiting,
            **state.stats.to_dict(),
        }

    app.include_router(openai_router(state))
    app.include_router(ollama_router(state))
    return app


def add_middleware(app: FastAPI, options: ServerOptions) -> None:
    """The key check, CORS where origins were named, and the Guard (outermost)."""
    app.add_middleware(KeyCheck, api_key=options.api_key)
    if options.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(options.cors_origins),
            allow_methods=["GET", "POST"],
            # the origins are the operator's own choice; what headers their pages send is
            # the SDKs' business (the openai and Anthropic SDKs add their own, such as
            # X-Stainless-*), so a listed origin may send any
            allow_headers=["*"],
            expose_headers=[CHAT_ID_HEADER],
            max_age=600,
        )
    app.add_middleware(
        Guard,
        hosts=options.hosts,
        origins=set(options.cors_origins),
        max_seconds=options.max_request_seconds,
    )
