"""Untrusted files and launches, through the real app: the banner a person reads, the
request the engine gets, the process exit status (pytest-qt, offscreen, tiny model)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from engine.drafters import DEFAULT_DRAFTER
from engine.events import DoneEvent, ErrorEvent

from .test_app_gui import dirs, engine_service, finish, loop, make_app, send, set_max_tokens  # noqa: F401
from .test_app_untrusted import digest, history, shared, unprivileged  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


def launch(*args, env=None, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        text=True,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen", **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def test_an_unknown_drafter_in_settings_falls_back_and_is_named_once(make_app, qtbot, dirs):
    config = dirs / "config"
    config.mkdir()
    (config / "settings.json").write_text(
        json.dumps({"drafter": "telepathy", "draft_count": 999, "max_tokens": 20})
    )
    application = make_app()
    notes = [m for m in application.window.banner.messages if "telepathy" in m]
    assert len(notes) == 1 and "draft_count" in notes[0] and "reset to their defaults" in notes[0]
    assert application.window.settings_panel.drafter.currentData() == DEFAULT_DRAFTER
    finish(qtbot, send(qtbot, application.window, "hello"))
    request = application.recorder.requests[-1]
    assert request.draft.drafter == "default" and request.max_tokens == 20
    assert application.recorder.of(DoneEvent) and not application.recorder.of(ErrorEvent)
    kept = [f for f in config.iterdir() if f.name.startswith("settings.json.invalid-")]
    assert len(kept) == 1 and "telepathy" in kept[0].read_text()
    finish(qtbot, __import__("asyncio").ensure_future(application.close()))
    again = make_app(load=False)  # the corrected file: nothing to say at the next start
    assert not any("settings" in m.lower() for m in again.window.banner.messages)


def test_settings_that_are_not_json_are_kept_aside(make_app, dirs):
    config = dirs / "config"
    config.mkdir()
    (config / "settings.json").write_text('{"drafter": "frequency",')
    application = make_app(load=False)
    [note] = [m for m in application.window.banner.messages if "settings" in m]
    [kept] = [f for f in config.iterdir() if f.name.startswith("settings.json.corrupt-")]
    assert kept.name in note and kept.read_text() == '{"drafter": "frequency",'
    assert application.controller.settings.drafter == "default"


def test_a_read_only_data_folder_starts_the_app_with_a_message(make_app, monkeypatch, shared):
    data = shared / "data"
    data.mkdir()
    history(data / "draftless.sqlite3", "kept")
    data.chmod(0o555)
    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(data))
    monkeypatch.setenv("DRAFTLESS_CONFIG_DIR", str(shared / "config"))
    with unprivileged():
        application = make_app(load=False)
    [note] = application.window.banner.messages
    assert "cannot be written" in note and "will not be saved" in note
    assert [s.title for s in application.controller.sessions()] == ["kept"]
    assert application.controller.session.title == "kept"


def test_a_database_deleted_while_running_keeps_the_next_answer(make_app, qtbot, dirs):
    application = make_app()
    window = application.window
    set_max_tokens(window, 20)
    finish(qtbot, send(qtbot, window, "first question"))
    data = dirs / "data"
    shutil.rmtree(data)
    finish(qtbot, send(qtbot, window, "second question"))
    assert "was deleted" in window.banner.messages[-1] and window.banner.isVisible()
    from app.storage.store import Store

    store = Store(data / "draftless.sqlite3")
    [session] = store.sessions()
    assert [m.role for m in store.messages(session.id)] == ["user", "assistant"] * 2
    assert store.messages(session.id)[2].content == "second question"


def test_a_second_launch_brings_the_running_window_forward(make_app, qtbot, dirs):
    from app.single_instance import SingleInstance, bring_forward
    from engine.paths import data_dir

    application = make_app(load=False)
    before = [s.id for s in application.controller.sessions()]
    instance = SingleInstance(data_dir())
    assert instance.acquire()
    raised = []
    instance.activated.connect(lambda: (raised.append(True), bring_forward(application.window)))
    application.window.showMinimized()
    second = launch()
    try:
        qtbot.waitUntil(lambda: second.poll() is not None, timeout=60_000)
    finally:
        second.kill()
        instance.release()
    stderr = second.stderr.read()
    assert second.returncode == 0, stderr[-2000:]
    assert "already running" in stderr and "Traceback" not in stderr
    assert raised == [True] and not application.window.isMinimized()
    assert [s.id for s in application.controller.sessions()] == before


def test_a_lock_left_by_a_killed_app_does_not_block_the_next_launch(dirs):
    from app.single_instance import SingleInstance
    from engine.paths import data_dir

    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys\n"
            "from PySide6.QtCore import QCoreApplication\n"
            "from app.single_instance import SingleInstance\n"
            "app = QCoreApplication([])\n"
            "held = SingleInstance(sys.argv[1])\n"
            "assert held.acquire()\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n",
            str(data_dir()),
        ],
        cwd=ROOT,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL
    instance = SingleInstance(data_dir())
    assert Path(instance.lock.fileName()).exists()  # the killed process left its lock behind
    try:
        assert instance.acquire()
    finally:
        instance.release()


def test_screenshot_leaves_no_temporary_folder(tmp_path, tiny_model_dir):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DRAFTLESS_DATA_DIR", "DRAFTLESS_CONFIG_DIR")
    }
    env.update(TMPDIR=str(scratch), QT_QPA_PLATFORM="offscreen")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "--screenshot",
            str(tmp_path / "s.png"),
            "--model",
            str(tiny_model_dir),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "s.png").stat().st_size > 0
    assert [p.name for p in scratch.iterdir() if p.name.startswith("draftless-screenshot-")] == []


# The interpreter lives under /root here, out of reach for "nobody": everything the app
# imports, lazily too, is imported as root first by answering once into a scratch folder.
UNPRIVILEGED_APP = """
import asyncio, os, sys
from app import __main__ as app_main
from engine.runtime.service import EngineService
from engine.settings import GenerationRequest

