"""The engine thread: async events from another loop, cancellation, queueing, chat reuse."""

import asyncio
import threading
import time

import pytest

from engine.events import DoneEvent, ErrorEvent, ModelEvent, PassEvent, ProgressEvent, TokenEvent
from engine.runtime.service import EngineService
from engine.runtime.session import ChatSession
from engine.settings import DraftSettings, GenerationRequest

from .schema_bombs import regex_bomb


@pytest.fixture(scope="module")
def service():
    service = EngineService()
    yield service
    service.shutdown()


def request(model_dir, content="abcabcabc abcabc", **kwargs):
    kwargs.setdefault("max_tokens", 24)
    kwargs.setdefault("draft", DraftSettings(drafter="prompt-lookup", draft_count=4))
    return GenerationRequest(
        messages=[{"role": "user", "content": content}], model=str(model_dir), **kwargs
    )


async def collect(stream):
    return [event async for event in stream]


def test_events_arrive_on_the_callers_loop(service, tiny_model_dir):
    caller = threading.get_ident()
    seen_threads = set()

    async def run():
        events = []
        async for event in service.generate(request(tiny_model_dir)):
            seen_threads.add(threading.get_ident())
            events.append(event)
        return events

    events = asyncio.run(run())
    assert seen_threads == {caller}
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.finish_reason == "length"
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    passes = [e for e in events if isinstance(e, PassEvent)]
    assert [t.token for t in tokens] == done.tokens
    assert [t.from_draft for t in tokens] == done.from_draft
    assert "".join(t.text for t in tokens) == done.text
    assert len(passes) == done.stats["passes"]
    assert sum(p.emitted for p in passes) == done.stats["emitted"]
    assert service._loaded is not None and str(service._loaded.path) == str(tiny_model_dir)


def test_load_reports_the_model_and_speculation(tiny_model_dir):
    fresh = EngineService()
    try:
        events = asyncio.run(collect(fresh.load(str(tiny_model_dir))))
    finally:
        fresh.shutdown()
    model = next(e for e in events if isinstance(e, ModelEvent))
    assert model.speculation == "on (tree)" and events[-1].finish_reason == "loaded"
    assert model.details == "llama · 90.6K params · float32"


def test_cancel_stops_between_passes(service, tiny_model_dir):
    async def run():
        stream = service.generate(
            request(tiny_model_dir, max_tokens=400, draft=DraftSettings(drafter="none"))
        )
        events = []
        async for event in stream:
            events.append(event)
            if isinstance(event, PassEvent) and event.pass_index == 2:
                stream.cancel()
        return events

    events = asyncio.run(run())
    done = events[-1]
    assert done.finish_reason == "cancelled"
    # the engine thread stops at the first pass boundary after cancel(); a tiny model's
    # passes take about a millisecond, so it may be a few passes ahead of the events read
    assert 3 <= done.stats["passes"] <= 12


def test_requests_are_served_one_at_a_time_in_order(service, tiny_model_dir):
    order = []

    async def one(name):
        async for event in service.generate(request(tiny_model_dir, max_tokens=6)):
            if isinstance(event, TokenEvent):
                order.append(name)

    async def run():
        await asyncio.gather(one("first"), one("second"), one("third"))

    asyncio.run(run())
    assert order == ["first"] * 6 + ["second"] * 6 + ["third"] * 6


def test_errors_become_error_events(service, tmp_path):
    async def run():
        return await collect(
            service.generate(
                GenerationRequest(prompt="hi", raw=True, model=str(tmp_path / "missing"))
            )
        )

    events = asyncio.run(run())
    assert isinstance(events[-1], ErrorEvent) and "No model folder" in events[-1].message


