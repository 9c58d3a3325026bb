"""A scripted engine service for view tests: no model, the events an answer would stream.

Numbers are counted by the engine's own ``DecodeStats``, so the views see exactly the
statistics a real answer would carry. A script item that is an ``asyncio.Event`` pauses
the stream until it is set (to look at the window mid-answer).
"""

from __future__ import annotations

import asyncio

from engine.events import DoneEvent, ModelEvent, PassEvent, ProgressEvent, ReplayEvent, TokenEvent
from engine.runtime.replay import replay_many
from engine.stats import DecodeStats

END = None  # the end-of-answer token in a script (it has no text)


def answer_events(passes, drafter="ngram-cache", prompt_tokens=0):
    """``passes``: [(drafted, [(text, from_draft) or (END, from_draft), ...]), ...] →
    the events of that answer, with the engine's statistics."""
    stats = DecodeStats(drafter=drafter, prompt_tokens=prompt_tokens)
    stats.prefill_s = 0.05
    events, tokens, flags, text = [], [], [], ""
    if prompt_tokens:
        events += [
            ProgressEvent("prefill", 0, prompt_tokens, "Reading the prompt…"),
            ProgressEvent("prefill", prompt_tokens, prompt_tokens, "Prompt read"),
        ]
    finish = "length"
    vocabulary: dict[str, int] = {}  # the same text piece is the same token
    for index, (drafted, items) in enumerate(passes):
        accepted = 0
        while accepted < len(items) and items[accepted][1]:
            accepted += 1
        ended = any(t is END for t, _ in items)
        accepted, emitted = stats.record_pass(drafted, accepted, len(items), 0.01, ended)
        for position, (piece, from_draft) in enumerate(items):
            if piece is END:
                continue
            token = vocabulary.setdefault(piece, 1000 + len(vocabulary))
            tokens.append(token)
            flags.append(from_draft)
            text += piece
            events.append(
                TokenEvent(
                    token, piece, from_draft, index, position if from_draft else None, drafter
                )
            )
        events.append(PassEvent(index, drafted, accepted, emitted, 0.01, stats.tokens_per_pass))
        if ended:
            finish = "stop"
    events.append(DoneEvent(finish, text, tokens, flags, stats.to_dict(), stats.timing_dict()))
    return events


class ScriptedStream:
    def __init__(self, items):
        self.items = list(items)
        self.cancelled = False

    def cancel(self):
        self.cancelled = True

    def __aiter__(self):
        return self

    async def __anext__(self):
        while self.items:
            item = self.items.pop(0)
            if isinstance(item, asyncio.Event):
                await item.wait()
                continue
            await asyncio.sleep(0)
            return item
        raise StopAsyncIteration


class ScriptedService:
    """Answers each request with the next queued script."""

    def __init__(self):
        self.scripts: list[list] = []
        self.requests = []
        self.replays = []
        self.loads = []
        self.downloads = []
        self.download_script: list | None = None  # the next download's events
        self.load_script: list | None = None  # the next load's events (an Event holds it)

    def queue(self, *scripts):
        self.scripts.extend(scripts)

    def generate(self, request):
        self.requests.append(request)
        return ScriptedStream(self.scripts.pop(0))

    def load(self, spec=None):
        self.loads.append(spec)
        script = self.load_script or [
            ModelEvent("scripted-model", "/nowhere", "on"),
            DoneEvent("loaded", "", [], []),
        ]
        self.load_script = None
        return ScriptedStream(script)

    def download(self, repo):
        """The queued ``download_script`` (an Event in it holds the download mid-way), else
        a download that finishes at once."""
        self.downloads.append(repo)
        script = self.download_script or [
            ProgressEvent("download", 1 << 20, 2 << 20, f"Downloading {repo}"),
            DoneEvent("downloaded", f"/downloads/{repo}", [], []),
        ]
        self.download_script = None
        return ScriptedStream(script)

    def replay(self, request, answer_tokens, ended, configs, greedy=None):
        """The engine's own replay over the scripted tokens (an empty prompt)."""
        self.replays.append(configs)
        results = replay_many([], answer_tokens, configs, end_token=1 if ended else None)
        return ScriptedStream(
            [ReplayEvent([r.outcome() for r in results]), DoneEvent("replayed", "", [], [])]
        )

    def drafters(self):
        return {
            "ngram-cache": "scripted",
            "prompt-lookup": "scripted",
            "suffix": "scripted",
            "suffix-static": "scripted (the default)",
            "none": "plain decoding",
        }

    def shutdown(self):
        pass
