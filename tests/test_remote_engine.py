"""The app's remote engine: the same events from a Draftless server as from the local service."""

from __future__ import annotations

import asyncio

import pytest

from app.engines.remote_engine import RemoteEngine, api_base
from engine.events import DoneEvent, ErrorEvent, ModelEvent, PassEvent, ProgressEvent, TokenEvent
from engine.settings import DraftSettings, GenerationRequest

from .hostile_remote import HostileServer
from .server_process import Server, free_port
from .test_app_gui import (  # the fixtures dirs, engine_service, loop, make_app by name
    RecordingService,
    dirs,  # noqa: F401
    engine_service,  # noqa: F401
    expected_draft_mask,  # noqa: F401
    finish,
    loop,  # noqa: F401
    make_app,  # noqa: F401
    send,
    set_max_tokens,
)


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    running = Server("--model", str(tiny_model_dir), "--api-key", "k3y").wait_ready()
    yield running
    running.stop()


def collect(stream, stop_after=None):
    async def run():
        events = []
        async for event in stream:
            events.append(event)
            if (
                stop_after is not None
                and sum(isinstance(e, PassEvent) for e in events) == stop_after
            ):
                stream.cancel()
        return events

    return asyncio.run(run())


def request(max_tokens=24, chat_id=None):
    return GenerationRequest(
        messages=[{"role": "user", "content": "abc abc abc"}],
        max_tokens=max_tokens,
        chat_id=chat_id,
        draft=DraftSettings(drafter="prompt-lookup", adaptive=False),
    )


def test_api_base_forms():
    assert api_base("studio.local:8080") == "http://studio.local:8080/v1"
    assert api_base("http://10.0.0.2:8080/v1/") == "http://10.0.0.2:8080/v1"


def test_remote_events_equal_the_local_engine_events(server, tiny_model_dir):
    from engine.runtime.service import EngineService

    remote = RemoteEngine(server.url, "k3y")
    loaded = collect(remote.load())
    assert isinstance(loaded[0], ModelEvent) and loaded[0].name == tiny_model_dir.name
    remote_events = collect(remote.generate(request()))
    local = EngineService()
    try:
        local_events = collect(
            local.generate(
                GenerationRequest(**{**request().__dict__, "model": str(tiny_model_dir)})
            )
        )
    finally:
        local.shutdown()

    def shape(events):
        return (
            [
                (e.token, e.text, e.from_draft, e.pass_index, e.draft_position, e.drafter)
                for e in events
                if isinstance(e, TokenEvent)
            ],
            [
                (e.pass_index, e.drafted, e.accepted, e.emitted)
                for e in events
                if isinstance(e, PassEvent)
            ],
        )

    assert shape(remote_events) == shape(local_events)
    remote_done, local_done = remote_events[-1], local_events[-1]
    assert isinstance(remote_done, DoneEvent)
    assert (
        remote_done.text,
        remote_done.tokens,
        remote_done.from_draft,
        remote_done.finish_reason,
    ) == (local_done.text, local_done.tokens, local_done.from_draft, local_done.finish_reason)
    for key in ("passes", "accepted", "drafted", "tokens_per_pass", "per_position_acceptance"):
        assert remote_done.stats[key] == local_done.stats[key], key


def test_a_remote_chat_keeps_its_server_cache_under_the_id_the_server_issued(server):
    remote = RemoteEngine(server.url, "k3y")
    collect(remote.load())
    first = collect(remote.generate(request(max_tokens=4, chat_id="local-chat")))[-1]
    issued = remote.server_chat_ids["local-chat"]
    assert issued != "local-chat"  # the server honours only ids it issued
    turn = GenerationRequest(
        messages=[
            {"role": "user", "content": "abc abc abc"},
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": "abc"},
        ],
        max_tokens=4,
        chat_id="local-chat",
        draft=DraftSettings(drafter="prompt-lookup", adaptive=False),
    )
    second = collect(remote.generate(turn))[-1]
    assert isinstance(second, DoneEvent)
    assert second.timing["prefilled_tokens"] < second.timing["prompt_tokens"] - 1  # reused
    assert remote.server_chat_ids["local-chat"] == issued


