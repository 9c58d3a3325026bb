"""The engine interface over a Draftless server (``python -m engine serve``).

``RemoteEngine`` offers what the controller uses of the local ``EngineService`` —
``generate(request)`` and ``load(spec)`` returning async event streams with ``cancel()``,
``drafters()`` and ``shutdown()`` — and turns the server's OpenAI stream back into the
engine's own events: each chunk's ``draftless`` provenance becomes Token and Pass events
(the first one's ``thinking``, a think block the chat template opened, the "prefill"
Progress event that says so), the last chunk's statistics the Done event, so highlights,
gauge, thinking panel and inspector work the same. It uses the official ``openai`` client on a worker thread per request; stopping an
answer closes the connection, which the server honours at its next pass.
"""

from __future__ import annotations

import threading

from engine.events import DoneEvent, ErrorEvent, ModelEvent, PassEvent, ProgressEvent, TokenEvent
from engine.service import EngineService, GenerationStream
from engine.stats import DecodeStats, stored_figures


def api_base(url: str) -> str:
    """``host:port``, ``http://host:port`` or ``…/v1`` → ``http://host:port/v1``."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url if url.endswith("/v1") else url + "/v1"


def request_body(request) -> dict:
    """An engine request as a chat-completions body with the ``draftless`` extension."""
    draft, sampling = request.draft, request.sampling
    body = {
        "model": "default",
        "messages": request.messages,
        "max_tokens": request.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "draftless": {
            "drafter": draft.drafter,
            "draft_count": draft.draft_count,
            "ngram_order": draft.ngram_order,
            "ngram_min": draft.ngram_min,
            "adaptive": draft.adaptive,
            "options": dict(draft.options),
        },
    }
    if sampling.repetition_penalty is not None:
        body["repetition_penalty"] = sampling.repetition_penalty
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if request.chat_id is not None:
        body["chat_id"] = request.chat_id  # the server keeps this chat's KV cache
    return body


# The local engine's "prefill" event for a prompt whose chat template opened a <think> block;
# the server says so in its first chunk (draftless.thinking). It comes after that chunk's
# tokens, once the answer has text: the stream does not say how long the prompt was, so the
# card's "Prompt read (N tokens)" line, shown only while an answer has no text, stays away.
TEMPLATE_OPENED_THINKING = ProgressEvent("prefill", 0, 0, "Prompt read", thinking=True)


class RemoteStream(GenerationStream):
    """Events of one remote job, pushed from its worker thread to the caller's loop."""

    def __init__(self, job):
        super().__init__(None, job)  # job(stream, push, should_stop), run on a worker thread
        self.response = None  # the open HTTP stream, closed by cancel()

    def cancel(self) -> None:
        super().cancel()
        response = self.response
        if response is not None:
            try:
                response.close()
            except Exception:  # already closed by the worker
                pass

    def _start(self, push) -> None:
        threading.Thread(
            target=self._job,
            args=(self, push, self._cancelled.is_set),
            name="draftless-remote",
            daemon=True,
        ).start()


