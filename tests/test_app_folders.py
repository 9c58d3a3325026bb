"""Folders in the chat list, driven as a person would: the menus (mouse and keyboard), the
dialogs, clicks and keys on a folder's row, dragging a chat in and out. Deleting a folder
moves its chats out and says so; collapsing is remembered; search finds chats in folders."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QInputDialog, QMenu

from app.views.chat_list import COLLAPSED_ROLE, FOLDER_ROLE, IN_FOLDER_ROLE

from .scripted_engine import answer_events
from .test_app_views import SIMPLE, answer_dialog, app, ask, loop  # noqa: F401


def type_name(text: str) -> None:
    """Type ``text`` into the name dialog once it is up and press Enter (the real dialog)."""

    def type_it():
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, QInputDialog):
            QTimer.singleShot(20, type_it)
            return
        QTest.keyClicks(dialog.focusWidget(), text)
        QTest.keyClick(dialog.focusWidget(), Qt.Key_Return)

    QTimer.singleShot(0, type_it)


def choose(path: list[str]) -> None:
    """Pick ``path`` (entries, then sub-menu entries) in the menu once it is up, by keyboard."""

    def pick(depth=0):
        menu = QApplication.activePopupWidget()
        if not isinstance(menu, QMenu) or (depth and menu.title() != path[depth - 1]):
            QTimer.singleShot(20, lambda: pick(depth))
            return
        [action] = [a for a in menu.actions() if a.text() == path[depth]]
        menu.setActiveAction(action)
        QTest.keyClick(menu, Qt.Key_Return if depth == len(path) - 1 else Qt.Key_Right)
        if depth < len(path) - 1:
            QTimer.singleShot(0, lambda: pick(depth + 1))

    QTimer.singleShot(0, pick)


def rows(chats) -> list[str]:
    """The rows shown, a folder's as "[name]" and its chats as "  title"."""
    shown = []
    for i in range(chats.count()):
        item = chats.item(i)
        if item.isHidden():
            continue
        if item.data(FOLDER_ROLE) is not None:
            shown.append(f"[{item.text()}]")
        else:
            indent = "  " if item.data(IN_FOLDER_ROLE) is not None else ""
            shown.append(indent + item.text())
    return shown


def row(chats, text: str):
    return next(chats.item(i) for i in range(chats.count()) if chats.item(i).text() == text)


def right_click(chats, item) -> None:
    chats.customContextMenuRequested.emit(chats.row_rect(item).center())


def test_a_chat_goes_into_a_new_folder_from_its_menu_and_out_again(app, qtbot):
    window, store = app.window, app.store
    chats = window.sessions_panel.list
    store.create_session("bread")
    store.create_session("pears")
    window.refresh_sessions()
    assert rows(chats) == ["pears", "bread"]

    choose(["Move to folder", "New folder…"])
    type_name("Fruit")
    right_click(chats, row(chats, "pears"))
    assert [f.name for f in store.folders()] == ["Fruit"]
    assert rows(chats) == ["[Fruit]", "  pears", "bread"]
    folder = row(chats, "Fruit")
    assert "Folder Fruit, 1 chat" == folder.data(Qt.AccessibleTextRole)

    # the other chat joins it from the same menu, then the first leaves it
    choose(["Move to folder", "Fruit"])
    right_click(chats, row(chats, "bread"))
    assert rows(chats) == ["[Fruit]", "  pears", "  bread"]
    choose(["Move out of folder"])
    right_click(chats, row(chats, "pears"))
    assert rows(chats) == ["[Fruit]", "  bread", "pears"]
    assert store.session(row(chats, "pears").data(Qt.UserRole)).folder_id is None


def test_deleting_a_folder_keeps_its_chats_and_says_so(app, qtbot):
    window, store = app.window, app.store
    chats = window.sessions_panel.list
    work = store.create_folder("Work")
    for title in ("report", "budget"):
        store.move_to_folder(store.create_session(title).id, work.id)
    window.refresh_sessions()
    chats.setCurrentItem(row(chats, "Work"))

    seen = []
    answer_dialog(qtbot, "Cancel", seen)
    window.sessions_panel.delete_button.click()  # Delete acts on the folder's row
    assert "Its 2 chats move out to the top level" in seen[0] and "No chat is deleted" in seen[0]
    assert [f.name for f in store.folders()] == ["Work"]

    answer_dialog(qtbot, "Delete", seen)
    choose(["Delete folder…"])
    right_click(chats, row(chats, "Work"))
    assert store.folders() == []
    assert sorted(s.title for s in store.sessions()) == ["budget", "report"]
    assert rows(chats) == ["budget", "report"]
    assert "its 2 chats are now at the top level" in window.statusBar().currentMessage()


def test_a_folder_is_renamed_and_made_from_the_chat_menu_and_the_keyboard(app, qtbot):
    window, store = app.window, app.store
    chats = window.sessions_panel.list
    store.create_session("notes")
    type_name("Drafts")
    window.new_folder_action.trigger()  # Chat ▸ New folder…
    assert [f.name for f in store.folders()] == ["Drafts"]
    assert rows(chats) == ["[Drafts]", "notes"]

    chats.setFocus()
    chats.setCurrentItem(row(chats, "Drafts"))
    type_name("Letters")
    QTest.keyClick(window.sessions_panel.rename_button, Qt.Key_Space)  # Rename, on the folder
    assert [f.name for f in store.folders()] == ["Letters"]
    assert rows(chats) == ["[Letters]", "notes"]

    # the Menu key opens the current chat's menu, and its entries are reached by keys
    chats.setFocus()
    chats.setCurrentItem(row(chats, "notes"))
    chats.setFocus()
    choose(["Move to folder", "Letters"])
    QTest.keyClick(chats, Qt.Key_Menu)
    assert rows(chats) == ["[Letters]", "  notes"]


