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
    import app.engines.remote_engine as remote_engine

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
    from app.storage.server_keys import ServerKeys

    window, controller = app.window, app.controller
    controller.models.server_keys = ServerKeys(None)  # never the real keychain
    refusing_server(monkeypatch, right_key="right")
    window.ask_server = lambda *args: ("studio.local:8080", "wrong")
    wait(qtbot, window.model_presenter.connect_server())
    assert window.banner.isVisible() and "refused the API key" in window.banner.label.text()
    window.ask_server = lambda *args: ("studio.local:8080", "right")
    wait(qtbot, window.model_presenter.connect_server())
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
    assert data["messages"][2]["content"] == HOSTILE  # as it is, after the system prompt


# 3. downloads: no "0% of 1 bytes"; a half-downloaded model is not installed -----------------
def test_a_download_says_starting_until_its_size_is_known(app, qtbot, monkeypatch):
    import asyncio
    import socket

    from engine.events import DoneEvent, ProgressEvent
    from engine.models import download_from_hub

    with socket.socket() as closed:  # a hub address where nothing answers
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    said = []
    try:
        download_from_hub("owner/model", lambda *report: said.append(report))
    except Exception:
        pass  # no hub: what matters is what it said first
    gate = asyncio.Event()
    app.scripted.download_script = [
        ProgressEvent("download", *said[0]),
        gate,
        ProgressEvent("download", 1_000_000, 542_000_000, "Downloading owner/model"),
        DoneEvent("downloaded", "/downloads/owner--model", [], []),
    ]
    app.controller.models.download("owner/model", then_load=False)
    bar = app.window.download_bar
    qtbot.waitUntil(lambda: bar.isVisible() and bool(bar.label.text()))
    assert bar.label.text() == "Downloading owner/model: starting…"
    assert bar.bar.maximum() == 0  # a busy bar, no share yet
    gate.set()
    qtbot.waitUntil(lambda: "0% of 542.0 MB" in bar.label.text() or not bar.isVisible())


def test_a_half_downloaded_model_is_listed_as_incomplete_and_cannot_load(
    app, qtbot, tmp_path, monkeypatch
):
    downloads = tmp_path / "downloads"
    monkeypatch.setenv("DRAFTLESS_DOWNLOADS_DIR", str(downloads))
    monkeypatch.setenv("DRAFTLESS_MODELS_DIR", str(tmp_path / "models"))
    half = downloads / "owner--big"  # 1 MB of 542 MB, stopped
    (half / ".partial").mkdir(parents=True)
    (half / "config.json").write_text("{}")
    (half / ".partial" / "model.safetensors.0123456789abcdef.part").write_bytes(b"w" * 1_000_000)
    sharded = downloads / "owner--sharded"  # marked done, but a shard it names is gone
    sharded.mkdir()
    (sharded / ".complete").write_text("")
    (sharded / "model-1.safetensors").write_bytes(b"w")
    index = {"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    whole = downloads / "owner--whole"
    whole.mkdir()
    (whole / "model.safetensors").write_bytes(b"w" * 10)
    (whole / ".complete").write_text("")

    dialog = app.window.model_presenter.show_installed_models()
    rows = {
        dialog.table.item(r, 0).text(): dialog.table.item(r, 1).text()
        for r in range(dialog.table.rowCount())
    }
    assert rows == {
        "owner/big — incomplete download": "1.0 MB so far",
        "owner/sharded — incomplete download": "73 bytes so far",
        "owner/whole": "10 bytes",
    }
    names = [m.name for m in dialog.models]
    dialog.table.selectRow(names.index("owner/big"))
    assert not dialog.load_button.isEnabled() and dialog.resume_button.isEnabled()
    dialog.load_button.click()  # disabled: nothing happens
    assert "owner/big" not in app.scripted.loads
    dialog.table.selectRow(names.index("owner/whole"))
    assert dialog.load_button.isEnabled() and not dialog.resume_button.isEnabled()
    dialog.table.selectRow(names.index("owner/big"))
    dialog.resume_button.click()  # downloads the rest (the engine resumes the part file)
    qtbot.waitUntil(lambda: app.scripted.downloads[-1:] == ["owner/big"])
    qtbot.waitUntil(lambda: not app.controller.models.download_stream)


def test_the_catalog_says_which_models_are_here_and_which_resume(app, tmp_path, monkeypatch):
    from engine.models.catalog import CATALOG

    downloads = tmp_path / "downloads"
    monkeypatch.setenv("DRAFTLESS_DOWNLOADS_DIR", str(downloads))
    part = downloads / CATALOG[0].repo.replace("/", "--") / ".partial"
    part.mkdir(parents=True)
    (part / "model.safetensors.0123456789abcdef.part").write_bytes(b"w" * 1_000_000)
    whole = downloads / CATALOG[1].repo.replace("/", "--")
    whole.mkdir()
    (whole / "model.safetensors").write_bytes(b"w")
    (whole / ".complete").write_text("")
    dialog = app.window.model_presenter.pick_from_catalog()
    column = [dialog.table.item(r, 3).text() for r in range(3)]
    assert column[0].endswith(" · 1.0 MB here, resumes") and column[1].endswith(" · here")
    assert "here" not in column[2]