data = os.environ["DRAFTLESS_DATA_DIR"]
os.environ["DRAFTLESS_DATA_DIR"] = os.environ["WARM_DATA_DIR"]

async def warm():
    service = EngineService()
    request = GenerationRequest(messages=[{"role": "user", "content": "hi"}],
                                model=os.environ["WARM_MODEL"], max_tokens=4)
    async for _ in service.generate(request):
        pass
    service.shutdown()

asyncio.run(warm())
import app.presenters.controller, app.views.main_window, app.single_instance, qasync  # noqa: E401
os.environ["DRAFTLESS_DATA_DIR"] = data
app_main._qapp()  # Qt refuses to start under a changed effective user id
if os.geteuid() == 0:
    os.seteuid(65534)
sys.exit(app_main.main(sys.argv[1:]))
"""


def test_a_read_only_data_folder_does_not_crash_the_app(shared, tiny_model_dir):
    """The whole app as a person would start it, without root's rights, answering a prompt."""
    model = shutil.copytree(tiny_model_dir, shared / "model")
    model.chmod(0o755)
    data = shared / "data"
    data.mkdir()
    history(data / "draftless.sqlite3", "kept")
    before = digest(data / "draftless.sqlite3")
    for folder in (shared / "cache", shared / "config", shared / "home"):
        folder.mkdir()
        folder.chmod(0o777)
    data.chmod(0o555)
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        DRAFTLESS_DATA_DIR=str(data),
        DRAFTLESS_CONFIG_DIR=str(shared / "config"),
        DRAFTLESS_CACHE_DIR=str(shared / "cache"),
        DRAFTLESS_MODELS_DIR=str(shared / "cache" / "models"),
        HOME=str(shared / "home"),
        TMPDIR=str(shared / "home"),
        WARM_DATA_DIR=str(shared / "cache" / "warm"),
        WARM_MODEL=str(model),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            UNPRIVILEGED_APP,
            "--screenshot",
            str(shared / "home" / "s.png"),
            "--model",
            str(model),
            "--prompt",
            "hello",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert "cannot be written" in result.stderr  # the banner's message
    assert sorted(p.name for p in data.iterdir()) == ["draftless.sqlite3"]
    assert digest(data / "draftless.sqlite3") == before
