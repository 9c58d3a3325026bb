"""Big inputs told before they cost (issue 61): an attached file's tokens on its chip and in
the context meter before Send, the wait they mean at the measured reading pace, the time
left of a long prompt read, "nearly full" by the real measure, and where the meter sits."""

from __future__ import annotations

import asyncio
from dataclasses import replace


from app.storage.downloads import DownloadMeter
from engine.events import DoneEvent, ProgressEvent

from .test_app_knobs import STOPPED, load_model_with_window
from .test_app_views import SIMPLE, answer_events, app, ask, loop, wait  # noqa: F401

NOTES = ("All work and no play makes Jack a dull boy. " * 465).strip()  # 20 KB of text


def measured_reading(events, tokens: int, seconds: float):
    """A scripted answer whose engine read ``tokens`` prompt tokens in ``seconds``."""
    done = events[-1]
    timing = {**done.timing, "prompt_tokens": tokens, "prefilled_tokens": tokens}
    events[-1] = replace(done, timing={**timing, "prefill_s": seconds})
    return events


def test_an_attached_file_costs_its_tokens_on_its_chip_and_in_the_meter_before_send(
    app, qtbot, tmp_path
):
    window, composer, meter = app.window, app.window.composer, app.window.context_meter
    load_model_with_window(app, 32768)
    window.settings_panel.max_tokens.setValue(256)
    app.scripted.count_tokens = lambda text: len(text.split()) + 2  # the engine's tokenizer
    path = tmp_path / "notes.txt"
    path.write_text(NOTES)
    wait(qtbot, composer.attach_files([path]))
    [chip] = composer.chips.chips
    counted = sum(app.scripted.count_tokens(t) for t in [composer.message("")])
    assert chip.label.text().endswith(f" · {counted:,} tokens")  # counted, not "≈"
    assert meter.text() == f"{counted:,} / 32,768 tokens"  # it read "0 / 32,768" before
    assert "files attached add" in meter.toolTip()
    assert composer.cost.text().startswith(f"{counted:,} tokens attached")
    assert "measured with an answer" in composer.cost.text()  # no pace known yet

    measured = measured_reading(answer_events(SIMPLE), 3850, 294.0)  # 13 tokens a second
    ask(qtbot, app, "Summarize the notes", measured)  # sends the file: nothing pending now
    assert composer.cost.text() == "" and meter.text() == "3,855 / 32,768 tokens"
    wait(qtbot, composer.attach_files([path]))
    assert "reads them in about 6 min (13 tokens/s here)" in composer.cost.text()


def test_a_long_prompt_read_says_the_time_left(app, qtbot):
    window = app.window
    ask(qtbot, app, "first", measured_reading(answer_events(SIMPLE), 3850, 294.0))
    gate = asyncio.Event()
    app.scripted.queue(
        [ProgressEvent("prefill", 0, 7700, "Reading the prompt…"), gate] + answer_events(SIMPLE)
    )
    task = window.send("a long one")
    qtbot.waitUntil(lambda: window.transcript.streaming_view is not None)
    view = window.transcript.streaming_view
    qtbot.waitUntil(lambda: view.reading is not None)
    text = view.body.toPlainText()
    assert "Reading the prompt… 0% of 7,700 tokens · about 10 min left" in text
    gate.set()
    wait(qtbot, task)


def test_nearly_full_is_said_by_the_chat_not_by_max_tokens(app, qtbot):
    meter = app.window.context_meter
    load_model_with_window(app, 8192)
    app.window.settings_panel.max_tokens.setValue(4608)
    ask(qtbot, app, "hi", answer_events(STOPPED, prompt_tokens=3900))  # 48% of the window
    assert meter.text() == "3,902 / 8,192 tokens — lower Max tokens"
    assert "nearly full" not in meter.text() and meter.property("warning")
    assert "Lower Max tokens to 4,290 or less" in meter.toolTip()
    app.window.settings_panel.max_tokens.setValue(1024)
    assert meter.text() == "3,902 / 8,192 tokens" and not meter.property("warning")


def test_the_meter_sits_under_send_and_settings_comes_before_quit(app, qtbot):
    window = app.window
    meter, send = window.context_meter, window.send_button
    assert window.composer.isAncestorOf(meter)
    meter_box = meter.geometry().translated(
        meter.parentWidget().mapTo(window, meter.pos()) - meter.pos()
    )
    send_box = send.geometry().translated(
        send.parentWidget().mapTo(window, send.pos()) - send.pos()
    )
    assert (
        meter_box.top()
        >= window.stop_button.mapTo(window, window.stop_button.rect().bottomLeft()).y()
    )
    assert abs(meter_box.right() - send_box.right()) <= 16  # right under the buttons
    chat_menu = window.menuBar().actions()[0].menu()
    names = [a.text() for a in chat_menu.actions() if a.text()]
    assert names.index("Settings…") < names.index("Quit") == len(names) - 1


def test_a_stalled_download_says_so_instead_of_a_frozen_time_left():
    meter = DownloadMeter()
    meter.update(0, 542_000_000, 0.0)
    meter.update(1_000_000, 542_000_000, 1.0)
    moving = meter.describe("owner/model", 1.0)
    assert "1.0 MB/s" in moving and "about 9 min left" in moving
    later = meter.describe("owner/model", 3.0)  # no bytes for 2 s: the speed falls
    assert "about 27 min left" in later
    stalled = meter.describe("owner/model", 10.0)  # none for 9 s
    assert "no data for 9 s" in stalled and "left" not in stalled


def test_the_download_line_follows_the_clock_while_bytes_stall(app, qtbot):
    gate = asyncio.Event()
    app.scripted.download_script = [
        ProgressEvent("download", 0, 542_000_000, "Downloading owner/model"),
        ProgressEvent("download", 1_000_000, 542_000_000, "Downloading owner/model"),
        gate,
        DoneEvent("downloaded", "/downloads/owner--model", [], []),
    ]
    app.controller.models.download("owner/model", then_load=False)
    bar = app.window.download_bar
    qtbot.waitUntil(lambda: "542.0 MB" in bar.label.text())
    first = bar.label.text()
    qtbot.waitUntil(lambda: bar.label.text() != first, timeout=5000)  # no new bytes came
    gate.set()
    qtbot.waitUntil(lambda: not app.controller.models.download_stream)
