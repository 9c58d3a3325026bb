"""The desktop app end to end (pytest-qt, offscreen, tiny random-weight model).

Each test gets its own qasync loop marked as already running, so pytest-qt's waits (which
spin the Qt event loop) also run the app's asyncio tasks, exactly as in the real app.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt, QTimer
from PySide6.QtGui import QTextCursor

from app.presenters.livestats import footer_text
from app.views.render import highlighted_positions
from engine.events import DoneEvent, ModelEvent, PassEvent, TokenEvent

from .qt_loop import close_loop, open_loop


class RecordingStream:
    def __init__(self, stream, events):
        self.stream, self.events = stream, events

    def cancel(self):
        self.stream.cancel()

    def __aiter__(self):
        return self

    async def __anext__(self):
        event = await self.stream.__anext__()
        self.events.append(event)
        return event


async def _replaying(stream, known):
    """Pass a load stream through, replaying the ModelEvent of a model the shared service
    already holds (the engine announces a model only when it loads it, and these tests
    share one service between several app objects)."""
    announced = False
    async for event in stream:
        if isinstance(event, ModelEvent):
            known[:] = [event]
            announced = True
        elif (
            isinstance(event, DoneEvent)
            and event.finish_reason == "loaded"
            and not announced
            and known
        ):
            yield known[0]
        yield event


class RecordingService:
    """The real engine service, recording every request and event the app sees."""

    known_model: list = []

    def __init__(self, service):
        self.service = service
        self.requests, self.events = [], []

    def generate(self, request):
        self.requests.append(request)
        self.events.clear()
        return RecordingStream(self.service.generate(request), self.events)

    def load(self, spec=None):
        stream = self.service.load(spec)
        replayed = RecordingStream(_replaying(stream, self.known_model), [])
        replayed.cancel = stream.cancel
        return replayed

    def drafters(self):
        return self.service.drafters()

    def shutdown(self):
        pass

    def of(self, kind):
        return [e for e in self.events if isinstance(e, kind)]


@pytest.fixture(scope="module")
def engine_service(tiny_model_dir):
    """The service, the tiny model's verify cost measured (a model never measured on this
    machine decodes plainly: nothing would be drafted to highlight)."""
    from engine.runtime.service import EngineService

    service = EngineService()

    async def measure():
        return [event async for event in service.measure(str(tiny_model_dir))]

    assert asyncio.run(measure())[-1].finish_reason == "measured"
    yield service
    service.shutdown()


@pytest.fixture
def loop(qapp):
    event_loop = open_loop(qapp)
    yield event_loop
    close_loop(event_loop)


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DRAFTLESS_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


@pytest.fixture
def make_app(loop, dirs, engine_service, tiny_model_dir, qtbot):
    """Build an Application on the tiny model; close them all at the end."""
    from app.__main__ import Application

    made = []

    def build(load=True):
        service = RecordingService(engine_service)
        application = Application(service=service, theme_name="light")
        application.recorder = service
        qtbot.addWidget(application.window)
        application.window.resize(1100, 760)
        application.window.show()
        made.append(application)
        if load:
            finish(qtbot, application.start(str(tiny_model_dir)), 60)
            assert application.controller.models.model_name == tiny_model_dir.name
        return application

    yield build
    for application in made:
        if not application.window.isHidden() or application.controller.busy:
            finish(qtbot, asyncio.ensure_future(application.close()), 30)


def finish(qtbot, task, seconds=30):
    qtbot.waitUntil(task.done, timeout=int(seconds * 1000))
    return task.result()


def set_max_tokens(window, value):
    window.settings_panel.max_tokens.setValue(value)


def send(qtbot, window, text):
    before = window.controller.answer_task
    window.input.setFocus()
    window.input.setPlainText(text)
    qtbot.keyClick(window.input, Qt.Key_Return)
    assert window.input.toPlainText() == ""
    task = window.controller.answer_task
    assert task is not None and task is not before, "Enter did not send"
    return task


def expected_draft_mask(events):
    """Independently of app/storage/provenance.py: per character of the answer, all tokens drafted?"""
    mask, group, text = [], [], ""
    last_group = []
    for event in events:
        if isinstance(event, TokenEvent):
            group.append(event.from_draft)
            if event.text:
                mask += [all(group)] * len(event.text)
                text += event.text
                last_group, group = group, []
    done = [e for e in events if isinstance(e, DoneEvent)][-1]
    tail = done.text[len(text) :]
    if tail:
        if group:
            mask += [all(group)] * len(tail)
        else:  # the tail joins the last group
            mask += [all(last_group)] * len(tail)
    return mask, done


def point_of(body, position):
    cursor = QTextCursor(body.document())
    cursor.setPosition(position)
    rect = body.cursorRect(cursor)
    return QPoint(rect.left() + 2, rect.center().y())


# ---------------------------------------------------------------------------------------------
def test_answer_streams_with_highlights_gauge_and_footer_from_the_engine(
    make_app, qtbot, monkeypatch
):
    from app.views.transcript import MessageView

    application = make_app()
    window = application.window
    set_max_tokens(window, 300)
    refreshes = []
    original = MessageView.refresh

    def spy(view):
        original(view)
        if view.streaming:  # mid-answer the painting already follows the provenance
            painted_now = highlighted_positions(view.body.document())
            assert all(
                view.provenance.kind_at(view.body.render_map.source_index(p)) == "draft"
                for p in painted_now
            )
            refreshes.append((len(view.text), len(painted_now)))

    monkeypatch.setattr(MessageView, "refresh", spy)
    task = send(qtbot, window, "abc abc abc")
    finish(qtbot, task)
    assert not window.banner.messages, window.banner.messages
    events = application.recorder.events
    mask, done = expected_draft_mask(events)
    assert any(length for length, _ in refreshes), "the answer was not shown while being written"
    assert any(painted_now for _, painted_now in refreshes), "no highlight while being written"

    view = window.transcript.views[-1]
    assert view.role == "assistant" and view.text == done.text and not view.streaming
    assert len(mask) == len(done.text)
    assert any(mask) and not all(mask), "the tiny model should give both drafted and own tokens"
    painted = set(highlighted_positions(view.body.document()))
    checked = 0
    for position, source in view.body.render_map.by_position.items():
        assert (position in painted) == mask[source], (position, source)
        checked += 1
    assert checked > len(done.text) * 0.5

    # as raw text every character is shown, so the painting must equal the flags exactly
    window.markdown_action.setChecked(False)
    painted = set(highlighted_positions(view.body.document()))
    assert painted == {i for i, drafted in enumerate(mask) if drafted and done.text[i] != "\n"}
    assert view.body.render_map.by_position == {i: i for i, c in enumerate(done.text) if c != "\n"}

    # hovering a highlighted character names its pass, drafter and draft position
    position = min(painted)
    tip = view.body.tooltip_at(point_of(view.body, position))
    assert "pass" in tip and done.stats["drafter"] in tip and "position" in tip
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication, QToolTip

    point = point_of(view.body, position)
    QApplication.sendEvent(
        view.body.viewport(),
        QHelpEvent(QEvent.ToolTip, point, view.body.viewport().mapToGlobal(point)),
    )
    assert QToolTip.text() == tip

    # the gauge and the footer show the engine's own numbers
    passes = [e for e in events if isinstance(e, PassEvent)]
    assert sum(p.emitted for p in passes) == done.stats["emitted"] == len(done.tokens)
    bar = window.speculation_bar
    assert bar.gauge.mean == pytest.approx(
        done.stats["tokens_per_pass"], abs=1e-4
    )  # stored: 4 places
    assert bar.gauge.current == 0 and "–" in bar.current_label.text()  # no stale last pass
    assert f"{done.timing['tokens_per_s']:.1f}" in bar.speed_label.text()
    assert f"{done.stats['acceptance_rate']:.0%}" in bar.acceptance_label.text()
    assert view.footer.text() == footer_text(
        len(done.tokens), done.stats, done.timing, done.finish_reason
    )
    assert f"{done.stats['tokens_per_pass']:.1f} tokens/pass" in view.footer.text()

    # the highlight toggle removes and restores the painting
    window.speculation_bar.toggle.setChecked(False)
    assert highlighted_positions(view.body.document()) == []
    window.speculation_bar.toggle.setChecked(True)
    assert set(highlighted_positions(view.body.document())) == painted

    # the inspector shows this answer's per-position acceptance
    view.inspect_button.click()
    assert window.inspector.positions.series[0].values == pytest.approx(
        done.stats["per_position_acceptance"]
    )
    assert sum(window.inspector.lengths.series[0].values) == pytest.approx(1.0)


def counting_forever(make_app, qtbot):
    """An app whose answer runs long (3,500 tokens at most), 30 tokens into it: the
    application and the answer's task."""
    application = make_app()
    window, controller = application.window, application.controller
    set_max_tokens(window, 3500)
    task = send(qtbot, window, "Count forever")
    qtbot.waitUntil(
        lambda: controller.answer and len(controller.answer.provenance.tokens) > 30, timeout=30000
    )
    return application, task


