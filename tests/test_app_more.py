"""The app on a server, in narrow windows, with long chats: views fed scripted engine
events (no model)."""

from __future__ import annotations

import time

from PySide6.QtWidgets import QApplication

from .scripted_engine import END, ScriptedService, answer_events
from .test_app_views import app, ask, loop, wait  # noqa: F401


class ServerLike(ScriptedService):
    """What the controller sees of ``RemoteEngine``: an ``engine.api.Engine`` that answers,
    not a ``LocalEngine`` (None marks a protocol method as missing)."""

    replay = None


WORDS = ["one ", "two ", "three ", "four "] * 6
REPEATING = [(0, [(w, False)]) for w in WORDS] + [(0, [(END, False)])]


# 1. replay of a server's answer -------------------------------------------------------------
def test_replay_of_a_server_answer_runs_here_from_its_tokens_as_estimates(app, qtbot):
    window, controller = app.window, app.controller
    remote = ServerLike()
    controller.models.service = remote  # as after Connect to server…
    remote.queue(answer_events(REPEATING))
    wait(qtbot, window.send("count"))
    view = window.transcript.views[-1]
    view.inspect_button.click()
    panel = window.inspector.replay
    panel.draft_counts.setText("2, 4")
    panel.run_button.click()
    qtbot.waitUntil(
        lambda: (
            panel.table.rowCount() > 0
            or "Replay" not in panel.status.text()
            or panel.run_button.isEnabled()
        ),
        timeout=5000,
    )
    assert panel.table.rowCount() == 4 * 2, panel.status.text()  # 4 drafters, k 2 and 4
    assert panel.run_button.isEnabled()
    assert all(not r.exact and "prompt not recorded" in r.notes[0] for r in panel.results)
    assert panel.results[0].stats["tokens_per_pass"] > 1.5  # the repeats are found
    assert "estimates" in panel.status.text().lower()
    assert not window.banner.isVisible()


def test_a_replay_that_fails_says_so_in_the_panel(app, qtbot, monkeypatch):
    window = app.window
    ask(qtbot, app, "count", answer_events(REPEATING))
    window.transcript.views[-1].inspect_button.click()
    panel = window.inspector.replay

    def broken(*_args, **_kwargs):
        raise RuntimeError("the engine thread is gone")

    monkeypatch.setattr(app.scripted, "replay", broken)
    panel.run_button.click()
    qtbot.waitUntil(panel.run_button.isEnabled, timeout=5000)
    assert "Replay failed" in panel.status.text() and "engine thread is gone" in panel.status.text()
    assert panel.table.rowCount() == 0


# 2. narrow windows --------------------------------------------------------------------------
def resize(window, width, height=760):
    for _ in range(2):  # docks settle in a second layout pass
        window.resize(width, height)
        QApplication.processEvents()


def chat_width(window):
    return window.transcript.viewport().width()


def test_side_panels_fold_before_the_chat_and_come_back_at_full_width(app, qtbot):
    from app.views.panel_layout import CHAT_MIN

    window = app.window
    ask(qtbot, app, "a question " * 30, answer_events(REPEATING))
    for width in (600, 700):
        resize(window, width)
        assert window.width() == width
        assert chat_width(window) >= CHAT_MIN - 40, (width, chat_width(window))
        assert not window.sessions_dock.isVisible() and not window.settings_dock.isVisible()
    for width in (1280, 1920):
        resize(window, width)
        assert window.sessions_dock.isVisible() and window.settings_dock.isVisible()
        assert window.sessions_dock.width() >= 200, window.sessions_dock.width()
        delete = window.sessions_panel.delete_button
        assert delete.width() >= delete.sizeHint().width()  # not clipped
        assert chat_width(window) >= CHAT_MIN - 40


