"""Defects a person met after weeks of use (issue 44), each pinned by a test that failed
before its fix: a stale engine banner, Export only on a right-click and raw HTML in the
Markdown file, a download that read "0% of 1 bytes", and a half-downloaded model that was
listed as installed with Load enabled."""

from __future__ import annotations

import json

from engine.events import ErrorEvent

from .scripted_engine import ScriptedStream
from .test_app_more import fake_server
from .test_app_views import SIMPLE, answer_events, app, ask, loop, plain, wait  # noqa: F401


# 1. a stale banner ---------------------------------------------------------------------------
def refusing_server(monkeypatch, right_key: str):
    """A scripted server that refuses every key but ``right_key``, as a real one answers 401."""
    import app.remote_engine as remote_engine

    fake_server(monkeypatch)
    accepting = remote_engine.RemoteEngine

    class Refusing(accepting):
        def load(self, spec=None):
            if self.api_key != right_key:
                return ScriptedStream(
                    [ErrorEvent(f"The server at {self.url} refused the API key. Check the key.")]
                )
            return super().load(spec)

    monkeypatch.setattr(remote_engine, "RemoteEngine", Refusing)


def test_a_refused_key_message_goes_once_the_right_key_connects(app, qtbot, monkeypatch):
    from app.server_keys import ServerKeys

    window, controller = app.window, app.controller
    controller.models.server_keys = ServerKeys(None)  # never the real keychain
    refusing_server(monkeypatch, right_key="right")
    window.ask_server = lambda *args: ("studio.local:8080", "wrong")
    wait(qtbot, window.connect_server())
    assert window.banner.isVisible() and "refused the API key" in window.banner.label.text()
    window.ask_server = lambda *args: ("studio.local:8080", "right")
    wait(qtbot, window.connect_server())
    assert controller.models.server_url and not window.banner.isVisible()


def test_a_failed_answer_message_goes_once_an_answer_arrives_and_other_notices_stay(app, qtbot):
    window = app.window
    ask(qtbot, app, "one", [ErrorEvent("The server at http://x/v1 refused the API key.")])
    assert window.banner.isVisible() and "refused" in window.banner.label.text()
    ask(qtbot, app, "two", answer_events(SIMPLE))
    assert not window.banner.isVisible()
    window.banner.show_message("Settings not applied: temperature")  # not the engine's
    ask(qtbot, app, "three", plain("yes"))
    assert window.banner.isVisible() and "Settings not applied" in window.banner.label.text()


# 2. export from the menu, HTML shown as text -------------------------------------------------
HOSTILE = (
    "Try <script>alert('x')</script> and <b>bold</b>, AT&T &amp; `<kbd>` inline.\n\n"
    "```html\n<script>kept()</script>\n```\n"
)


def test_the_open_chat_exports_from_the_chat_menu_with_html_shown_as_text(app, qtbot, tmp_path):
    window = app.window
    ask(qtbot, app, "<img src=x onerror=alert(1)>", plain(HOSTILE))
    window.ask_save_path = lambda title, suggested, filter_: str(tmp_path / suggested)
    chat_menu = window.menuBar().actions()[0].menu()
    [action] = [a for a in chat_menu.actions() if a.text() == "Export chat as Markdown…"]
    action.trigger()
    [path] = tmp_path.glob("*.md")
    text = path.read_text(encoding="utf-8")
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)>" in text
    prose = text.split("```")[0]
    assert "<script>" not in prose and "<b>" not in prose
    assert "&lt;script>alert('x')&lt;/script> and &lt;b>bold&lt;/b>" in prose
    assert "AT&T &amp;amp; `<kbd>` inline" in prose  # code spans stay as written
    assert "```html\n<script>kept()</script>\n```" in text  # and code blocks
    [action] = [a for a in chat_menu.actions() if a.text() == "Export chat as JSON…"]
    action.trigger()
    data = json.loads(next(tmp_path.glob("*.json")).read_text(encoding="utf-8"))
    assert data["messages"][1]["content"] == HOSTILE  # JSON keeps the text as it is