def test_a_second_turn_reuses_the_cache_and_matches_a_fresh_session(tiny_loaded):
    turn1 = [{"role": "user", "content": "count: 1 2 3 1 2 3 1 2 3"}]
    session = ChatSession(tiny_loaded)
    first = list(session.generate(GenerationRequest(messages=turn1, max_tokens=20).validated()))[-1]
    turn2 = turn1 + [
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "again: 1 2 3 1 2 3"},
    ]
    second_request = GenerationRequest(messages=turn2, max_tokens=20).validated()
    drafter = session.drafter
    second = list(session.generate(second_request))[-1]
    assert session.drafter is drafter, "the n-gram state must carry over to the next turn"
    fresh = list(ChatSession(tiny_loaded).generate(second_request))[-1]
    assert second.tokens == fresh.tokens
    assert second.timing["prefilled_tokens"] < fresh.timing["prefilled_tokens"] / 2
    assert fresh.timing["prefilled_tokens"] == fresh.timing["prompt_tokens"] - 1


def test_a_failed_load_keeps_the_previous_model_and_load_always_names_it(tiny_model_dir, tmp_path):
    service = EngineService()
    try:
        first = asyncio.run(collect(service.load(str(tiny_model_dir))))
        failed = asyncio.run(collect(service.load(str(tmp_path / "missing"))))
        again = asyncio.run(collect(service.load(str(tiny_model_dir))))
    finally:
        service.shutdown()
    assert any(isinstance(e, ModelEvent) for e in first)
    assert isinstance(failed[-1], ErrorEvent)
    assert str(service._loaded.path) == str(tiny_model_dir)
    assert not any(isinstance(e, ProgressEvent) for e in again), "no reload after a failed load"
    assert [e.path for e in again if isinstance(e, ModelEvent)] == [str(tiny_model_dir)]


def test_a_client_opening_many_chats_evicts_its_own_not_anothers(tiny_loaded):
    from engine.runtime.session_cache import MAX_KEPT_CHATS, SessionCache

    sessions = SessionCache()

    def new():
        return ChatSession(tiny_loaded)

    victim = sessions.session("alice", "work", new)
    for n in range(3 * MAX_KEPT_CHATS):
        sessions.session("mallory", f"probe-{n}", new)
    assert sessions.kept("alice", "work") is victim
    assert len(sessions) == MAX_KEPT_CHATS


def test_a_grammar_past_its_budget_holds_up_only_its_own_request(service, tiny_model_dir):
    """The 128-regex schema's trial compile (its 1 s budget) runs before its request's turn,
    off the engine thread, so a plain request sent just after it is answered first. It used
    to hold the engine's turn: under tests.hostile_load every client's stream paused 1.3 s."""
    asyncio.run(collect(service.load(str(tiny_model_dir))))
    finished = []

    async def answer(name, sent):
        events = await collect(service.generate(sent))
        finished.append((name, type(events[-1]).__name__, getattr(events[-1], "message", "")))

    async def both():
        bomb = request(tiny_model_dir, json_schema=regex_bomb(), max_tokens=4)
        first = asyncio.create_task(answer("bomb", bomb))
        await asyncio.sleep(0.05)  # the bomb is submitted first
        await asyncio.gather(first, answer("plain", request(tiny_model_dir, max_tokens=4)))

    asyncio.run(both())
    assert [(name, kind) for name, kind, _ in finished] == [
        ("plain", "DoneEvent"),
        ("bomb", "ErrorEvent"),
    ]
    assert "does not compile within 1 s and 256 MB" in finished[1][2]


def test_a_prepare_that_is_cancelled_stops_its_compile(service, tiny_model_dir):
    """The server's time cap (or a client gone) cancels a request's prepare: its trial
    compile stops at once instead of holding the compiler to its 1 s budget, so the next
    grammar compiles at once."""
    from engine.formats.grammar import _built

    asyncio.run(collect(service.load(str(tiny_model_dir))))

    async def scenario():
        await service.prepare(request(tiny_model_dir, json_schema={"type": "string"}))
        stopped = _built[2].stopped
        bomb = asyncio.create_task(
            service.prepare(request(tiny_model_dir, json_schema=regex_bomb()))
        )
        await asyncio.sleep(0.1)
        bomb.cancel()
        with pytest.raises(asyncio.CancelledError):
            await bomb
        began = time.monotonic()
        await service.prepare(request(tiny_model_dir, json_schema={"type": "integer"}))
        return time.monotonic() - began, _built[2].stopped - stopped

    seconds, stopped = asyncio.run(scenario())
    assert stopped == 1 and seconds < 0.6, (seconds, stopped)  # else 0.9 s of its budget left