def test_stop_cancels_within_a_pass_and_keeps_the_partial_answer(make_app, qtbot):
    application, task = counting_forever(make_app, qtbot)
    window, controller = application.window, application.controller
    stopped_at = time.perf_counter()
    assert window.stop_button.isEnabled()
    window.stop_button.click()
    finish(qtbot, task)
    latency = time.perf_counter() - stopped_at
    done = application.recorder.of(DoneEvent)[-1]
    assert done.finish_reason == "cancelled" and len(done.tokens) < 3500
    assert latency < 2.0
    stored = application.store.messages(controller.session.id)[-1]
    assert stored.role == "assistant" and stored.finish_reason == "cancelled"
    assert stored.content == done.text and len(stored.provenance.tokens) == len(done.tokens)
    assert window.transcript.views[-1].footer.text().endswith("stopped")
    assert window.send_button.isEnabled() and not window.stop_button.isEnabled()


def test_esc_in_the_composer_stops_within_a_pass_on_the_engine(make_app, qtbot):
    """Right after Send the composer has the focus; Esc there stops the engine's answer at
    its next pass, even in a window that is not the active one (issue 61)."""
    from PySide6.QtWidgets import QApplication

    from .test_app_keyboard import another_window_active

    application, task = counting_forever(make_app, qtbot)
    window, controller = application.window, application.controller
    another_window_active(qtbot)
    assert QApplication.focusWidget() is not window.input  # the keys go there all the same
    qtbot.keyClick(window.input, Qt.Key_Escape)
    assert controller.answer.stream.stream.cancelled  # the engine stops at its next pass
    finish(qtbot, task)
    done = application.recorder.of(DoneEvent)[-1]
    assert done.finish_reason == "cancelled" and len(done.tokens) < 3500
    assert window.transcript.views[-1].footer.text().endswith("stopped")


