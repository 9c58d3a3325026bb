"""Screenshots of the Server panel stopped, running and failed (a port in use), in light and
dark at 600 and 1280 px, serving a tiny random-weight model (no download):

    QT_QPA_PLATFORM=offscreen python -m tests.screenshot_server --out /tmp/shots

Files: ``{width}-{theme}-server-{stopped,running,failed}.png``.
"""

from __future__ import annotations

import socket
import sys
import tempfile

from .screenshot_matrix import main, opened, settle
from .server_process import free_port
from .tiny_model import write_tiny_llama

SIZES = (600, 1280)


async def capture(width: int, theme: str, out: str) -> None:
    from PySide6.QtWidgets import QApplication

    from app.__main__ import _save

    model = write_tiny_llama(tempfile.mkdtemp(prefix="draftless-tiny-"))
    application = await opened(width, theme, str(model))
    window = application.window
    window.panels.open("side", window.server_dock)  # View ▸ Server
    panel, server = window.server_panel, window.server_presenter.server
    await settle()

    def save(state: str) -> None:
        QApplication.processEvents()
        _save(window, f"{out}/{width}-{theme}-server-{state}.png")

    save("stopped")
    panel.port.setValue(free_port())
    panel.start_button.click()
    while server.state == "starting":
        await settle(1)
    await settle()
    save("running")
    panel.stop_button.click()
    while server.active:
        await settle(1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        panel.port.setValue(taken.getsockname()[1])
        panel.start_button.click()
        await settle()
        save("failed")
    await application.close()


if __name__ == "__main__":
    sys.exit(main("tests.screenshot_server", SIZES, capture))