def assert_cards_fit(window):
    """Every message card, and every button shown on it, lies inside the chat's width."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QToolButton

    viewport = window.transcript.viewport()
    for view in window.transcript.views:
        widgets = [view, *(b for b in view.findChildren(QToolButton) if b.isVisible())]
        for widget in widgets:
            right = widget.mapTo(viewport, QPoint(widget.width(), 0)).x()
            assert right <= viewport.width(), widget.text() if widget is not view else view.role


def test_showing_a_panel_in_a_narrow_window_never_widens_it(app, qtbot):
    from app.views.gauge import one_line_width

    window = app.window
    ask(qtbot, app, "a question", answer_events(REPEATING))
    resize(window, 600)
    window.sessions_dock.toggleViewAction().trigger()  # View ▸ Chats
    QApplication.processEvents()
    assert window.sessions_dock.isVisible() and window.width() == 600
    assert window.sessions_dock.width() >= 200 and chat_width(window) >= 300
    window.show_settings()  # Ctrl+,: the settings column takes the chat list's place
    QApplication.processEvents()
    assert window.settings_dock.isVisible() and window.width() == 600
    assert not window.sessions_dock.isVisible()
    panel = window.settings_panel
    assert panel.widget().width() >= panel.widget().minimumSizeHint().width()  # nothing clipped
    assert panel.widget().width() <= panel.viewport().width()  # nor cut off by the dock
    assert window.settings_dock.geometry().right() < window.width()  # nor by the window
    assert chat_width(window) >= 250
    assert_cards_fit(window)
    bar = window.speculation_bar  # its figures wrap rather than run past the chat's edge
    bar.show_replay({"tokens_per_pass": 2.5, "estimated_speedup": 1.5}, 8, "ngram-map-k4v k=8 n=4")
    QApplication.processEvents()
    for label in bar.figures:
        assert label.wordWrap() or label.width() >= one_line_width(label), label.text()
    window.transcript.views[-1].inspect_button.click()
    QApplication.processEvents()
    assert window.inspector_dock.isVisible() and window.width() == 600
    scroller = window.inspector_dock.widget()
    assert window.inspector.width() <= scroller.viewport().width()  # the inspector fits too
    resize(window, 1280)  # both come back, the chat list at its full width
    assert window.sessions_dock.isVisible() and window.inspector_dock.isVisible()
    assert not any(label.wordWrap() for label in bar.figures)  # one line each where they fit
    assert window.sessions_dock.width() >= 200
    window.sessions_dock.toggleViewAction().trigger()  # closed by the person: stays closed
    resize(window, 1300)
    assert not window.sessions_dock.isVisible()


# 3. connect to a server ---------------------------------------------------------------------
class MemoryKeyring:
    """A keychain in memory (the tests never touch the real one)."""

    def __init__(self):
        self.saved = {}

    def get_password(self, service, account):
        return self.saved.get((service, account))

    def set_password(self, service, account, password):
        self.saved[(service, account)] = password

    def delete_password(self, service, account):
        del self.saved[(service, account)]


def fake_server(monkeypatch):
    """``RemoteEngine`` replaced by a scripted server; returns the engines made."""
    import app.engines.remote_engine as remote_engine
    from engine.events import DoneEvent, ModelEvent

    from .scripted_engine import ScriptedStream

    made = []

    class FakeRemote(ServerLike):
        def __init__(self, url, api_key=None):
            super().__init__()
            self.url, self.api_key = remote_engine.api_base(url), api_key
            made.append(self)

        def load(self, spec=None):
            return ScriptedStream(
                [ModelEvent("served-model", self.url, "on"), DoneEvent("loaded", "", [], [])]
            )

    monkeypatch.setattr(remote_engine, "RemoteEngine", FakeRemote)
    return made


def fill_server_dialog(seen, url, key):
    """Fill in the real connect dialog once it is up, and press Connect."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QDialogButtonBox

    from app.views.server_dialog import ServerDialog

    def fill():
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, ServerDialog):
            QTimer.singleShot(20, fill)
            return
        seen.append(
            (dialog.url.text(), dialog.key.text(), dialog.key.echoMode(), dialog.note.text())
        )
        dialog.url.setText(url)
        dialog.key.setText(key)
        dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.Ok).click()

    QTimer.singleShot(0, fill)