def test_settings_reach_the_request_persist_and_refuse_out_of_range(make_app, qtbot):
    from app.storage.settings import SettingsStore

    application = make_app()
    window = application.window
    panel = window.settings_panel
    drafters = application.service.drafters()
    other = next(name for name in drafters if name not in ("prompt-lookup", "none"))
    assert panel.drafter.count() == len(drafters)
    panel.drafter.setCurrentIndex(panel.drafter.findData(other))
    panel.draft_count.setValue(7)
    panel.ngram_order.setValue(3)
    panel.ngram_min.setValue(2)
    panel.temperature.setValue(0.5)
    panel.top_p.setValue(0.9)
    panel.max_tokens.setValue(40)
    panel.system_prompt.setPlainText("Be brief.")

    panel.draft_count.setValue(1000)  # clamped by the widget
    assert panel.draft_count.value() == 64
    panel.draft_count.lineEdit().selectAll()
    qtbot.keyClicks(panel.draft_count.lineEdit(), "99")  # the validator refuses the 2nd digit
    assert panel.draft_count.value() <= 64
    panel.draft_count.setValue(7)
    panel.temperature.setValue(9.0)
    assert panel.temperature.value() == 5.0
    panel.temperature.setValue(0.5)

    started = time.perf_counter()
    finish(qtbot, send(qtbot, window, "hello"))
    print(f"\nanswer with {other}, t=0.5: {time.perf_counter() - started:.1f} s")
    request = application.recorder.requests[-1]
    assert request.messages[0] == {"role": "system", "content": "Be brief."}
    assert (
        request.draft.drafter,
        request.draft.draft_count,
        request.draft.ngram_order,
        request.draft.ngram_min,
    ) == (other, 7, 3, 2)
    assert (request.sampling.temperature, request.sampling.top_p, request.max_tokens) == (
        0.5,
        0.9,
        40,
    )
    assert request.chat_id == application.controller.session.id
    done = application.recorder.of(DoneEvent)[-1]
    assert done.stats["drafter"] == other
    saved = SettingsStore().load()
    assert (saved.drafter, saved.draft_count, saved.system_prompt) == (other, 7, "Be brief.")


