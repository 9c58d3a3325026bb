"""The app's remote engine against a hostile server on loopback: bad token ids and types,
silence, an endless stream and an enormous chunk each end the answer with a message naming
the server, or end it at once on Stop, and never hold more than the bounds allow."""

from __future__ import annotations

import asyncio

import pytest

from app.engines.remote_engine import QUEUED_EVENTS, RemoteEngine
from app.engines.remote_reply import MAX_TOKENS_PER_CHUNK
from app.presenters.continuable import INTERRUPTED
from engine.events import DoneEvent, ErrorEvent, ModelEvent, PassEvent, TokenEvent
from engine.settings import DraftSettings, GenerationRequest

from .hostile_remote import HostileServer, final_chunk, pass_chunk
from .test_app_views import app, loop, wait  # noqa: F401  (app, loop: fixtures by name)

# Generous bounds on how long an answer may take to end (the machine may be loaded); the
# old client waited the 600 s HTTP timeout
ENDS_WITHIN_S = 20


@pytest.fixture(scope="module")
def hostile():
    server = HostileServer()
    yield server
    server.close()


def request(max_tokens=8):
    return GenerationRequest(
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=max_tokens,
        draft=DraftSettings(drafter="suffix"),
    )


def answer(engine, max_tokens=8, stop_when=None):
    """The events of one answer; ``stop_when(events)`` true: Stop is pressed."""

    async def run():
        stream, events = engine.generate(request(max_tokens)), []
        async for event in stream:
            events.append(event)
            if stop_when is not None and stop_when(events):
                stream.cancel()
        return events

    return asyncio.run(asyncio.wait_for(run(), ENDS_WITHIN_S))


def loaded(server) -> RemoteEngine:
    engine = RemoteEngine(server.url)
    events = asyncio.run(collect(engine.load()))
    assert isinstance(events[0], ModelEvent) and events[0].name == "hostile"
    return engine


async def collect(stream):
    return [event async for event in stream]


def test_a_well_formed_reply_becomes_the_engines_events(hostile):
    hostile.answer(pass_chunk(0, [5, 6], ["Hi", "!"]) + final_chunk())
    events = answer(loaded(hostile))
    assert [e.token for e in events if isinstance(e, TokenEvent)] == [5, 6]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.text == "Hi!" and done.tokens == [5, 6]
    assert done.finish_reason == "stop" and done.stats["passes"] == 1


@pytest.mark.parametrize("bad_id", [-1, 10**30, "x", None, True, 1.5])
def test_a_token_id_outside_the_vocabulary_ends_the_answer_naming_the_server(hostile, bad_id):
    hostile.answer(pass_chunk(0, [5]) + pass_chunk(1, [bad_id]) + final_chunk())
    events = answer(loaded(hostile))
    assert [e.token for e in events if isinstance(e, TokenEvent)] == [5]  # the good pass only
    error = events[-1]
    assert isinstance(error, ErrorEvent) and hostile.url in error.message
    assert "token 0 of pass 1" in error.message and "not a token id" in error.message


@pytest.mark.parametrize(
    "fields, said",
    [
        ({"texts": [5]}, "token text"),
        ({"from_draft": ["yes"]}, "draft flags"),
        ({"draft_position": [-3]}, "draft position"),
        ({"seconds": float("nan")}, "seconds"),
        ({"accepted": 9}, "accepted 9 of 0"),
        ({"pass": "first"}, "pass index"),
        ({"drafter": ["suffix"]}, "drafter"),
    ],
)
def test_a_field_of_the_wrong_type_or_size_ends_the_answer(hostile, fields, said):
    hostile.answer(pass_chunk(0, [5], **fields) + final_chunk())
    error = answer(loaded(hostile))[-1]
    assert isinstance(error, ErrorEvent) and said in error.message, error


def test_a_reply_that_is_not_json_or_nests_too_deep_is_a_bad_reply(hostile):
    deep = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    for reply in (b"data: {not json\n\n", deep):
        error = answer(loaded(hostile.answer(reply)))[-1]
        assert isinstance(error, ErrorEvent) and "not JSON" in error.message


def test_a_chunk_of_two_million_tokens_is_refused_before_it_is_held(hostile):
    huge = pass_chunk(0, [7] * 2_000_000)  # ~16 MB on one line
    error = answer(loaded(hostile.answer(huge + final_chunk())), 32768)[-1]
    assert isinstance(error, ErrorEvent) and "line longer than" in error.message
    too_many = pass_chunk(0, [7] * (MAX_TOKENS_PER_CHUNK + 1))  # short enough, too many
    error = answer(loaded(hostile.answer(too_many + final_chunk())), 32768)[-1]
    assert isinstance(error, ErrorEvent) and "more than one pass can give" in error.message


