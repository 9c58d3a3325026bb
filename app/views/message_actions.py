"""Edit, delete and fork from any message of the open chat (the card's "⋯" menu).

``MessageActions`` changes the chat through the controller's store and tells the views
with the controller's signals; ``MessageMenu`` is the menu on each card (its "⋯" button,
or a right-click / the Menu key on its text) and the dialogs it asks with.

- Editing a question puts it in the composer: sending it branches the chat there (the
  controller's ``edit``). An answer is edited in its card (``app.views.inline_editor``), and
  the text saved replaces it. Its highlights
  and figures described the tokens the model wrote, so they are dropped, and its finish
  reason becomes ``EDITED`` (the footer says "edited"). Later questions get it as edited.
- Deleting removes just that message, as LM Studio does: what followed it follows the
  message before it. Two messages of one role can then stand in a row;
  ``app.presenters.controller.chat_turns`` joins such a run into one turn, so a chat template that
  insists on alternating user and assistant turns still takes the chat.
- Forking copies the chat as shown, up to and including the message, with its system
  prompt, into a new chat titled "Fork 1: <title>" (each fork of a chat numbered apart,
  the word first where the chat list cuts long titles), and opens it. The original is
  untouched.

While an answer is being written, Edit and Delete are refused with a line in the banner:
the answer is stored after the chat's last message, which must not change under it.
"""

from __future__ import annotations

import re
import sqlite3

from PySide6.QtCore import QObject, QPoint, Qt
from PySide6.QtWidgets import QMenu

from ..presenters.controller import shortened, unsaved
from ..presenters.livestats import EDITED
from ..storage.provenance import Provenance
from ..storage.store import Message, Session
from .chat_widgets import ask_to_delete
from .inline_editor import InlineEditor

BUSY = "Wait for the answer to finish, or stop it, before editing or deleting messages."
FORK = re.compile(r"Fork (\d+): (.*)")  # a fork's title: its number among the forks of a chat
QUOTED = 80  # characters of a message quoted in the delete question (about one line)


def fork_title(title: str, titles: list[str]) -> str:
    """'Fork 2: <the chat's title>': the word and its number first, where a list that cuts
    long titles off still shows them, each fork of a chat (or of its forks) numbered apart."""
    found = FORK.fullmatch(title)
    base = found.group(2) if found else title
    taken = [int(m.group(1)) for t in titles if (m := FORK.fullmatch(t)) and same(m.group(2), base)]
    return shortened(f"Fork {max(taken, default=0) + 1}: {base}")


def same(cut: str, whole: str) -> bool:
    """Two titles of one chat, either of them cut short with "…"."""
    cut, whole = cut.removesuffix("…"), whole.removesuffix("…")
    return cut.startswith(whole) or whole.startswith(cut)


class MessageActions(QObject):
    """Edit an answer, delete a message, fork the chat (the open chat's messages)."""

    def __init__(self, controller, parent=None):
        super().__init__(parent)
        self.controller = controller

    def _find(self, message_id: int) -> int | None:
        return next((i for i, m in enumerate(self.controller.messages) if m.id == message_id), None)

    def _refused(self) -> bool:
        if self.controller.busy:
            self.controller.problem.emit(BUSY)
            return True
        return False

    def _reload(self) -> None:
        c = self.controller
        c.messages = c.store.messages(c.session.id)
        c.sessionOpened.emit(c.session)
        c.sessionsChanged.emit()

    def _change(self, write, what: str) -> bool:
        """Run ``write`` on the store and show the chat as it is now; False (the banner says
        ``what`` did not happen, and why) when the store failed."""
        try:
            write()
        except (sqlite3.Error, OSError) as error:
            self._failed(error, what)
            return False
        self._reload()
        return True

    def _failed(self, error: Exception, what: str) -> None:
        self.controller.problem.emit(
            unsaved(error, f"{what}: the chat history could not be changed", "then try again.")
        )

    def edit_answer(self, message_id: int, text: str) -> bool:
        """Replace an answer's text with ``text``; False (the banner says why) when not."""
        index = self._find(message_id)
        if index is None or self._refused():
            return False
        message = self.controller.messages[index]
        if message.role != "assistant" or not text.strip() or text == message.content:
            return False
        edited = Message(
            id=message.id,
            session_id=message.session_id,
            role="assistant",
            content=text,
            finish_reason=EDITED,
            model=message.model,
            provenance=Provenance.from_tokens(text, []),
        )
        store = self.controller.store
        return self._change(lambda: store.update_message(edited), "The answer was not changed")

    def delete(self, message_id: int) -> bool:
        """Delete one message of the open chat; False (the banner says why) when not."""
        if self._find(message_id) is None or self._refused():
            return False
        store = self.controller.store
        return self._change(lambda: store.delete_message(message_id), "The message was not deleted")

    def fork(self, message_id: int) -> Session | None:
        """A new chat with the open chat's messages up to and including ``message_id``,
        opened; None (the banner says why) when it could not be made."""
        c = self.controller
        index = self._find(message_id)
        if index is None:
            return None
        upto = [m.id for m in c.messages[: index + 1] if m.id is not None]
        title = fork_title(c.session.title, [s.title for s in c.store.sessions()])
        try:
            fork = c.store.fork_chat(c.session.id, upto, title)
        except (sqlite3.Error, OSError) as error:
            self._failed(error, "The chat was not forked")
            return None
        c.open_session(fork.id)
        c.sessionsChanged.emit()
        return fork