def test_sessions_survive_a_restart_with_their_highlighting(make_app, qtbot):
    first = make_app()
    set_max_tokens(first.window, 200)
    finish(qtbot, send(qtbot, first.window, "first question"))
    finish(qtbot, send(qtbot, first.window, "second question"))
    session_id = first.controller.session.id
    views = first.window.transcript.views
    before = [
        (v.role, v.text, sorted(highlighted_positions(v.body.document())), v.footer.text())
        for v in views
    ]
    assert [b[0] for b in before] == ["user", "assistant", "user", "assistant"]
    assert first.recorder.requests[-1].messages[-3]["content"] == "first question"
    finish(qtbot, asyncio.ensure_future(first.close()))

    second = make_app(load=False)
    window = second.window
    assert second.controller.session.id == session_id
    assert window.sessions_panel.list.count() == 1
    assert window.sessions_panel.list.item(0).text() == "first question"
    after = [
        (v.role, v.text, sorted(highlighted_positions(v.body.document())), v.footer.text())
        for v in window.transcript.views
    ]
    assert after == before

    # search, rename, delete (with confirmation), regenerate
    window.sessions_panel.search.setText("second question")
    assert window.sessions_panel.list.count() == 1
    window.sessions_panel.search.setText("no such words")  # only the open chat stays, in italics
    assert (
        window.sessions_panel.list.count() == 1
        and window.sessions_panel.list.item(0).font().italic()
    )
    window.sessions_panel.search.setText("")
    window.ask_text = lambda *args: "Renamed chat"
    window.rename_chat(session_id)
    assert second.store.session(session_id).title == "Renamed chat"
    finish(qtbot, second.start(None, use_saved=True))
    last_id = window.transcript.views[-1].message_id
    finish(qtbot, second.window.regenerate())
    assert len(window.transcript.views) == 4 and window.transcript.views[-1].message_id != last_id
    assert len(second.store.messages(session_id)) == 4
    from .test_app_views import answer_dialog

    seen = []
    answer_dialog(qtbot, "Cancel", seen)
    window.delete_chat(session_id)
    assert second.store.session(session_id) is not None
    answer_dialog(qtbot, "Delete", seen)
    window.delete_chat(session_id)
    assert second.store.session(session_id) is None
    assert (
        window.transcript.views == []
        and window.transcript.placeholder.isVisible() is False
        or window.transcript.views == []
    )


def test_corrupt_database_and_broken_model_folder_give_their_messages(make_app, qtbot, dirs):
    data = dirs / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "draftless.sqlite3").write_bytes(b"\x00garbage" * 512)
    application = make_app()
    banner = application.window.banner
    assert any("moved aside" in m for m in banner.messages) and banner.isVisible()
    assert any(".corrupt-" in f.name for f in data.iterdir())

    broken = dirs / "broken-model"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes(b"")
    finish(qtbot, application.controller.models.load_model(str(broken)), 60)
    assert "config.json is missing" in banner.messages[-1]
    assert application.window.settings_panel.folder_button.isEnabled()

    finish(qtbot, application.controller.models.load_model("nobody-here/no-such-model"), 90)
    assert "Could not download 'nobody-here/no-such-model'" in banner.messages[-1]
    # the previous model stays chosen, and chatting still works (the engine reloads it)
    set_max_tokens(application.window, 30)
    finish(qtbot, send(qtbot, application.window, "still there?"), 60)
    assert application.recorder.of(DoneEvent)


