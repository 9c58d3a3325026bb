"""Start Draftless: ``python -m app`` (or the ``draftless`` command).

``python -m app --screenshot FILE [--prompt TEXT] [--model PATH]`` runs offscreen, loads
the model, optionally answers one prompt, saves a PNG of the main window and exits
(0 when everything worked). Screenshots use a fresh temporary history and settings unless
DRAFTLESS_DATA_DIR / DRAFTLESS_CONFIG_DIR say otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import threading


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app", description="Draftless desktop chat")
    parser.add_argument(
        "--model",
        help="mlx-lm model folder or Hugging Face id to load "
        "(default: the last one used, else the built-in model)",
    )
    parser.add_argument("--screenshot", metavar="FILE", help="save a PNG of the window and exit")
    parser.add_argument("--prompt", help="with --screenshot: send this prompt first")
    parser.add_argument(
        "--capture-at",
        type=int,
        metavar="TOKENS",
        help="with --screenshot: capture mid-answer, after this many tokens",
    )
    parser.add_argument(
        "--panel",
        choices=("settings", "inspector"),
        help="with --screenshot: the side panel to show",
    )
    parser.add_argument("--theme", choices=("system", "light", "dark"), default="system")
    parser.add_argument("--size", default="1280x800", help="with --screenshot: window size WxH")
    parser.add_argument(
        "--replay",
        action="store_true",
        help="with --screenshot and --prompt: replay the answer in the inspector",
    )
    return parser


class Application:
    """Everything one run of the app owns: service, store, controller and window."""

    def __init__(self, service=None, theme_name: str = "system"):
        from engine.drafters import DEFAULT_DRAFTER
        from engine.runtime.service import EngineService

        from .views import theme
        from .presenters.controller import ChatController
        from .storage.hub_client import bound_hub_timeouts
        from .views.main_window import MainWindow
        from .storage.settings import SettingsStore
        from .storage.store import Store

        bound_hub_timeouts()  # before any download: it replaces the hub's shared client
        self.qapp = _qapp()
        theme.apply(self.qapp, None if theme_name == "system" else theme_name == "dark")
        self.qapp.setWindowIcon(theme.app_icon())
        self.owns_service = service is None
        self.service = service or EngineService()
        self.store = Store()
        self.controller = ChatController(self.service, self.store, SettingsStore())
        self.window = MainWindow(self.controller, self.service.drafters(), DEFAULT_DRAFTER)
        sessions = self.store.sessions()
        if sessions:
            self.controller.open_session(sessions[0].id)
        else:
            self.window.show_session(None)

    def start(self, model: str | None = None, *, use_saved: bool = True):
        """Load the model (the saved one by default) and return the loading task."""
        spec = (
            model if model is not None else (self.controller.settings.model if use_saved else None)
        )
        return self.controller.models.load_model(spec)

    async def start_or_fall_back(self, model: str | None = None) -> None:
        """Load ``model`` (or the saved one); if a saved model no longer loads, use the
        built-in one instead (the banner says why)."""
        spec = model if model is not None else self.controller.settings.model
        await self.start(spec)
        if not self.controller.models.model_name and model is None and spec is not None:
            self.window.banner.show_message(
                f"{self.window.banner.label.text()} Using the built-in model instead."
            )
            await self.start(None, use_saved=False)

    async def close(self) -> None:
        self.controller.stop()
        self.controller.models.cancel_download()  # its bytes stay: choosing the model again resumes
        try:  # an answer stops within a pass; a model conversion cannot be interrupted
            await asyncio.wait_for(self.controller.wait_idle(), 30)
        except asyncio.TimeoutError:
            pass
        self.window.settings_panel.flush()
        self.window.server_presenter.shutdown()  # a server the app started ends with it
        self.window.close()
        self.store.close()
        if self.owns_service:
            self.service.shutdown()


def _qapp():
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication(sys.argv[:1])
        app.setApplicationName("Draftless")
        app.setOrganizationName("Draftless")
        app.setDesktopFileName("draftless")
    return app


async def run_interactive(args, instance=None) -> int:
    from .single_instance import bring_forward

    application = Application(theme_name=args.theme)
    if instance is not None:  # a second launch on this data folder shows this window
        instance.activated.connect(lambda: bring_forward(application.window))
    closed = asyncio.Event()
    application.window.closeEvent = _closing(application.window.closeEvent, closed)
    application.window.show()
    task = asyncio.ensure_future(application.start_or_fall_back(args.model))
    await closed.wait()
    if not task.done():
        task.cancel()
    await application.close()
    return 0


def _closing(original, closed: asyncio.Event):
    def close_event(event):
        original(event)
        closed.set()

    return close_event


async def run_screenshot(args) -> int:
    from PySide6.QtWidgets import QApplication

    application = Application(theme_name=args.theme)
    window = application.window
    width, height = (int(v) for v in args.size.lower().split("x"))
    window.show()
    window.resize(width, height)
    QApplication.processEvents()  # a narrow size folds the side panels; they settle in a second pass
    window.resize(width, height)
    if args.panel == "inspector":
        window.inspector_dock.raise_()
    status, task = 0, None
    await application.start(args.model)
    if not application.controller.models.model_name:
        status = 1
    elif args.prompt:
        task = window.send(args.prompt)
        if task is None:  # not sent (the banner says why, and the prompt stays in the box)
            status = 1
        elif args.capture_at:
            while (
                not task.done()
                and len(application.controller.answer.provenance.tokens) < args.capture_at
            ):
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)  # let the throttled transcript refresh catch up
            _save(window, args.screenshot)
            application.controller.stop()
        if task is not None:
            await task
            if application.controller.answer.error:
                status = 1
    if args.replay and application.controller.messages:
        answer = application.controller.messages[-1]
        window.inspector.inspect(answer.id)
        replaying = window.gauges.replay(
            answer.id, [2, 4, 8], [application.controller.settings.ngram_order]
        )
        if replaying is not None:  # None: it could not start (the inspector says why)
            await replaying
        best = window.inspector.replay.chosen()
        if best is not None:
            window.gauges.show_replay_highlights(answer.id, best)
    if args.panel == "inspector" or args.replay:
        window.inspector_dock.raise_()
    if not args.capture_at or task is None:
        for _ in range(5):
            QApplication.processEvents()
            await asyncio.sleep(0.05)
        _save(window, args.screenshot)
    for message in window.banner.messages:  # what the banner said, for a run nobody watches
        print(message, file=sys.stderr)
    await application.close()
    return status


def _save(window, path: str) -> None:
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    if not window.grab().save(path):
        raise SystemExit(f"Could not write {path}")
    print(f"Saved {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    scratch = None
    if args.screenshot:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        if not (os.environ.get("DRAFTLESS_DATA_DIR") and os.environ.get("DRAFTLESS_CONFIG_DIR")):
            scratch = tempfile.mkdtemp(prefix="draftless-screenshot-")
            os.environ.setdefault("DRAFTLESS_DATA_DIR", os.path.join(scratch, "data"))
            os.environ.setdefault("DRAFTLESS_CONFIG_DIR", os.path.join(scratch, "config"))
    try:
        return _run(args, scratch)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _run(args, scratch: str | None) -> int:
    import engine  # noqa: F401  (loads OpenBLAS before anything imports mlx)
    import qasync
    from engine.paths import data_dir

    from .single_instance import SingleInstance

    app = _qapp()
    instance = None
    if not args.screenshot:
        instance = SingleInstance(data_dir())
        if not instance.acquire():
            if instance.ask_running_instance():
                print(
                    "Draftless is already running with this data folder; its window was "
                    "brought forward.",
                    file=sys.stderr,
                )
                return 0
            print(
                f"Draftless is already running with this data folder (process "
                f"{instance.holder_pid()}) but does not answer. Quit that process, or start "
                "this one with another DRAFTLESS_DATA_DIR.",
                file=sys.stderr,
            )
            return 1
    app.setQuitOnLastWindowClosed(False)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    runner = run_screenshot(args) if args.screenshot else run_interactive(args, instance)
    with loop:
        status = loop.run_until_complete(runner)
    if instance is not None:
        instance.release()
    if any(t.name == "draftless-engine" and t.is_alive() for t in threading.enumerate()):
        # Quit while a model was still converting: that work cannot be interrupted, and
        # tearing the interpreter down under it aborts. Everything is saved; leave now.
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