def test_stopping_a_remote_answer_cancels_it_on_the_server(server):
    events = collect(RemoteEngine(server.url, "k3y").generate(request(4000)), stop_after=2)
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.finish_reason == "cancelled"
    assert 0 < len(done.tokens) < 4000 and done.stats["passes"] >= 2
    import time

    deadline = time.monotonic() + 60
    while server.health("k3y")["running"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.health("k3y")["last"]["finish_reason"] == "cancelled"


def test_unreachable_server_and_wrong_key_are_clear_messages(server):
    unreachable = collect(RemoteEngine(f"127.0.0.1:{free_port()}").load())
    assert isinstance(unreachable[-1], ErrorEvent)
    assert "Cannot reach the Draftless server" in unreachable[-1].message
    refused = collect(RemoteEngine(server.url, "wrong").generate(request()))
    assert isinstance(refused[-1], ErrorEvent) and "refused the API key" in refused[-1].message


def test_app_chat_runs_on_the_server_with_highlights_gauge_and_inspector(
    make_app, qtbot, server, tiny_model_dir
):
    application = make_app()
    window, controller = application.window, application.controller
    set_max_tokens(window, 60)
    remote = RecordingService(RemoteEngine(server.url, "k3y"))
    finish(qtbot, controller.models.use_engine(remote), 60)
    assert controller.models.service is remote
    assert controller.models.model_path == server.url
    finish(qtbot, send(qtbot, window, "abc abc abc"), 60)
    assert not window.banner.messages, window.banner.messages
    mask, done = expected_draft_mask(remote.events)
    view = window.transcript.views[-1]
    assert view.text == done.text and any(mask)
    window.markdown_action.setChecked(False)
    from app.views.render import highlighted_positions

    painted = set(highlighted_positions(view.body.document()))
    assert painted == {i for i, drafted in enumerate(mask) if drafted and done.text[i] != "\n"}
    assert window.speculation_bar.gauge.mean == pytest.approx(
        done.stats["tokens_per_pass"], abs=1e-4
    )
    view.inspect_button.click()
    assert window.inspector.positions.series[0].values == pytest.approx(
        done.stats["per_position_acceptance"]
    )
    panel = window.inspector.replay  # replayed here, from the streamed tokens
    panel.run_button.click()
    qtbot.waitUntil(panel.run_button.isEnabled, timeout=30000)
    assert panel.table.rowCount() > 0, panel.status.text()
    assert all(not r.exact and len(r.from_draft) == len(done.tokens) for r in panel.results)

    # back to this machine's engine from the menu
    finish(qtbot, controller.models.use_engine(controller.models.local_service), 60)
    assert controller.models.service is controller.models.local_service


def test_connect_to_an_unreachable_server_keeps_the_local_engine(make_app, qtbot):
    application = make_app()
    window, controller = application.window, application.controller
    window.ask_server = lambda *args: (f"http://127.0.0.1:{free_port()}", None)
    window.model_presenter.connect_server()
    qtbot.waitUntil(lambda: not controller.models.loading and not controller._tasks, timeout=30000)
    assert controller.models.service is controller.models.local_service
    assert any("Cannot reach the Draftless server" in m for m in window.banner.messages)
    assert not window.server_label.isVisible() and not controller.settings.server_url


@pytest.mark.parametrize("opened", [True, False])
def test_a_think_block_the_template_opened_reaches_the_app_through_the_server(opened):
    """The server's first chunk says (draftless.thinking) what the engine's prompt event
    said, and the remote engine gives the app the same "prefill" event the local one does."""
    from openai.types.chat import ChatCompletionChunk

    from .scripted_engine import ScriptedService, answer_events
    from .test_server_hostile import CHAT, HELLO, call, scripted_app

    service = ScriptedService()
    prompt_read = ProgressEvent("prefill", 9, 9, "Prompt read", thinking=opened)
    passes = [(0, [("Let me", False)]), (0, [(" add.", False)])]  # cut off before </think>
    service.queue([prompt_read, *answer_events(passes)])
    body = {"messages": HELLO, "stream": True, "stream_options": {"include_usage": True}}
    status, sse = asyncio.run(call(scripted_app(service), body, path=CHAT))
    data = [line[6:] for line in sse.decode().splitlines() if line.startswith("data: ")]
    chunks = [ChatCompletionChunk.model_validate_json(d) for d in data if d != "[DONE]"]
    said = [(c.model_extra.get("draftless") or {}).get("thinking") for c in chunks]
    assert status == 200 and said == [True if opened else None, None, None, None]

    hostile = HostileServer().answer(sse)  # serves the scripted server's reply as it is
    try:
        remote = RemoteEngine(hostile.url, "k3y")
        collect(remote.load())
        events = collect(remote.generate(request()))
    finally:
        hostile.close()
    prompt_events = [e for e in events if isinstance(e, ProgressEvent)]
    assert [e.thinking for e in prompt_events] == ([True] if opened else [])
    assert isinstance(events[-1], DoneEvent) and events[-1].text == "Let me add."
    if opened:  # after the first chunk's tokens: the answer has text when the card hears it
        first_token = next(i for i, e in enumerate(events) if isinstance(e, TokenEvent))
        assert first_token < events.index(prompt_events[0])


def test_the_partial_answer_survives_a_killed_server(make_app, qtbot, tiny_model_dir):
    """The server dies mid-answer: what it had streamed stays, marked interrupted with the
    reason, with Retry and Continue (issue 61)."""
    doomed = Server("--model", str(tiny_model_dir)).wait_ready()
    try:
        application = make_app()
        window, controller = application.window, application.controller
        set_max_tokens(window, 3500)
        finish(qtbot, controller.models.use_engine(RemoteEngine(doomed.url, None)), 60)
        task = send(qtbot, window, "Count forever")
        qtbot.waitUntil(
            lambda: controller.answer and len(controller.answer.provenance.tokens) > 21,
            timeout=60000,
        )
        doomed.process.kill()
        streamed = [t.token for t in controller.answer.provenance.tokens]  # when it died
        finish(qtbot, task, 60)
    finally:
        doomed.stop()
    stored = application.store.messages(controller.session.id)[-1]
    assert stored.role == "assistant" and stored.finish_reason == "interrupted"
    kept = [t.token for t in stored.provenance.tokens]
    assert len(streamed) > 21 and kept[: len(streamed)] == streamed
    view = window.transcript.views[-1]
    assert view.text == stored.content and "interrupted: " in view.footer.text()
    assert view.regenerate_button.text() == "Retry" and view.continue_button.isVisible()
    assert window.send_button.isEnabled()