def measure_lateness(qtbot, application, prompt, seconds=60):
    """Event-loop lateness of a 10 ms timer while the app writes an answer."""
    lateness = []
    last = [time.perf_counter()]

    def tick():
        now = time.perf_counter()
        lateness.append(max(now - last[0] - 0.010, 0.0))
        last[0] = now

    timer = QTimer()
    timer.setTimerType(Qt.PreciseTimer)
    timer.setInterval(10)
    timer.timeout.connect(tick)
    task = send(qtbot, application.window, prompt)
    last[0] = time.perf_counter()
    timer.start()
    finish(qtbot, task, seconds)
    timer.stop()
    done = application.recorder.of(DoneEvent)[-1]
    worst = max(lateness)
    p95 = statistics.quantiles(lateness, n=20)[-1]
    print(
        f"\nevent-loop lateness over {len(lateness)} ticks, {len(done.tokens)} tokens at "
        f"{done.timing['tokens_per_s']:.0f} tok/s: median {statistics.median(lateness) * 1000:.1f} ms, "
        f"p95 {p95 * 1000:.1f} ms, max {worst * 1000:.1f} ms"
    )
    return done, p95, worst


def test_event_loop_stays_responsive_while_generating(make_app, qtbot):
    """The tiny model streams hundreds of tokens a second: the worst case for the GUI thread.
    Bounds are generous because the test machines are shared; the figures are printed."""
    application = make_app()
    set_max_tokens(application.window, 1000)
    done, p95, worst = measure_lateness(qtbot, application, "Write as much as you can")
    assert len(done.tokens) > 200
    assert p95 < 0.15 and worst < 1.0


@pytest.mark.slow
@pytest.mark.embedded
def test_event_loop_latency_with_the_embedded_model(loop, dirs, engine_service, qtbot):
    """The same measurement on the real default model (run with -m slow)."""
    from app.__main__ import Application

    service = RecordingService(engine_service)
    application = Application(service=service, theme_name="light")
    application.recorder = service
    qtbot.addWidget(application.window)
    application.window.show()
    finish(qtbot, application.start(None, use_saved=False), 300)
    set_max_tokens(application.window, 64)
    done, p95, worst = measure_lateness(
        qtbot, application, "Write a short poem about the sea.", 300
    )
    finish(qtbot, asyncio.ensure_future(application.close()))
    assert p95 < 0.15 and worst < 1.0


KILL_SCRIPT = r"""
import asyncio, os, signal, sys
import engine, qasync
from app.__main__ import Application, _qapp

app = _qapp()
loop = qasync.QEventLoop(app)
asyncio.set_event_loop(loop)

async def main():
    application = Application()
    application.window.show()
    await application.start(sys.argv[1])
    application.window.settings_panel.max_tokens.setValue(100)
    await application.window.send("first question")
    application.window.settings_panel.max_tokens.setValue(3000)
    task = application.window.send("second question")
    while len(application.controller.answer.provenance.tokens) < 20:
        if task.done():
            sys.exit("the second answer ended early: %s" % application.controller.answer.error)
        await asyncio.sleep(0.01)
    print("killing", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

with loop:
    loop.run_until_complete(main())
"""


@pytest.mark.slow
def test_killing_the_app_mid_answer_loses_no_earlier_message(dirs, tiny_model_dir):
    """SIGKILL during the second answer: the first exchange and the second question are
    on disk (a subprocess, ~30 s, so run with -m slow)."""
    import os
    import subprocess
    import sys

    from app.storage.store import Store

    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        DRAFTLESS_DATA_DIR=str(dirs / "data"),
        DRAFTLESS_CONFIG_DIR=str(dirs / "config"),
    )
    result = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, str(tiny_model_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=os.path.dirname(os.path.dirname(__file__)),
    )
    assert "killing" in result.stdout, result.stderr[-2000:]
    assert result.returncode == -9
    store = Store()
    assert store.notice is None
    [session] = store.sessions()
    messages = store.messages(session.id)
    assert [(m.role, m.content if m.role == "user" else m.finish_reason) for m in messages] == [
        ("user", "first question"),
        ("assistant", "length"),
        ("user", "second question"),
    ]
    assert messages[1].provenance.tokens and messages[1].stats["passes"] > 0


