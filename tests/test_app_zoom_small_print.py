"""Zoom reaches the small print: captions, the context meter, the gauge's labels, the
inspector's table, help, the status bar, the chat list's date and folder headers. Each
part's text is measured at 100%, then after Ctrl+= to 150% and Ctrl+- to 67%; it must
change in proportion (a style sheet's size in pixels, or a font set once, does not)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QStyleOptionViewItem

from app.views.chat_list import header_font

from .scripted_engine import answer_events
from .test_app_views import SIMPLE, app, ask, loop  # noqa: F401


def folder_font(chats):
    option = QStyleOptionViewItem()
    option.font = chats.font()
    folder = chats.item(0)
    chats.itemDelegate().initStyleOption(option, chats.indexFromItem(folder))
    assert option.text.endswith("Fruit") and option.font.bold()
    return QFont(option.font)


def small_print(window) -> dict:
    """The point size of each part's text."""
    chats = window.sessions_panel.list
    help_text = window.show_help().text
    parts = {
        "settings caption": window.settings_panel.drafter_summary.font(),
        "system prompt caption": window.system_prompt_bar.summary.font(),
        "find count": window.find_bar.count.font(),
        "context meter": window.context_meter.label.font(),
        "gauge": window.speculation_bar.gauge.font(),
        "inspector table": window.inspector.replay.table.font(),
        "help": help_text.font(),
        "status bar": window.statusBar().font(),
        "date header": header_font(chats.font()),
        "folder header": folder_font(chats),
        "message footer": window.transcript.views[-1].footer.font(),
        "empty chat's welcome": window.transcript.placeholder.font(),
    }
    window.help_dialog.close()
    return {name: size(font) for name, font in parts.items()}


def size(font: QFont) -> float:
    """In points, a size given in pixels (a style sheet's) too."""
    return font.pointSizeF() if font.pointSizeF() > 0 else font.pixelSize() * 0.75


def press(window, key, times):
    for _ in range(times):
        QTest.keyClick(window, key, Qt.ControlModifier)


def test_the_small_print_scales_with_the_zoom(app, qtbot):
    window, store = app.window, app.store
    ask(qtbot, app, "hello", answer_events(SIMPLE))
    store.create_session("outside")
    store.move_to_folder(store.create_session("inside").id, store.create_folder("Fruit").id)
    window.refresh_sessions()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    normal = small_print(window)

    press(window, Qt.Key_Equal, 3)  # 115%, 130%, 150%
    assert app.controller.settings.zoom == 1.5
    bigger = small_print(window)
    for name, size in normal.items():
        assert bigger[name] == pytest.approx(size * 1.5, rel=0.05), name

    press(window, Qt.Key_0, 1)
    press(window, Qt.Key_Minus, 3)  # 90%, 80%, 67%
    assert app.controller.settings.zoom == 0.67
    smaller = small_print(window)
    for name, size in normal.items():
        assert smaller[name] == pytest.approx(size * 0.67, rel=0.05), name
