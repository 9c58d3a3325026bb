"""The chat list's date groups: the pure grouping (fixed local dates) and the list that
shows them as headers above the chats (not selectable; search, delete and the menu work)."""

from __future__ import annotations

from datetime import datetime, timedelta

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtTest import QTest

from app.views.chat_dates import date_group, headers

from .test_app_views import answer_dialog, app, loop  # noqa: F401

NOW = datetime(2026, 11, 25, 0, 5)  # just after midnight, local time


def test_calendar_days_decide_the_group_not_hours():
    assert date_group(datetime(2026, 11, 25, 0, 1), NOW) == "Today"
    assert date_group(datetime(2026, 11, 24, 23, 59), NOW) == "Yesterday"  # six minutes ago
    assert date_group(datetime(2026, 11, 24, 0, 0), NOW) == "Yesterday"
    assert date_group(datetime(2026, 11, 23, 23, 0), NOW) == "Previous 7 days"
    assert date_group(datetime(2026, 11, 18, 9, 0), NOW) == "Previous 7 days"  # 7 days back
    assert date_group(datetime(2026, 11, 17, 9, 0), NOW) == "Previous 30 days"
    assert date_group(datetime(2026, 10, 26, 9, 0), NOW) == "Previous 30 days"  # 30 days back
    assert date_group(datetime(2026, 10, 25, 9, 0), NOW) == "October 2026"
    assert date_group(datetime(2025, 11, 25, 9, 0), NOW) == "November 2025"  # not this year's
    assert date_group(datetime(2026, 11, 26, 9, 0), NOW) == "Today"  # a clock that was ahead


def test_a_header_is_given_only_where_the_group_changes():
    stamps = [
        NOW - timedelta(minutes=1),
        NOW - timedelta(minutes=2),
        NOW - timedelta(hours=3),  # yesterday evening
        NOW - timedelta(days=40),
        NOW - timedelta(days=41),
        NOW - timedelta(days=400),
    ]
    shown = headers([s.timestamp() for s in stamps], NOW)
    assert shown == ["Today", None, "Yesterday", "October 2026", None, "October 2025"]


def chat_at(store, title, when):
    session = store.create_session(title)
    with store._writing():
        store.db.execute(
            "UPDATE sessions SET updated = ? WHERE id = ?", (when.timestamp(), session.id)
        )
    return session


def test_the_chat_list_shows_date_headers_that_cannot_be_selected(app, qtbot):
    window, panel = app.window, app.window.sessions_panel
    panel.now = lambda: NOW
    chat_at(app.store, "new idea", NOW - timedelta(minutes=3))
    chat_at(app.store, "about pears", NOW - timedelta(hours=2))
    chat_at(app.store, "pear tart", NOW - timedelta(days=3))
    chat_at(app.store, "old pears", NOW - timedelta(days=60))
    window.refresh_sessions()
    chats = panel.list
    titles = [chats.item(i).text() for i in range(chats.count())]
    assert titles == ["new idea", "about pears", "pear tart", "old pears"]  # one row per chat
    assert chats.header_texts() == ["Today", "Yesterday", "Previous 7 days", "September 2026"]

    # a header takes room above its chat and a click on it selects nothing
    second = chats.item(1)
    header_area = chats.visualItemRect(second)
    assert header_area.height() > chats.row_rect(second).height()
    chats.setCurrentItem(None)
    QTest.mouseClick(chats.viewport(), Qt.LeftButton, pos=header_area.topLeft() + QPoint(8, 3))
    assert (
        chats.currentItem() is None and chats.itemAt(header_area.topLeft() + QPoint(8, 3)) is None
    )
    QTest.mouseClick(chats.viewport(), Qt.LeftButton, pos=chats.row_rect(second).center())
    assert app.controller.session.title == "about pears"  # the list is rebuilt on opening
    assert chats.currentItem().text() == "about pears"

    # searching keeps the groups of what matches
    panel.search.setText("pear")
    titles = [chats.item(i).text() for i in range(chats.count())]
    assert titles == ["about pears", "pear tart", "old pears"]
    assert chats.header_texts() == ["Yesterday", "Previous 7 days", "September 2026"]

    # the menu of a chat opens on its row, not on its header
    shown = []

    def close_menu():
        menu = getattr(panel, "menu", None)
        if menu is None or not menu.isVisible():
            QTimer.singleShot(20, close_menu)
            return
        shown.append([a.text() for a in menu.actions()])
        menu.close()

    panel.menu = None
    chats.customContextMenuRequested.emit(chats.visualItemRect(chats.item(1)).topLeft())
    assert panel.menu is None  # on the "Previous 7 days" header: nothing
    QTimer.singleShot(0, close_menu)
    chats.customContextMenuRequested.emit(chats.row_rect(chats.item(1)).center())
    assert shown and "Delete…" in shown[0]

    # deleting a chat regroups the rest
    panel.search.setText("")
    seen = []
    answer_dialog(qtbot, "Delete", seen)
    window.delete_chat(chats.item(chats.count() - 1).data(Qt.UserRole))
    assert chats.header_texts() == ["Today", "Yesterday", "Previous 7 days"]