def test_a_server_connection_is_shown_remembered_and_its_key_kept_out_of_settings(
    app, qtbot, monkeypatch
):
    from PySide6.QtWidgets import QLineEdit

    from app.storage.server_keys import SERVICE, ServerKeys

    window, controller = app.window, app.controller
    made = fake_server(monkeypatch)
    keychain = MemoryKeyring()
    controller.models.server_keys = ServerKeys(keychain)
    seen = []
    fill_server_dialog(seen, "studio.local:8080", "s3cret")
    wait(qtbot, window.model_presenter.connect_server())
    assert seen[0][2] == QLineEdit.Password and "keychain" in seen[0][3]
    assert "10 s to connect and 300 s for each part of an answer" in seen[0][3]  # the timeouts
    assert controller.models.service is made[0] and made[0].api_key == "s3cret"
    label = window.server_label
    assert label.isVisible() and "http://studio.local:8080/v1" in label.text()
    assert keychain.saved == {(SERVICE, "http://studio.local:8080/v1"): "s3cret"}
    saved = controller.settings_store.path.read_text(encoding="utf-8")
    assert "studio.local:8080" in saved and "s3cret" not in saved

    fill_server_dialog(seen, "studio.local:8080", "s3cret")  # the next time: filled in
    wait(qtbot, window.model_presenter.connect_server())
    assert seen[1][:2] == ("studio.local:8080", "s3cret")

    window.settings_panel.embeddedRequested.emit()  # "Built-in" while connected
    qtbot.waitUntil(lambda: not controller.models.loading and not controller._tasks, timeout=5000)
    assert (
        controller.models.service is controller.models.local_service
        and app.scripted.loads[-1] is None
    )
    assert not label.isVisible() and not window.banner.isVisible()


def test_without_a_keychain_the_key_lasts_the_session_and_the_dialog_says_so(
    app, qtbot, monkeypatch
):
    from app.storage.server_keys import ServerKeys

    window, controller = app.window, app.controller
    fake_server(monkeypatch)
    controller.models.server_keys = ServerKeys(None)
    seen = []
    fill_server_dialog(seen, "http://10.0.0.2:8080", "k3y")
    wait(qtbot, window.model_presenter.connect_server())
    assert "until Draftless quits" in seen[0][3]
    assert controller.models.server_keys.get("http://10.0.0.2:8080/v1") == "k3y"
    assert "k3y" not in controller.settings_store.path.read_text(encoding="utf-8")


def test_messages_name_this_machines_engine_as_the_menu_does(app):
    from app.engines.http_stream import Unreachable
    from app.engines.remote_engine import RemoteEngine

    menu = [a.text() for m in app.window.menuBar().actions() for a in m.menu().actions()]
    assert "Use this machine's engine" in menu
    message = RemoteEngine("127.0.0.1:1")._problem(Unreachable("connection refused"))
    assert "Use this machine's engine" in message and "Mac" not in message


# 4. long chats ------------------------------------------------------------------------------
ANSWER_PIECES = [
    "Here ",
    "is ",
    "**one** ",
    "way:\n\n",
    "- first ",
    "step\n",
    "- second ",
    "step\n\n",
    "```python\n",
    "def ",
    "add(a, b):\n",
    "    return ",
    "a + b\n",
    "```\n\n",
    "That ",
    "is ",
    "all ",
    "for ",
    "now.",
]


