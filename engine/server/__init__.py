"""``python -m engine serve``: an OpenAI- and Ollama-compatible HTTP server over the engine
service.

Routes: OpenAI's ``POST /v1/chat/completions``, ``/v1/completions`` (streamed as
server-sent events or not; ``echo`` with prompt log-probabilities, token-id and list
prompts), ``/v1/responses``, ``/v1/embeddings``, ``GET /v1/models`` and ``/v1/models/{id}``
(``openai_routes.py``); Ollama's ``/api/chat``, ``/api/generate``, ``/api/embed``,
``/api/embeddings``, ``/api/tags``, ``/api/show``, ``/api/ps``, ``/api/pull``,
``/api/version`` and ``GET /`` (``ollama_routes.py``); ``GET``/``HEAD /health``.
``guard.py`` holds the limits on hostile clients (Host, Origin, time, connections).
Drafting settings travel per request in a ``"draftless"`` object; defaults come from the
command line. Under ``mlx.launch`` with ``--shard``, rank 0 serves HTTP and the other ranks
follow its model calls (``engine/runtime/distributed.py``).
"""

from __future__ import annotations

import argparse
import os

from ..api import SERVER_KEY_VARIABLE, SERVER_PORT
from ..command_line import log, request_from_args
from ..errors import EngineError

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
API_KEY_VARIABLE = SERVER_KEY_VARIABLE
# connections the kernel may hold before the server accepts them: a client whose connection
# finds the queue full tries again only after a second. 4,096 is Linux's default somaxconn
# (the kernel caps the backlog there; macOS at kern.ipc.somaxconn); measured with
# tests.hostile_load's 4,100 connections at once (3 interleaved pairs), the slowest /health
# probe took 1.3-2.4 s at 1,024 and 0.5-1.6 s at 4,096
MAX_BACKLOG = 4096
# the least backlog the server starts with: below it a burst of new clients waits a second
MIN_BACKLOG = 1024
# files the process holds besides its connections: the model's, the engine's, the log
OTHER_FILES = 256


def open_file_budget(max_connections: int, backlog: int = MAX_BACKLOG) -> int:
    """The open files a server with ``max_connections`` may need at once: its connections,
    a backlog of new ones accepted in one wake-up before the cap closes any (asyncio accepts
    a whole backlog at a time), the backlog before it whose closing has not finished, and its
    other files (measured: 2,000 stalled connections and 1,000 slow bodies at once ran out of
    files with one backlog to spare). Past the limit, accept() fails and asyncio stops
    accepting for a second, /health included."""
    return max_connections + 2 * backlog + OTHER_FILES


def import_mlx_lm_keeping_open_file_limit() -> None:
    """Import mlx-lm without letting it lower this process's open-file limit for good.

    ``mlx_lm.utils`` calls ``setrlimit(RLIMIT_NOFILE, (2048, 4096))`` as it is imported, and a
    hard limit once lowered cannot be raised again; the server's backlog and connection cap
    need more. Here that call may raise the soft limit, and lowers neither."""
    import resource
    import sys

    if "mlx_lm.utils" in sys.modules:
        return
    set_limit = resource.setrlimit

    def never_lower(kind, limits):
        if kind != resource.RLIMIT_NOFILE:
            return set_limit(kind, limits)
        soft, hard = resource.getrlimit(kind)
        wanted = limits[0] if hard == resource.RLIM_INFINITY else min(limits[0], hard)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            set_limit(kind, (wanted, hard))

    resource.setrlimit = never_lower
    try:
        import mlx_lm.utils  # noqa: F401
    finally:
        resource.setrlimit = set_limit


