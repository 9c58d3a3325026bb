"""Screenshots of the app's main states in light and dark at 600, 1280 and 1920 px, on the
built-in model, to look at after a change to the views:

    QT_QPA_PLATFORM=offscreen python -m tests.screenshot_matrix --out /tmp/shots

Per size and theme: an answer stopped at Max tokens (Continue shown), its card's ⋯ menu, files
attached in the composer (one refused), the model picker's menu, the settings panel, the chat list,
a replay overlay in the inspector, a download in the status bar, and the Installed models dialog.
Each size and theme runs in a process of its own, with throw-away data and
settings folders.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from dataclasses import replace

SIZES = (600, 1280, 1920)
THEMES = ("light", "dark")
PROMPTS = (
    "Rename the variable x to count in: def f(x):\n    return x + 1",
    "Write a short poem about <b>tags</b> and List<String>",
)


async def settle(rounds: int = 6) -> None:
    from PySide6.QtWidgets import QApplication

    for _ in range(rounds):
        QApplication.processEvents()
        await asyncio.sleep(0.05)


async def opened(width: int, theme: str, model: str | None, service=None):
    """The app shown ``width`` px wide in ``theme``, started on ``model`` (``service``: an
    engine in place of this machine's, e.g. the scripted one)."""
    from app.__main__ import Application

    application = Application(service=service, theme_name=theme)
    application.window.show()
    application.window.resize(width, 800)
    await settle(1)
    application.window.resize(width, 800)
    await application.start(model)
    return application


async def capture(width: int, theme: str, out: str) -> None:
    from PySide6.QtGui import QPainter
    from PySide6.QtWidgets import QApplication

    from app.__main__ import _save
    from app.storage.downloads import DownloadMeter
    from app.views.models_view import InstalledModelsDialog

    application = await opened(width, theme, None)
    window, controller = application.window, application.controller
    controller.update_settings(replace(controller.settings, max_tokens=40))
    for prompt in PROMPTS:
        window.new_chat()
        await window.send(prompt)
    await settle()

    def save(state: str) -> None:
        _save(window, f"{out}/{width}-{theme}-{state}.png")

    save("answer")
    window.transcript.views[-1].more_button.click()  # the card's menu: edit, delete, fork
    await settle()
    menu = QApplication.activePopupWidget()
    shot = window.grab()
    painter = QPainter(shot)
    painter.drawPixmap(window.mapFromGlobal(menu.pos()), menu.grab())
    painter.end()
    shot.save(f"{out}/{width}-{theme}-menu.png")
    menu.close()
    files = tempfile.mkdtemp(prefix="draftless-files-")
    for name, data in (("report.md", b"# Q3\n\nSales rose.\n" * 40), ("scan.jpg", b"\xff\0" * 9)):
        with open(f"{files}/{name}", "wb") as file:
            file.write(data)
    await window.composer.attach_files([f"{files}/report.md", f"{files}/scan.jpg"])  # 1 refused
    await settle()
    save("attach")  # the composer's chips and the refusal under them
    window.composer.clear()
    picker = window.model_presenter.picker
    picker.menu.popup(picker.button.mapToGlobal(picker.button.rect().bottomLeft()))
    await settle()
    picker.menu.grab().save(f"{out}/{width}-{theme}-picker-menu.png")
    picker.menu.close()
    window.show_settings()
    await settle()
    save("settings")
    if not window.sessions_dock.isVisible():
        window.sessions_dock.toggleViewAction().trigger()
    await settle()
    save("chats")
    answer = controller.messages[-1]
    window.transcript.views[-1].inspect_button.click()
    replaying = window.gauges.replay(answer.id, [2, 4, 8], [controller.settings.ngram_order])
    if replaying is not None:
        await replaying
    best = window.inspector.replay.chosen()
    if best is not None:
        window.gauges.show_replay_highlights(answer.id, best)
    await settle()
    save("replay")
    meter, total = DownloadMeter(), 1_500_000_000
    meter.update(0, total, 0.0)
    meter.update(total * 2 // 5, total, 40.0)
    name = "mlx-community/Qwen2.5-0.5B-Instruct-4bit"
    window.download_bar.show_progress(meter.describe(name), total * 2 // 5, total)
    await settle()
    save("download")
    dialog = InstalledModelsDialog(controller.models.model_path, window)
    dialog.show()
    await settle()
    dialog.grab().save(f"{out}/{width}-{theme}-installed.png")
    dialog.close()
    await application.close()


def run_one(width: int, theme: str, out: str, capture=capture) -> None:
    import qasync
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv[:1])
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    with loop:
        loop.run_until_complete(capture(width, theme, out))


def main(module: str = "tests.screenshot_matrix", sizes=SIZES, capture=capture) -> int:
    """Each size and theme in a process of its own (``module --one``), with throw-away data
    and settings folders."""
    parser = argparse.ArgumentParser(description=f"Screenshots by {module}")
    parser.add_argument("--out", required=True, help="folder for the PNG files")
    parser.add_argument("--one", metavar="WIDTH:THEME", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.one:
        width, theme = args.one.split(":")
        run_one(int(width), theme, args.out, capture)
        return 0
    for width in sizes:
        for theme in THEMES:
            with tempfile.TemporaryDirectory(prefix="draftless-shots-") as scratch:
                env = dict(
                    os.environ,
                    DRAFTLESS_DATA_DIR=f"{scratch}/data",
                    DRAFTLESS_CONFIG_DIR=f"{scratch}/config",
                )
                command = [sys.executable, "-m", module, "--out", args.out]
                subprocess.run([*command, "--one", f"{width}:{theme}"], env=env, check=True)
            print(f"{width} px, {theme}: saved in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
