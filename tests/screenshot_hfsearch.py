"""Screenshots of Search Hugging Face over the window, in light and dark at 600 and 1280 px,
against the fake hub of the tests (no network): the models found, one model's
quantizations with their sizes, and offline:

    QT_QPA_PLATFORM=offscreen python -m tests.screenshot_hfsearch --out /tmp/shots
"""

from __future__ import annotations

import os
import sys

from .fake_hf_api import FakeHfApi
from .screenshot_matrix import main, opened, settle
from .scripted_engine import ScriptedService

SIZES = (600, 1280)


async def capture(width: int, theme: str, out: str) -> None:
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QPainter

    application = await opened(width, theme, "scripted", ScriptedService())
    window = application.window
    api = FakeHfApi()
    window.model_presenter.hub_api = lambda: api
    dialog = window.model_presenter.search_hub()

    async def save(state: str, until) -> None:
        for _ in range(100):
            if until():
                break
            await settle(1)
        await settle()
        shot = window.grab()
        painter = QPainter(shot)
        corner = QPoint((width - dialog.width()) // 2, (800 - dialog.height()) // 2)
        painter.drawPixmap(corner, dialog.grab())
        painter.setPen(window.palette().mid().color())  # the frame a window manager would draw
        painter.drawRect(corner.x() - 1, corner.y() - 1, dialog.width() + 1, dialog.height() + 1)
        painter.end()
        shot.save(f"{out}/h61-hfsearch-{width}-{theme}-{state}.png")

    dialog.query.setText("qwen instruct")
    dialog.search()
    await save("results", lambda: dialog.results.rowCount() > 0)
    dialog.results.selectRow(1)
    sizes = dialog.quantizations
    await save(
        "quantizations",
        lambda: all("asking" not in sizes.item(row, 1).text() for row in range(sizes.rowCount())),
    )
    dialog.quantizations.selectRow(0)
    await save("chosen", lambda: True)
    os.environ["HF_HUB_OFFLINE"] = "1"
    dialog.search()
    await save("offline", lambda: dialog.message.text().startswith("Offline"))
    del os.environ["HF_HUB_OFFLINE"]
    dialog.close()
    await application.close()


if __name__ == "__main__":
    sys.exit(main("tests.screenshot_hfsearch", SIZES, capture))
