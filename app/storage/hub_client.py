"""Asking the Hugging Face hub about MLX models, without Qt: a bounded search, one repo's
download size, and why the hub gave no answer in plain words (offline, no answer in time,
an HTTP error). Calls block: the view runs them off the GUI thread.

``api`` is ``huggingface_hub.HfApi()`` or anything with its ``list_models`` and
``model_info`` (tests pass a fake)."""

from __future__ import annotations

import os
from collections.abc import Callable

from .hub_models import HubModel, download_size, group_models

SEARCH_LIMIT = 60  # repos read per search: a few pages of the most downloaded
CONNECT_S = 5.0
READ_S = 10.0
# huggingface_hub retries a refused connection five times over about 23 s before it raises;
# the view says "no answer" sooner and drops what comes after
ANSWER_S = 15.0
OFFLINE_VALUES = {"1", "ON", "YES", "TRUE"}
STILL_WORKS = "Your installed models and the catalog (Model ▸ Download a model…) still work."


class HubUnavailable(Exception):
    """Why the hub gave no answer, in words to show; ``offline``: none could be reached."""

    def __init__(self, message: str, offline: bool):
        super().__init__(message)
        self.offline = offline


def offline_message(why: str) -> str:
    return f"Offline: Hugging Face cannot be reached ({why}). {STILL_WORKS}"


def offline_by_setting() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in OFFLINE_VALUES


def _check_setting() -> None:
    if offline_by_setting():
        raise HubUnavailable(offline_message("HF_HUB_OFFLINE is set"), offline=True)


def search_models(
    api, query: str, cancelled: Callable[[], bool] = lambda: False, limit: int = SEARCH_LIMIT
) -> list[HubModel]:
    """The MLX models whose names hold ``query``, most downloaded first, grouped with their
    quantizations; at most ``limit`` repos are read, and none after ``cancelled()``."""
    _check_setting()
    found = []
    try:
        for info in api.list_models(search=query, filter="mlx", sort="downloads", limit=limit):
            if cancelled() or len(found) >= limit:
                break
            found.append(info)
    except Exception as error:  # huggingface_hub raises many kinds
        raise explain(error) from None
    return group_models(found)


def repo_size(api, repo: str) -> int | None:
    """Bytes a download of ``repo`` fetches (None when the hub does not say)."""
    _check_setting()
    try:
        info = api.model_info(repo, files_metadata=True, timeout=READ_S)
    except Exception as error:
        raise explain(error) from None
    return download_size(info.siblings)


def explain(error: BaseException) -> HubUnavailable:
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(error, OfflineModeIsEnabled):
        return HubUnavailable(offline_message("HF_HUB_OFFLINE is set"), offline=True)
    response = getattr(error, "response", None)
    if isinstance(error, HfHubHTTPError) and response is not None:
        return HubUnavailable(http_message(response.status_code, response.reason_phrase), False)
    network = type(error).__module__.split(".")[0] in ("httpx", "httpx2")
    if network or isinstance(error, (OSError, TimeoutError)):
        return HubUnavailable(offline_message(f"{type(error).__name__}: {error}"), offline=True)
    return HubUnavailable(f"The search failed: {error}. {STILL_WORKS}", offline=False)


def http_message(status: int, reason: str = "") -> str:
    said = f"HTTP {status}{f' {reason}' if reason else ''}"
    if status == 429:
        advice = "too many searches for now; try again in a minute"
    elif status in (401, 403):
        advice = "it refused access; a model that needs a login cannot be searched here"
    elif status >= 500:
        advice = "the hub has a problem of its own; try again later"
    else:
        advice = "it did not accept the search"
    return f"Hugging Face answered {said}: {advice}. {STILL_WORKS}"


def no_answer_message() -> str:
    return offline_message(f"no answer in {ANSWER_S:.0f} s")


def _bound_timeout(request) -> None:
    timeout = request.extensions.get("timeout") or {}
    if all(value is None for value in timeout.values()):
        request.extensions["timeout"] = {
            "connect": CONNECT_S,
            "read": READ_S,
            "write": READ_S,
            "pool": CONNECT_S,
        }


def bound_hub_timeouts() -> None:
    """Give every huggingface_hub request that carries no timeout a connect and a read limit.

    The library's shared client has none and ``list_models`` passes none, so a stalled
    connection would hold a search for ever. Requests that carry a timeout (a download's
    files) keep theirs. The library's own request hooks (offline mode, request ids) stay:
    they are read from its client. Call it before any download starts: installing a client
    factory closes the shared client."""
    from huggingface_hub import get_session, set_client_factory

    client = get_session()
    kind = type(client)
    hooks = [h for h in client.event_hooks.get("request", []) if h is not _bound_timeout]

    def bounded():
        return kind(
            event_hooks={"request": [*hooks, _bound_timeout]}, follow_redirects=True, timeout=None
        )

    set_client_factory(bounded)