def test_compare_drafters_copy_and_shift_enter(make_app, qtbot):
    from PySide6.QtGui import QGuiApplication

    application = make_app()
    window = application.window
    set_max_tokens(window, 120)
    window.input.setFocus()
    window.input.setPlainText("abc abc abc")
    window.input.moveCursor(QTextCursor.End)
    qtbot.keyClick(window.input, Qt.Key_Return, Qt.ShiftModifier)  # a new line, not a send
    assert window.input.toPlainText() == "abc abc abc\n" and window.controller.answer_task is None
    finish(qtbot, send(qtbot, window, "abc abc abc"))
    window.settings_panel.drafter.setCurrentIndex(window.settings_panel.drafter.findData("none"))
    finish(qtbot, send(qtbot, window, "abc abc abc"))
    answers = [v for v in window.transcript.views if v.role == "assistant"]
    assert len(answers) == 2
    answers[0].inspect_button.click()
    window.inspector.inspect(answers[1].message_id, only=False)
    names = [s.name for s in window.inspector.positions.series]
    from engine.drafters import DEFAULT_DRAFTER

    assert len(names) == 2 and DEFAULT_DRAFTER in names[0] and "none" in names[1]
    assert window.inspector.positions.series[1].values == []  # "none" never drafts
    assert window.inspector.lengths.series[1].values == [1.0]  # every pass accepted 0 drafts
    answers[0].copy_button.click()
    assert QGuiApplication.clipboard().text() == answers[0].text


def test_a_saved_model_that_no_longer_loads_falls_back_to_the_built_in(make_app, qtbot, dirs):
    from app.storage.settings import AppSettings, SettingsStore

    gone = str(dirs / "model-that-was-deleted")
    SettingsStore().save(AppSettings(model=gone))
    application = make_app(load=False)
    asked, real_start = [], application.start

    def start(model=None, use_saved=True):
        asked.append(model)
        if model is None:  # the built-in model: not loaded in this test
            return asyncio.ensure_future(asyncio.sleep(0))
        return real_start(model, use_saved=use_saved)

    application.start = start
    finish(qtbot, asyncio.ensure_future(application.start_or_fall_back()), 60)
    assert asked == [gone, None]
    assert f"No model folder at {gone}" in application.window.banner.messages[-1]
    assert application.window.banner.messages[-1].endswith("Using the built-in model instead.")


def test_the_model_line_names_architecture_size_quantization_and_speculation(make_app):
    panel = make_app().window.settings_panel
    assert "llama · 90.6K params · float32" in panel.model_name.text()
    assert panel.speculation.text().startswith("Speculation on (tree)")


def test_a_model_download_can_be_cancelled_and_resumes_when_chosen_again(
    make_app, qtbot, tiny_model_dir, tmp_path, monkeypatch
):
    from huggingface_hub import constants

    from engine.models import hub_download

    from .fake_hub import COMMIT, FakeHub

    monkeypatch.setattr(hub_download, "CHUNK_BYTES", 16 * 1024)
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", constants.DOWNLOAD_CHUNK_SIZE)
    monkeypatch.setenv("DRAFTLESS_DOWNLOADS_DIR", str(tmp_path / "downloads"))
    application = make_app()
    window, controller, repo = application.window, application.controller, "tiny-org/tiny-llama"
    weights = f"/{repo}/resolve/{COMMIT}/model.safetensors"
    # the weights (356 KB) over 4.5 s, so that the GUI thread, sharing the cores with the other
    # test worker, clicks Cancel before they are all in (at 0.02 s a piece, 1.8 s in all, this
    # test failed once in four two-worker runs of the suite)
    with FakeHub({repo: tiny_model_dir}, slow={"model.safetensors"}, pause=0.05) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        task = controller.models.load_model(repo)
        qtbot.waitUntil(lambda: ("GET", weights, None) in hub.requests, timeout=30000)
        picker = window.model_presenter.picker  # the load's progress, no dialog
        qtbot.waitUntil(lambda: picker.cancel_button.isVisible(), timeout=10000)
        started = picker.bar.value()
        qtbot.waitUntil(lambda: picker.bar.value() > started, timeout=10000)  # mid-file
        assert "%" in picker.button.text()
        picker.cancel_button.click()
        finish(qtbot, task, 30)
        assert "cancelled" in window.banner.messages[-1]
        assert controller.models.model_name == tiny_model_dir.name  # the previous model stays
        partial = next((tmp_path / "downloads").rglob("model.safetensors.*.part"))
        kept = partial.stat().st_size
        assert 0 < kept < (tiny_model_dir / "model.safetensors").stat().st_size

        finish(qtbot, controller.models.load_model(repo), 60)  # chosen again: resumes
    assert ("GET", weights, f"bytes={kept}-") in hub.requests
    assert controller.models.model_name == repo and controller.settings.model == repo
