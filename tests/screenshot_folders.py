"""Screenshots of the chat list's folders (open, collapsed, a chat's menu) and of the window
zoomed to 150% and 67%, light and dark at 600 and 1280 px, on the scripted engine:

    QT_QPA_PLATFORM=offscreen python -m tests.screenshot_folders --out /tmp/shots
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QTimer
from PySide6.QtGui import QPainter

from .screenshot_matrix import main, opened, settle

SIZES = (600, 1280)


async def capture(width: int, theme: str, out: str) -> None:
    from PySide6.QtWidgets import QApplication

    from app.__main__ import _save

    from .scripted_engine import ScriptedService, answer_events
    from .test_app_views import SIMPLE

    service = ScriptedService()
    application = await opened(width, theme, "scripted", service)
    window, store = application.window, application.store
    fruit, work = store.create_folder("Fruit"), store.create_folder("Work")
    for title, folder in (
        ("Quarterly report", work),
        ("Budget for the spring", work),
        ("Bread without yeast", None),
        ("Pears and quinces", fruit),
        ("Apple varieties", fruit),
    ):
        chat = store.create_session(title)
        if folder is not None:
            store.move_to_folder(chat.id, folder.id)
    service.queue(answer_events(SIMPLE))
    await window.send("Which pears keep best over the winter?")
    await settle()
    if not window.sessions_dock.isVisible():
        window.sessions_dock.toggleViewAction().trigger()
    window.refresh_sessions()
    await settle()

    def save(state: str) -> None:
        _save(window, f"{out}/h61-folders-{width}-{theme}-{state}.png")

    save("expanded")
    chats = window.sessions_panel.list
    chats.set_collapsed(chats.folder_row(work.id), True)
    await settle()
    save("collapsed")
    chats.setCurrentItem(chats.item(chats.count() - 1))
    QApplication.processEvents()
    QTimer.singleShot(
        300, lambda: open_submenu(window, f"{out}/h61-folders-{width}-{theme}-menu.png")
    )
    chats.customContextMenuRequested.emit(chats.row_rect(chats.currentItem()).center())  # waits
    await settle()
    for steps, name in ((3, "zoom150"), (-3, "zoom67")):
        window.zoom(0)
        for _ in range(abs(steps)):
            window.zoom(1 if steps > 0 else -1)
        await settle()
        save(name)
    window.zoom(0)
    await application.close()


def open_submenu(window, path: str) -> None:
    """With the chat's menu up (its ``exec`` waits): open "Move to folder", save, close."""
    from PySide6.QtWidgets import QApplication

    menu = QApplication.activePopupWidget()
    move = next(a for a in menu.actions() if a.text() == "Move to folder")
    menu.setActiveAction(move)
    submenu = move.menu()
    submenu.popup(menu.mapToGlobal(menu.actionGeometry(move).topRight()))
    QApplication.processEvents()
    shot = window.grab()
    painter = QPainter(shot)
    painter.drawPixmap(window.mapFromGlobal(menu.pos()), menu.grab())
    painter.drawPixmap(window.mapFromGlobal(submenu.pos()), submenu.grab())
    painter.end()
    shot.save(path)
    submenu.close()
    menu.close()


if __name__ == "__main__":
    sys.exit(main("tests.screenshot_folders", SIZES, capture))