class RemoteEngine:
    def __init__(self, url: str, api_key: str | None = None, timeout: float = 600.0):
        import openai

        self.url = api_base(url)
        self._openai = openai
        self.client = openai.OpenAI(
            base_url=self.url, api_key=api_key or "none", max_retries=0, timeout=timeout
        )
        self.model_name = ""
        # the app's chat id -> the id the server issued for it (the server honours only its own)
        self.server_chat_ids: dict[str, str] = {}

    @staticmethod
    def drafters() -> dict[str, str]:
        return EngineService.drafters()

    def shutdown(self) -> None:
        self.client.close()

    def _problem(self, error: Exception) -> str:
        openai = self._openai
        if isinstance(error, openai.AuthenticationError):
            return (
                f"The server at {self.url} refused the API key. Check the key in "
                "Model → Connect to server…."
            )
        if isinstance(error, openai.APIConnectionError):
            return (
                f"Cannot reach the Draftless server at {self.url}. Check that "
                "`python -m engine serve` runs there and the address, or choose "
                "Model → Use this machine's engine."
            )
        if isinstance(error, openai.APIStatusError):
            return f"The server at {self.url} answered {error.status_code}: {error.message}"
        return f"The server at {self.url} failed: {error}"

    def load(self, spec=None) -> RemoteStream:
        """Check the server answers and say which model it serves (``spec`` is the
        server's business: it serves the model it was started with)."""

        def job(stream, push, should_stop):
            try:
                models = self.client.models.list().data
            except Exception as error:
                push(ErrorEvent(self._problem(error)))
                return
            if not models:
                push(ErrorEvent(f"The server at {self.url} serves no model."))
                return
            model = models[0]
            self.model_name = model.id
            extra = (model.model_extra or {}).get("draftless") or {}
            push(ModelEvent(model.id, self.url, extra.get("speculation", "on")))
            push(DoneEvent("loaded", "", [], []))

        return RemoteStream(job)

    def generate(self, request) -> RemoteStream:
        return RemoteStream(
            lambda stream, push, should_stop: self._answer(request, stream, push, should_stop)
        )

    def _answer(self, request, stream: RemoteStream, push, should_stop) -> None:
        body = request_body(request)
        extra = {
            key: body.pop(key)
            for key in ("top_k", "min_p", "draftless", "chat_id", "repetition_penalty")
            if key in body
        }
        if "chat_id" in extra:
            extra["chat_id"] = self.server_chat_ids.get(extra["chat_id"], extra["chat_id"])
        tokens: list[int] = []
        from_draft: list[bool] = []
        text: list[str] = []
        stats = DecodeStats(drafter=request.draft.drafter)
        try:
            response = self.client.chat.completions.create(
                stream=True,
                stream_options={"include_usage": True},
                extra_body=extra,
                **{k: v for k, v in body.items() if k != "model"},
                model=self.model_name or "default",
            )
            stream.response = response
            if should_stop():
                response.close()
            for chunk in response:
                issued = (chunk.model_extra or {}).get("chat_id")
                if issued and request.chat_id is not None:
                    self.server_chat_ids[request.chat_id] = issued
                provenance = (chunk.model_extra or {}).get("draftless")
                if provenance:
                    # passes that showed no text came without a chunk of their own
                    for earlier in provenance.get("earlier") or []:
                        self._pass(earlier, push, tokens, from_draft, text, stats)
                    if "pass" in provenance:
                        self._pass(provenance, push, tokens, from_draft, text, stats)
                    if provenance.get("thinking") is True:
                        push(TEMPLATE_OPENED_THINKING)
                if chunk.usage is not None:
                    final = dict((chunk.usage.model_extra or {}).get("draftless") or {})
                    timing = final.pop("timing", {})
                    reason = final.pop("finish_reason", None) or chunk.choices[0].finish_reason
                    final, timing = stored_figures(final, timing)  # another machine's figures
                    push(DoneEvent(reason, "".join(text), tokens, from_draft, final, timing))
                    return
        except Exception as error:
            if not should_stop():
                push(ErrorEvent(self._problem(error)))
                return
        if should_stop():  # stopped by the user: the figures of the passes that arrived
            push(
                DoneEvent(
                    "cancelled",
                    "".join(text),
                    tokens,
                    from_draft,
                    stats.to_dict(),
                    stats.timing_dict(),
                )
            )
        else:
            push(ErrorEvent(f"The server at {self.url} ended the answer early."))

    @staticmethod
    def _pass(provenance: dict, push, tokens, from_draft, text, stats: DecodeStats) -> None:
        index = provenance["pass"]
        for i, token in enumerate(provenance["tokens"]):
            piece = provenance["texts"][i]
            push(
                TokenEvent(
                    token,
                    piece,
                    provenance["from_draft"][i],
                    index,
                    provenance["draft_position"][i],
                    provenance["drafter"] or "",
                )
            )
            tokens.append(token)
            from_draft.append(provenance["from_draft"][i])
            text.append(piece)
        stats.record_pass(
            provenance["drafted"],
            provenance["accepted"],
            len(provenance["tokens"]),
            provenance["seconds"],
        )
        push(
            PassEvent(
                index,
                provenance["drafted"],
                provenance["accepted"],
                len(provenance["tokens"]),
                provenance["seconds"],
                provenance["tokens_per_pass"],
            )
        )