def long_chat(store, turns):
    """A chat of ``turns`` questions and answers written straight into the store."""
    from app.storage.provenance import Provenance
    from app.storage.store import Message
    from engine.events import TokenEvent

    session = store.create_session("A long chat")
    parent = 0
    for turn in range(turns):
        question = Message(None, session.id, "user", f"Question {turn}: how do I add two numbers?")
        store.add_message(question)
        store.link(question, parent)
        provenance = Provenance()
        for i, piece in enumerate(ANSWER_PIECES):
            provenance.add_event(
                TokenEvent(1000 + i, piece, i % 3 == 1, i, 0 if i % 3 == 1 else None, "suffix")
            )
        text = "".join(ANSWER_PIECES)
        provenance.finish(text)
        answer = Message(
            None,
            session.id,
            "assistant",
            text,
            "stop",
            "scripted-model",
            {"drafter": "suffix", "tokens_per_pass": 1.5, "passes": 12},
            {"decode_s": 0.1},
            provenance,
        )
        store.add_message(answer)
        store.link(answer, question.id)
        parent = answer.id
    return session


def scroll_to_top(qtbot, transcript) -> int:
    """Scroll up a page at a time until the first message is boxed and in view; returns the
    most cards that were built at once on the way."""
    bar = transcript.verticalScrollBar()
    most, deadline = 0, time.monotonic() + 120
    at_top = 0  # turns in a row at the top with every message boxed (older boxes push it down)
    while at_top < 3:
        bar.setValue(bar.value() - bar.pageStep())
        qtbot.wait(5)
        most = max(most, len(transcript._views))
        at_top = at_top + 1 if bar.value() == 0 and not transcript._pending else 0
        assert time.monotonic() < deadline, "never reached the top"
    qtbot.waitUntil(lambda: transcript._slots[0].view is not None, timeout=10000)
    return most


def assert_rendered(view):
    """``view`` (a card of ``long_chat``'s answer) shows its highlights and code colours."""
    from PySide6.QtGui import QTextCursor

    from app.views.render import highlighted_positions

    document = view.body.document()
    assert highlighted_positions(document), "no highlights"
    keyword = document.find("def").selectionStart()
    name = document.find("add", keyword).selectionStart()

    def colour_at(position):
        cursor = QTextCursor(document)
        cursor.setPosition(position + 1)  # the format of the character before the cursor
        return cursor.charFormat().foreground().color()

    assert colour_at(keyword) != colour_at(name), "no syntax colours"


def test_a_500_message_chat_opens_at_the_newest_and_builds_cards_only_near_the_reader(app, qtbot):
    window, controller = app.window, app.controller
    controller.open_session(long_chat(app.store, 250).id)
    transcript = window.transcript
    settled_at_bottom(qtbot, transcript)
    bar = transcript.verticalScrollBar()
    assert [v.text for v in transcript._views[-2:]] == [
        "Question 249: how do I add two numbers?",
        "".join(ANSWER_PIECES),
    ]
    assert len(transcript._views) < 40  # a few screens of cards, not 500
    assert transcript._pending  # the older messages wait until the reader comes near

    most = scroll_to_top(qtbot, transcript)
    first, answer = transcript._slots[0].view, transcript._slots[1].view
    assert first.text.startswith("Question 0:")
    assert answer is not None and answer.text == "".join(ANSWER_PIECES)
    assert_rendered(answer)  # built as it scrolled in: highlights and code colours
    assert most < 60, most  # cards far behind the reader were released on the way up
    assert transcript._slots[-1].view is None  # the newest card too

    transcript.latest_button.click()  # jump to the latest: its card is built again
    qtbot.waitUntil(lambda: transcript._slots[-1].view is not None, timeout=10000)
    settled_at_bottom(qtbot, transcript)
    assert bar.value() == bar.maximum()
    latest = transcript._slots[-1].view
    assert latest.regenerate_button.isVisible() and latest.text == "".join(ANSWER_PIECES)
    assert sum(v.regenerate_button.isVisible() for v in transcript._views) == 1
    assert transcript._slots[0].view is None  # and the first card was released
    assert len(transcript.views) == 500  # every card can still be built (a test's view)