class MessageMenu(QObject):
    """The card's menu: Edit, Delete, Fork chat from here (``MessageActions``)."""

    def __init__(self, window, controller):
        super().__init__(window)
        self.window = window
        self.controller = controller
        self.actions = MessageActions(controller, self)
        window.transcript.menuRequested.connect(self.show_menu)

    def menu_for(self, view, extra: QMenu | None = None) -> QMenu:
        """The menu for a card (``extra``: the text's own menu, Copy and Select all, that
        the entries join)."""
        menu = extra or QMenu(self.window)
        menu.setObjectName("messageMenu")
        if extra is not None:
            menu.addSeparator()
        idle = not self.controller.busy
        stored = view.message_id is not None and not view.streaming
        what = "question" if view.role == "user" else "answer"
        entries = (
            (f"Edit {what}…", lambda: self.edit(view), idle),
            (f"Delete {what}…", lambda: self.delete(view), idle),
            ("Fork chat from here", lambda: self.fork(view), True),
        )
        for text, slot, enabled in entries:
            action = menu.addAction(text, slot)
            action.setEnabled(stored and enabled)
        if not idle:
            note = menu.addAction("Edit and Delete work once the answer is written")
            note.setEnabled(False)
        return menu

    def show_menu(self, view, where: QPoint | None) -> None:
        """Pop the menu under the card's "⋯" button, or at ``where`` (a right-click or the
        Menu key on the text, with the text's own entries)."""
        if where is None:
            menu = self.menu_for(view)
            corner = view.more_button.mapToGlobal(view.more_button.rect().bottomRight())
            where = corner - QPoint(menu.sizeHint().width(), 0)  # under ⋯, inside the card
        else:
            own = view.body.createStandardContextMenu(where)
            own.setParent(self.window, own.windowFlags())  # styled as the window's menus
            menu = self.menu_for(view, own)
            where = view.body.viewport().mapToGlobal(where)
        menu.setAttribute(Qt.WA_DeleteOnClose)
        menu.popup(where)

    # the entries --------------------------------------------------------------------------
    def edit(self, view) -> None:
        if view.role == "user":
            self.window.start_edit(view.message_id, view.text)
            return
        message_id = view.message_id
        InlineEditor.open_on(view, lambda text: self.actions.edit_answer(message_id, text))

    def delete(self, view) -> None:
        what = "question" if view.role == "user" else "answer"
        message_id = view.message_id
        if self.confirm_delete_message(what, view.text) and self.actions.delete(message_id):
            if self.window.editing == message_id:  # the question in the composer is gone
                self.window.cancel_edit()

    def fork(self, view) -> None:
        if self.actions.fork(view.message_id) is not None:
            self.window.input.setFocus()

    # asking (tests replace these) ---------------------------------------------------------
    def confirm_delete_message(self, what: str, text: str) -> bool:
        start = " ".join(text.split())
        start = start if len(start) <= QUOTED else start[: QUOTED - 1] + "…"
        return ask_to_delete(
            self.window,
            f"Delete {what}",
            f"Delete this {what} (“{start}”)? The messages after it stay. This cannot be undone.",
        )
