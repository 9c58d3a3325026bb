"""The Server panel driven as a person would: Start serves the chat's model (the tiny
random-weight one) from a child process, its shown address answers, Stop ends the process;
a port in use fails in plain words; a child that dies is noticed."""

from __future__ import annotations

import os
import signal
import socket

import httpx
import pytest
from PySide6.QtCore import QProcess, Qt
from PySide6.QtWidgets import QLineEdit

from engine.events import DoneEvent, ModelEvent

from .scripted_engine import ScriptedService
from .server_process import free_port
from .test_app_views import loop, wait  # noqa: F401

START_MS = 240_000  # the child imports the engine and loads the model before it listens


@pytest.fixture
def app(loop, tmp_path, monkeypatch, qtbot, tiny_model_dir):  # noqa: F811
    """The app with the tiny model as the chat's model (scripted answers, real server)."""
    from app.__main__ import Application

    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DRAFTLESS_CONFIG_DIR", str(tmp_path / "config"))
    service = ScriptedService()
    service.load_script = [
        ModelEvent(tiny_model_dir.name, str(tiny_model_dir), "on"),
        DoneEvent("loaded", "", [], []),
    ]
    application = Application(service=service, theme_name="light")
    qtbot.addWidget(application.window)
    application.window.resize(1280, 800)
    application.window.show()
    wait(qtbot, application.start(str(tiny_model_dir)))
    application.window.server_dock.raise_()
    yield application
    application.window.server_presenter.shutdown()
    application.window.close()
    application.store.close()


def panel_of(app):
    return app.window.server_panel


def start_on(qtbot, panel, port: int) -> None:
    panel.port.setValue(port)
    qtbot.mouseClick(panel.start_button, Qt.LeftButton)


def test_start_serves_the_chats_model_and_stop_ends_the_process(app, qtbot, tiny_model_dir):
    panel, server = panel_of(app), app.window.server_presenter.server
    port = free_port()
    start_on(qtbot, panel, port)
    assert panel.status.text().startswith("Starting")
    qtbot.waitUntil(lambda: panel.status.text().startswith("Running"), timeout=START_MS)
    assert panel.status.text() == f"Running at http://127.0.0.1:{port}"
    assert panel.openai_url.text() == f"http://127.0.0.1:{port}/v1"
    assert panel.ollama_url.isVisible() and panel.ollama_url.text() == f"http://127.0.0.1:{port}"
    health = httpx.get(panel.ollama_url.text() + "/health", timeout=30)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    models = httpx.get(panel.openai_url.text() + "/models", timeout=30).json()
    assert [m["id"] for m in models["data"]] == [tiny_model_dir.name]  # the chat's model
    assert f"curl http://127.0.0.1:{port}/v1/chat/completions" in panel.example.toPlainText()
    assert any("serving" in line for line in server.lines)  # the child's log is shown
    assert "serving" in panel.log.toPlainText()
    process = server.process
    pid = process.processId()
    qtbot.mouseClick(panel.stop_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.status.text().startswith("Stopped"), timeout=30_000)
    assert process is not None and server.process is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the child is gone (reaped: no zombie left either)
    assert not panel.openai_url.isVisible() and panel.start_button.isEnabled()


def test_a_port_in_use_fails_in_plain_words(app, qtbot):
    panel = panel_of(app)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        start_on(qtbot, panel, port)
        assert panel.status.text() == (
            f"Failed: Port {port} is in use by another program: choose another port, "
            "or stop that program."
        )
    assert app.window.server_presenter.server.process is None  # nothing was started
    assert panel.start_button.isEnabled()


def test_a_child_that_dies_is_noticed(app, qtbot):
    panel, server = panel_of(app), app.window.server_presenter.server
    start_on(qtbot, panel, free_port())
    qtbot.waitUntil(lambda: panel.status.text().startswith("Running"), timeout=START_MS)
    os.kill(server.process.processId(), signal.SIGKILL)  # as the system's out-of-memory killer
    qtbot.waitUntil(lambda: panel.status.text().startswith("Failed"), timeout=30_000)
    assert "The server stopped by itself (it crashed)" in panel.status.text()
    assert panel.start_button.isEnabled() and not panel.stop_button.isEnabled()


def test_on_the_network_needs_a_key_and_keeps_it_in_the_keychain(app, qtbot):
    from app.presenters.server_presenter import KEY_ACCOUNT
    from app.storage.server_keys import SERVICE, ServerKeys

    from .test_app_more import MemoryKeyring

    keychain = MemoryKeyring()
    keychain.saved[(SERVICE, KEY_ACCOUNT)] = "from-last-time"
    app.controller.models.server_keys = ServerKeys(keychain)
    panel = panel_of(app)
    panel.network.setFocus()
    qtbot.keyClick(panel.network, Qt.Key_Space)  # ticked by keyboard
    assert "API key is needed" in panel.key_note.text()
    assert panel.key.text() == "from-last-time" and panel.key.echoMode() == QLineEdit.Password
    panel.key.clear()
    start_on(qtbot, panel, free_port())
    assert panel.status.text().startswith("Failed: Set an API key to serve on the network")
    assert app.window.server_presenter.server.process is None
    qtbot.mouseClick(panel.make_key, Qt.LeftButton)
    made = panel.key.text()
    assert len(made) >= 24
    with socket.socket() as taken:  # a port in use: nothing starts, the key is kept
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        start_on(qtbot, panel, taken.getsockname()[1])
    assert panel.status.text().startswith("Failed: Port")
    assert keychain.saved[(SERVICE, KEY_ACCOUNT)] == made


def test_the_child_gets_its_key_unseen_and_the_log_is_bounded(qtbot):
    from app.presenters.local_server import LOG_LINES, Launch, LocalServer, child_environment

    launch = Launch("/models/tiny", 9000, on_network=True, api_key="s3cret")
    assert launch.arguments() == [
        "-m", "engine", "serve", "--host", "0.0.0.0", "--port", "9000", "--model", "/models/tiny"
    ]  # fmt: skip
    assert child_environment("s3cret").value("DRAFTLESS_API_KEY") == "s3cret"
    server = LocalServer()

    class Flood:
        def readAllStandardOutput(self):  # noqa: N802 (Qt's name)
            return b"line\n" * (LOG_LINES * 3) + b"x" * 100_000

    server._read(Flood())
    assert len(server.lines) == LOG_LINES
    assert server._partial == "" and len(server.lines[-1]) <= 4000


def test_quitting_the_app_stops_its_server(app, qtbot):
    panel, server = panel_of(app), app.window.server_presenter.server
    start_on(qtbot, panel, free_port())
    qtbot.waitUntil(lambda: server.process is not None and server.process.processId() > 0)
    process = server.process
    app.window.server_presenter.shutdown()  # what Application.close does
    assert process.state() == QProcess.NotRunning


def test_a_new_chat_model_stops_the_server_and_offers_a_restart(app, qtbot, tiny_model_dir):
    panel, server = panel_of(app), app.window.server_presenter.server
    start_on(qtbot, panel, free_port())
    qtbot.waitUntil(lambda: server.process is not None and server.process.processId() > 0)
    service = app.controller.models.service
    service.load_script = [ModelEvent("other", "/other", "on"), DoneEvent("loaded", "", [], [])]
    wait(qtbot, app.start("/other"))
    qtbot.waitUntil(lambda: server.process is None, timeout=30_000)
    assert panel.status.text().startswith("Stopped: the chat's model is now other")
    assert panel.restart_button.isVisible()
    assert panel.model.itemText(0) == "The chat's model: other"