def test_zoom_reaches_every_card_of_a_long_chat_built_now_or_later(app, qtbot):
    window, controller = app.window, app.controller
    controller.open_session(long_chat(app.store, 100).id)
    transcript = window.transcript
    settled_at_bottom(qtbot, transcript)
    built = transcript._views
    window.zoom(1)
    bigger = transcript.column.font().pointSizeF()
    assert bigger > transcript.base_point_size
    qtbot.waitUntil(lambda: not transcript._stale, timeout=10000)
    for view in built:  # the cards that were built re-render at the new size
        assert view.body.document().defaultFont().pointSizeF() == bigger
    scroll_to_top(qtbot, transcript)  # the ones built later take it as they are built
    first = transcript._slots[1].view
    assert first not in built and first.body.document().defaultFont().pointSizeF() == bigger
    assert_rendered(first)


# 5. more of what chat apps do -----------------------------------------------------------------
def settled_at_bottom(qtbot, transcript):
    """Wait until the chat's layout has given the scroll bar its range and the view follows
    the bottom. Message heights settle over several layout passes (each text document lays
    itself out in later event-loop turns), so a fixed short wait is not enough on a busy
    machine."""
    bar = transcript.verticalScrollBar()
    seen = []

    def at_bottom_and_steady():
        seen.append(bar.maximum())
        return bar.maximum() > 0 and bar.value() == bar.maximum() and seen[-3:] == [seen[-1]] * 3

    qtbot.waitUntil(at_bottom_and_steady, timeout=10000)


def test_jump_to_latest_appears_when_scrolled_up_and_goes_back_down(app, qtbot):
    window, controller = app.window, app.controller
    controller.open_session(long_chat(app.store, 12).id)
    transcript = window.transcript
    transcript.finish_loading()
    settled_at_bottom(qtbot, transcript)
    bar = transcript.verticalScrollBar()
    assert not transcript.latest_button.isVisible()
    bar.setValue(0)
    assert transcript.latest_button.isVisible()
    button = transcript.latest_button.geometry()
    assert transcript.viewport().geometry().contains(button)  # floats over the messages
    transcript.latest_button.click()
    assert bar.value() == bar.maximum() and not transcript.latest_button.isVisible()
    app.scripted.queue(answer_events(REPEATING))  # following again: a new answer stays in view
    wait(qtbot, window.send("more"))
    qtbot.waitUntil(lambda: transcript.streaming_view is None, timeout=10000)
    settled_at_bottom(qtbot, transcript)
    assert not transcript.latest_button.isVisible()


def test_a_chat_exports_as_markdown_and_json_from_the_chat_list_menu(app, qtbot, tmp_path):
    import json

    from engine.bench.conversations import read_conversations

    from PySide6.QtCore import QTimer

    window = app.window
    ask(
        qtbot,
        app,
        "Say *hi*",
        answer_events(
            [(0, [("Hi", False)]), (2, [(" there", True), ("!", False)]), (0, [(END, False)])]
        ),
    )
    panel = window.sessions_panel
    asked = []

    def save_path(title, suggested, filter_):
        asked.append((title, suggested))
        return str(tmp_path / suggested)

    window.ask_save_path = save_path

    def choose(label):
        def pick():
            menu = getattr(panel, "menu", None)
            if menu is None or not menu.isVisible():
                QTimer.singleShot(20, pick)
                return
            [action] = [a for a in menu.actions() if a.text() == label]
            action.trigger()
            menu.close()

        QTimer.singleShot(0, pick)
        rect = panel.list.row_rect(panel.list.item(0))  # below its date header
        panel.list.customContextMenuRequested.emit(rect.center())
        panel.menu = None

    choose("Export as Markdown…")
    assert asked[-1] == ("Export “Say *hi*” as Markdown", "Say hi.md")
    text = (tmp_path / "Say hi.md").read_text(encoding="utf-8")
    assert text.startswith("# Say *hi*\n") and "## You\n\nSay *hi*\n" in text
    assert "## Draftless (scripted-model)\n\nHi there!\n" in text
    choose("Export as JSON…")
    data = json.loads((tmp_path / "Say hi.json").read_text(encoding="utf-8"))
    assert [m["role"] for m in data["messages"]] == ["system", "user", "assistant"]
    assert data["messages"][0]["content"] == app.controller.system_prompt
    # the replay's conversation format: `engine.bench.devices --conversations` reads it
    [conversation] = read_conversations(tmp_path / "Say hi.json")
    assert conversation["id"] == app.controller.session.id and conversation["category"] == "chat"
    assert conversation["messages"][1:] == [
        {"role": "user", "content": "Say *hi*"},
        {"role": "assistant", "content": "Hi there!"},
    ]
    answer = data["messages"][2]
    assert answer["content"] == "Hi there!" and answer["stats"]["accepted"] == 1
    assert [t["from_draft"] for t in answer["tokens"]] == [False, True, False]
    assert "Exported to" in window.statusBar().currentMessage()