def test_collapsing_a_folder_hides_its_chats_and_is_remembered(app, qtbot):
    window, store = app.window, app.store
    chats = window.sessions_panel.list
    fruit = store.create_folder("Fruit")
    for title in ("apples", "pears"):
        store.move_to_folder(store.create_session(title).id, fruit.id)
    store.create_session("bread")
    window.refresh_sessions()
    folder = row(chats, "Fruit")

    QTest.mouseClick(chats.viewport(), Qt.LeftButton, pos=chats.row_rect(folder).center())
    assert rows(chats) == ["[Fruit]", "bread"] and folder.data(COLLAPSED_ROLE)
    assert store.folders()[0].collapsed
    QTest.mouseClick(chats.viewport(), Qt.LeftButton, pos=chats.row_rect(folder).center())
    assert rows(chats) == ["[Fruit]", "  pears", "  apples", "bread"]
    assert not store.folders()[0].collapsed

    # the keyboard: Left closes, Right opens, and the folder's row stays current
    chats.setFocus()
    chats.setCurrentItem(folder)
    QTest.keyClick(chats, Qt.Key_Left)
    assert rows(chats) == ["[Fruit]", "bread"] and chats.currentItem() is folder
    QTest.keyClick(chats, Qt.Key_Right)
    assert rows(chats) == ["[Fruit]", "  pears", "  apples", "bread"]
    QTest.keyClick(chats, Qt.Key_Space)
    assert rows(chats) == ["[Fruit]", "bread"]

    window.refresh_sessions()  # rebuilt, as after a restart: still closed
    assert rows(chats) == ["[Fruit]", "bread"]


def drop(chats, item, target_point: QPoint) -> None:
    """Drag ``item``'s chat and drop it at ``target_point`` (the events Qt's drag sends)."""
    data = chats.mimeData([item])
    actions = Qt.MoveAction
    viewport = chats.viewport()
    for event in (
        QDragEnterEvent(target_point, actions, data, Qt.LeftButton, Qt.NoModifier),
        QDragMoveEvent(target_point, actions, data, Qt.LeftButton, Qt.NoModifier),
    ):
        QApplication.sendEvent(viewport, event)
        assert event.isAccepted()
    dropped = QDropEvent(target_point, actions, data, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(viewport, dropped)


def test_dragging_a_chat_onto_a_folder_moves_it_in_and_onto_the_top_level_moves_it_out(app, qtbot):
    window, store = app.window, app.store
    chats = window.sessions_panel.list
    store.create_folder("Fruit")
    store.create_session("bread")
    store.create_session("pears")
    window.refresh_sessions()
    assert rows(chats) == ["[Fruit]", "pears", "bread"]
    assert row(chats, "pears").flags() & Qt.ItemIsDragEnabled
    assert not row(chats, "Fruit").flags() & Qt.ItemIsDragEnabled

    drop(chats, row(chats, "pears"), chats.row_rect(row(chats, "Fruit")).center())
    assert rows(chats) == ["[Fruit]", "  pears", "bread"]
    drop(chats, row(chats, "bread"), chats.row_rect(row(chats, "pears")).center())
    assert rows(chats) == ["[Fruit]", "  pears", "  bread"]  # onto a chat in the folder
    below = chats.row_rect(chats.item(chats.count() - 1)).bottomLeft() + QPoint(10, 40)
    drop(chats, row(chats, "pears"), below)  # the empty space below the list: out
    assert rows(chats) == ["[Fruit]", "  bread", "pears"]
    assert len(store.sessions()) == 2


def test_search_finds_a_chat_in_a_closed_folder_and_opens_it_at_the_match(app, qtbot):
    window, store = app.window, app.store
    panel = window.sessions_panel
    chats = panel.list
    ask(qtbot, app, "tell me about quinces", answer_events(SIMPLE))
    quince = app.controller.session
    store.create_session("bread")
    fruit = store.create_folder("Fruit")
    store.create_folder("Empty")
    store.move_to_folder(quince.id, fruit.id)
    store.set_folder_collapsed(fruit.id, True)
    window.new_chat()
    window.refresh_sessions()
    assert "tell me about quinces" not in rows(chats)  # closed

    panel.search.setText("quince")
    assert rows(chats)[:2] == ["[Fruit]", "  tell me about quinces"]  # open while searching
    assert "[Empty]" not in rows(chats)
    QTest.mouseClick(
        chats.viewport(),
        Qt.LeftButton,
        pos=chats.row_rect(row(chats, "tell me about quinces")).center(),
    )
    assert app.controller.session.id == quince.id
    assert window.find_bar.isVisible() and window.find_bar.edit.text() == "quince"
    panel.search.setText("")
    assert store.folders()[1].collapsed  # searching did not change what was remembered


def test_a_fork_stays_in_its_parents_folder(app, qtbot):
    window, store = app.window, app.store
    chats = window.sessions_panel.list
    ask(qtbot, app, "a pear question", answer_events(SIMPLE))
    parent = app.controller.session
    fruit = store.create_folder("Fruit")
    store.move_to_folder(parent.id, fruit.id)
    window.refresh_sessions()
    window.message_menu.actions.fork(app.controller.messages[-1].id)
    assert app.controller.session.id != parent.id
    assert store.session(app.controller.session.id).folder_id == fruit.id
    assert rows(chats)[0] == "[Fruit]" and len([r for r in rows(chats) if r.startswith("  ")]) == 2