def test_an_endless_stream_ends_at_the_tokens_asked_for(hostile):
    events = answer(loaded(hostile.answer("endless")), max_tokens=8)
    assert sum(isinstance(e, TokenEvent) for e in events) == 8
    assert isinstance(events[-1], ErrorEvent) and "more than the 8 tokens" in events[-1].message
    assert hostile.hung_up.wait(ENDS_WITHIN_S)  # the connection was closed


def test_stop_ends_an_endless_stream_at_once_and_drops_what_was_received(hostile):
    engine = loaded(hostile.answer("endless"))
    passes_at_stop = 2
    events = answer(
        engine,
        max_tokens=32768,
        stop_when=lambda seen: sum(isinstance(e, PassEvent) for e in seen) == passes_at_stop,
    )
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.finish_reason == "cancelled"
    assert len(done.tokens) == passes_at_stop and done.stats["passes"] == passes_at_stop
    assert len(events) == 2 * passes_at_stop + 1  # a token and a pass each, then Done
    assert hostile.hung_up.wait(ENDS_WITHIN_S)


def test_what_is_received_waits_in_a_bounded_queue(hostile):
    """The app taking nothing for a while: the request reads ahead at most QUEUED_EVENTS."""
    engine = loaded(hostile.answer("endless"))

    async def run():
        stream = engine.generate(request(32768))
        first = await stream.__anext__()
        for _ in range(200):  # let the request run ahead as far as it can
            await asyncio.sleep(0.005)
        queued = stream._queue.qsize()
        stream.cancel()
        rest = [event async for event in stream]
        return first, queued, rest

    first, queued, rest = asyncio.run(asyncio.wait_for(run(), ENDS_WITHIN_S))
    assert isinstance(first, TokenEvent) and 0 < queued <= QUEUED_EVENTS
    assert [type(e) for e in rest] == [DoneEvent] and rest[0].finish_reason == "cancelled"


def test_stop_ends_a_request_the_server_never_answers(hostile):
    engine = loaded(hostile)
    hostile.answer("silent")

    async def run():
        stream = engine.generate(request())
        reading = asyncio.ensure_future(collect(stream))
        while not hostile.arrived.is_set():
            await asyncio.sleep(0.01)
        stream.cancel()
        return await reading

    events = asyncio.run(asyncio.wait_for(run(), ENDS_WITHIN_S))
    assert [type(e) for e in events] == [DoneEvent] and events[0].finish_reason == "cancelled"
    assert hostile.hung_up.wait(ENDS_WITHIN_S)  # the request was cancelled, not left open


def test_a_server_that_stays_silent_times_out_with_a_message_saying_so(hostile):
    engine = RemoteEngine(hostile.url, read_timeout=0.3)
    asyncio.run(collect(engine.load()))
    hostile.answer("silent")
    error = answer(engine)[-1]
    assert isinstance(error, ErrorEvent) and "sent nothing for 0.3 s" in error.message


def test_in_the_app_a_bad_chunk_is_a_banner_naming_the_server_and_stop_is_at_once(
    app, hostile, qtbot
):
    """The app connected to the hostile server: bad ids end the answer with a banner that
    names the server (not a failed save blaming the disk), nothing bad is stored (what came
    before the bad chunk is kept as an interrupted answer, as any answer a server fails
    mid-way), and Stop on a server that never answers frees the window at once."""
    window, controller = app.window, app.controller
    wait(qtbot, controller.models.use_engine(RemoteEngine(hostile.url)))
    assert controller.models.server_url == f"{hostile.url}/v1"
    hostile.answer(pass_chunk(0, [5]) + pass_chunk(1, [10**30]) + final_chunk())
    wait(qtbot, window.send("hello"), ENDS_WITHIN_S)
    shown = window.banner.label.text()
    assert hostile.url in shown and "not a token id" in shown and "disk" not in shown
    assert not controller.busy and window.send_button.isEnabled()
    assert [m.role for m in controller.messages] == ["user", "assistant"]
    kept = controller.messages[-1]
    assert kept.finish_reason == INTERRUPTED and hostile.url in kept.stats[INTERRUPTED]
    assert [t.token for t in kept.provenance.tokens] == [5]  # nothing of the bad chunk

    hostile.answer("silent")
    task = window.send("again")
    qtbot.waitUntil(hostile.arrived.is_set, timeout=ENDS_WITHIN_S * 1000)
    controller.stop()
    wait(qtbot, task, ENDS_WITHIN_S)
    assert not controller.busy and hostile.hung_up.wait(ENDS_WITHIN_S)