def test_an_export_that_cannot_be_written_says_why(app, qtbot, tmp_path):
    window = app.window
    ask(qtbot, app, "hello", answer_events(REPEATING))
    window.ask_save_path = lambda *args: str(tmp_path / "missing" / "folder" / "chat.md")
    window.export_chat(app.controller.session.id, "markdown")
    assert "not exported" in window.banner.messages[-1]


def test_help_explains_highlights_and_gauge_and_about_names_the_version(app, qtbot):
    window = app.window
    menus = {m.text().replace("&", ""): m.menu() for m in window.menuBar().actions()}
    labels = [a.text() for a in menus["Help"].actions()]
    assert labels == ["How Draftless works", "About Draftless"]
    window.help_action.trigger()
    dialog = window.help_dialog
    assert dialog.isVisible()
    text = dialog.text.toPlainText()
    for words in (
        "tinted and underlined",
        "tokens per pass",
        "drafts accepted",
        "faster than plain",
        "exactly the one the model would have given",
    ):
        assert words in text, words
    window.about_action.trigger()
    from PySide6.QtWidgets import QMessageBox

    box = window.findChild(QMessageBox, "aboutBox")
    assert box is not None and "Draftless" in box.text() and "Apache" in box.text()
    box.close()


def test_an_older_answer_can_be_inspected_before_it_was_scrolled_to(app, qtbot):
    window, controller = app.window, app.controller
    controller.open_session(long_chat(app.store, 100).id)
    transcript = window.transcript
    assert transcript._pending  # far from the top: most of the chat is not built yet
    oldest = controller.messages[1]
    view = transcript.view_of(oldest.id)
    assert view is not None and view.text == oldest.content
    assert transcript._slots[0].view is None  # the first question, above it, waits
    assert len(transcript._views) < 40  # the messages between got boxes, not cards
    second = controller.messages[3]
    assert transcript.view_of(second.id).message_id == second.id


def test_removing_a_message_builds_no_card_for_it(app, qtbot, monkeypatch):
    window, controller = app.window, app.controller
    controller.open_session(long_chat(app.store, 100).id)
    transcript = window.transcript
    settled_at_bottom(qtbot, transcript)
    built = []
    fill = transcript._fill
    monkeypatch.setattr(transcript, "_fill", lambda slot, *a: built.append(slot) or fill(slot, *a))
    boxed = transcript._slots[0].message  # a box above the view, its card never built
    pending = transcript._pending[0]  # a message not even boxed yet
    assert transcript._slots[0].view is None
    for message in (boxed, pending):
        transcript.remove_message(message.id)
    assert built == []
    assert boxed not in [s.message for s in transcript._slots]
    assert pending not in transcript._pending
    assert len(transcript.views) == 198  # the rest of the chat is all there