def raise_open_file_limit(max_connections: int) -> int:
    """Raise this process's open-file limit to ``open_file_budget`` and return the listen
    backlog it allows: ``MAX_BACKLOG``, or less where the hard limit is lower, down to
    ``MIN_BACKLOG``; below that, a clear error."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    backlog = MAX_BACKLOG
    if hard != resource.RLIM_INFINITY:
        backlog = min(MAX_BACKLOG, (hard - max_connections - OTHER_FILES) // 2)
    if backlog < MIN_BACKLOG:
        raise EngineError(
            f"--max-connections {max_connections} needs up to "
            f"{open_file_budget(max_connections, MIN_BACKLOG)} open files, and this process "
            f"may open at most {hard}: lower --max-connections to "
            f"{max(1, hard - 2 * MIN_BACKLOG - OTHER_FILES)} or less."
        )
    wanted = open_file_budget(max_connections, backlog)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return backlog


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; any other needs an API key)",
    )
    parser.add_argument(
        "--port", type=int, default=SERVER_PORT, help="TCP port to listen on (default %(default)s)"
    )
    parser.add_argument(
        "--api-key", help=f"required as 'Authorization: Bearer KEY' (default: ${API_KEY_VARIABLE})"
    )
    parser.add_argument(
        "--max-queue",
        type=int,
        default=16,
        help="requests that may wait for their turn; more get 429",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=1 << 20,
        help="larger request bodies get 413 (default %(default)s)",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (like http://localhost:3000) allowed to call the "
        "server from a browser; repeatable (default: none)",
    )
    parser.add_argument(
        "--max-request-seconds",
        type=float,
        default=300,
        help="a request still running after this long is stopped (default %(default)s)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=1000,
        help="open connections; past it one waiting for headers, else a stranger's slowest "
        "body, is closed (default %(default)s)",
    )
    parser.add_argument(
        "--header-seconds",
        type=float,
        default=10,
        help="a connection must send its request headers within this time (default %(default)s)",
    )
    parser.add_argument(
        "--body-seconds",
        type=float,
        # a full --max-body-bytes body (1 MiB) in 30 s needs about 280 kbit/s
        default=30,
        help="a request's whole body must arrive within this time after its headers, "
        "else it gets 408 (default %(default)s)",
    )
    parser.add_argument(
        "--shard",
        choices=("tensor", "pipeline"),
        help="split the model over the ranks of `mlx.launch` (rank 0 serves HTTP)",
    )


def check_exposure(host: str, api_key: str | None) -> None:
    if host not in LOCAL_HOSTS and not api_key:
        raise EngineError(
            f"Refusing to listen on {host} without an API key: anyone who can "
            f"reach it could use this machine. Pass --api-key KEY or set "
            f"{API_KEY_VARIABLE}, or listen on 127.0.0.1."
        )


def defaults_from_args(args):
    from .requests import Defaults

    request = request_from_args(args, "-", raw=True)  # validates the drafting flags
    return Defaults(
        model=args.model,
        draft=request.draft,
        sampling=request.sampling,
        max_tokens=request.max_tokens,
    )


def run_serve(args) -> int:
    from .app import ServerOptions, create_app
    from .guard import allowed_hosts

    api_key = args.api_key or os.environ.get(API_KEY_VARIABLE) or None
    check_exposure(args.host, api_key)
    if not 1 <= args.max_queue <= 10_000:
        raise EngineError("--max-queue must be from 1 to 10000.")
    if not 1 <= args.max_connections <= 100_000:
        raise EngineError("--max-connections must be from 1 to 100000.")
    backlog = raise_open_file_limit(args.max_connections)
    if not (args.max_request_seconds > 0 and args.header_seconds > 0 and args.body_seconds > 0):
        raise EngineError(
            "--max-request-seconds, --header-seconds and --body-seconds must be positive."
        )
    for origin in args.cors_origin:
        if not origin.startswith(("http://", "https://")) or origin.endswith("/"):
            raise EngineError(
                f"--cors-origin {origin!r}: give an origin like "
                "http://localhost:3000 (scheme, host, port; no path)."
            )
    defaults = defaults_from_args(args)
    if args.shard:
        from ..runtime.distributed import start_rank

        service = start_rank(args.shard, args.model)
        if service is None:  # a following rank: it has served until rank 0 stopped
            return 0
    else:
        from ..runtime.service import EngineService

        service = EngineService()
    try:
        model = load(service, args.model, log)
        service.build_tables_for(defaults.draft)  # between requests, from now
        app = create_app(
            service,
            ServerOptions(
                model.name,
                defaults,
                api_key,
                args.max_queue,
                args.max_body_bytes,
                model.speculation,
                allowed_hosts(args.host, args.port),
                tuple(args.cors_origin),
                args.max_request_seconds,
                model.facts,
                model_created(model.path),
            ),
        )
        log(
            f"serving {model.name} on http://{args.host}:{args.port}/v1 "
            f"({'API key required' if api_key else 'no API key'})"
        )
        serve_http(app, args, api_key, backlog, service.stop_jobs)
    finally:
        service.shutdown()
    return 0


def model_created(path: str) -> int:
    """A model folder's modification time in Unix seconds (now, where it cannot be read)."""
    import time

    try:
        return int(os.stat(path).st_mtime)
    except OSError:
        return int(time.time())


def serve_http(app, args, api_key: str | None, backlog: int, on_exit=None) -> None:
    """uvicorn with the connection guards of ``guard.py`` and a rate-limited log.
    ``on_exit()`` runs when the server is told to stop (Ctrl-C, SIGTERM), before uvicorn
    waits for the open requests: it ends them (the engine's answers stop at their next
    step), so they close cleanly instead of being cut off after the graceful timeout."""
    import copy
    import logging
    import signal

    import uvicorn

    from .guard import RateLimitFilter, guarded_protocol

    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["filters"] = {"limit": {"()": RateLimitFilter}}
    for handler in log_config["handlers"].values():
        handler["filters"] = ["limit"]
    # asyncio's own errors (an accept that ran out of file descriptors) go to the same log
    log_config["loggers"]["asyncio"] = {
        "handlers": ["default"],
        "level": "WARNING",
        "propagate": False,
    }
    log_config["loggers"]["engine.server"] = {
        "handlers": ["default"],
        "level": "WARNING",
        "propagate": False,
    }
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        log_config=log_config,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=5,
        backlog=backlog,
        loop="engine.server.accept:AcceptingLoop",
        http=guarded_protocol(
            args.header_seconds, args.body_seconds, args.max_connections, api_key
        ),
    )
    for handler in logging.getLogger("engine").handlers:
        handler.addFilter(RateLimitFilter())
    # uvicorn raises the signal that stopped it again once it has stopped; for SIGTERM
    # that would end the process before the engine saves its n-gram memory, so SIGTERM
    # takes Ctrl-C's way out (KeyboardInterrupt: the caller shuts the engine down)
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            if on_exit is not None:
                on_exit()
            super().handle_exit(sig, frame)

    Server(config).run()


def load(service, model: str | None, log):
    """Load the model before listening, so a bad model is an error at start, not per
    request; return its ``ModelEvent``."""
    import asyncio

    from ..events import DoneEvent, ErrorEvent, ModelEvent, ProgressEvent

    async def run():
        loaded = None
        async for event in service.load(model):
            if isinstance(event, ErrorEvent):
                raise EngineError(event.message)
            if isinstance(event, ModelEvent):
                loaded = event
                log(f"model: {event.name} ({event.path}); speculation: {event.speculation}")
            elif isinstance(event, ProgressEvent) and event.done >= event.total:
                log(event.message)
            elif isinstance(event, DoneEvent):
                return loaded

    return asyncio.run(run())
