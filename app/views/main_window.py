"""The main window: chats on the left, the transcript in the middle, settings, the
inspector and the server this machine serves on the right. It wires the chat's views to
the ``ChatController``; models and engines are ``ModelPresenter``'s, the speculation bar
and inspector ``GaugePresenter``'s, the server panel ``ServerPresenter``'s."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QVBoxLayout,
    QWidget,
)

from . import theme
from .answer_format_bar import AnswerFormatBar
from .chat_widgets import Banner, Composer, EditBar, ask_to_delete
from .context_meter import ContextMeter
from ..presenters.controller import ChatController
from ..presenters.export import FORMATS
from .find_bar import FindBar, find_matches
from ..presenters.folder_actions import FolderActions
from .gauge import SpeculationBar
from ..presenters.gauge_presenter import GaugePresenter, on_screen
from .help import HelpDialog, show_about
from .inspector import Inspector
from .keyboard import move_focus
from .message_actions import MessageMenu
from ..presenters.model_presenter import ModelPresenter
from .models_view import DownloadBar
from .server_dialog import ServerDialog
from .server_panel import ServerPanel
from ..presenters.server_presenter import ServerPresenter
from .sessions_panel import SessionsPanel
from ..storage.settings import VARIED_TEMPERATURE
from .settings_panel import SettingsPanel
from .side_panels import SidePanels, make_dock, tab_width
from .system_prompt import SystemPromptBar
from .transcript import TranscriptView, copy_text
from .zoom import zoom_window
from engine.api import SERVER_PORT

MIN_WIDTH = 420  # the composer and one card still fit
CHATS_WIDTH = 220  # the chat list's width when it opens
SIDE_WIDTH = 330  # the settings/inspector column's width when it opens


class MainWindow(QMainWindow):
    def __init__(self, controller: ChatController, drafters: dict[str, str], default_drafter: str):
        super().__init__()
        self.controller = controller
        self.setWindowTitle("Draftless")
        self.setWindowIcon(theme.app_icon())
        self.resize(1280, 800)
        # Set here, not summed from the docks' minimums, so that the window can be made
        # narrow (the side panels fold, see resizeEvent) and a panel shown never widens it.
        self.setMinimumWidth(MIN_WIDTH)
        self.help_dialog: HelpDialog | None = None
        self._init_central()
        self._init_docks(drafters, default_drafter)
        self._menus()
        self._connect_signals()  # before the presenters': the transcript updates first
        self.model_presenter = ModelPresenter(self, controller)
        self.gauges = GaugePresenter(self, controller)
        self.message_menu = MessageMenu(self, controller)  # edit, delete, fork any message
        self.server_presenter = ServerPresenter(self, controller, self.server_panel)
        self.model_presenter.add_menu(self.model_menu)

        self.settings_panel.set_settings(controller.settings)
        self.speculation_bar.toggle.setChecked(controller.settings.highlight)
        self.transcript.set_highlight(controller.settings.highlight)
        self.zoomed = 1.0  # the rest of the window's text size, as the transcript's step
        self._zoom_rest(self.transcript.set_zoom(controller.settings.zoom))
        self.transcript.set_repeats(controller.regenerate_repeats)
        self.refresh_sessions()
        for notice in controller.startup_notices():
            self.banner.show_message(notice)
        self.input.setFocus()  # typing right after launch goes into the composer

    def _init_central(self) -> None:
        """The gauge, banner, transcript, edit bar and composer; the status bar's parts."""
        central = QWidget()
        central.setObjectName("central")
        column = QVBoxLayout(central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.speculation_bar, self.banner = SpeculationBar(), Banner()
        self.system_prompt_bar = SystemPromptBar(self.controller)
        self.answer_format_bar = AnswerFormatBar(self.controller, self)
        self.system_prompt_bar.attach(self.answer_format_bar.picker, self.answer_format_bar.panel)
        for part in (self.speculation_bar, self.banner, self.system_prompt_bar):
            column.addWidget(part)
        self.transcript = TranscriptView()
        self.find_bar = FindBar(self.controller, self.transcript)
        column.addWidget(self.find_bar)
        column.addWidget(self.transcript, 1)
        self.editing: int | None = None  # the question being edited, if any
        self.edit_bar = EditBar()
        column.addWidget(self.edit_bar)
        self.composer = composer = Composer(self.controller)
        self.input = composer.input
        self.send_button, self.stop_button = composer.send_button, composer.stop_button
        column.addWidget(composer)
        self.setCentralWidget(central)
        self.server_label = QLabel()
        self.server_label.setObjectName("serverLabel")
        self.server_label.hide()
        # made now, not on the first message: a message never shifts the chat (a test checks)
        self.statusBar().addPermanentWidget(self.server_label)
        self.download_bar = DownloadBar()
        self.statusBar().addPermanentWidget(self.download_bar)
        self.context_meter = ContextMeter(self.controller)
        composer.place_meter(self.context_meter)  # under Send, at the right
        composer.pendingChanged.connect(self.context_meter.set_pending)

    def _init_docks(self, drafters: dict[str, str], default_drafter: str) -> None:
        """The chat list on the left; settings, inspector and server tabbed on the right."""
        self.sessions_panel = SessionsPanel()
        self.sessions_dock = make_dock(self, "Chats", self.sessions_panel, Qt.LeftDockWidgetArea)
        self.settings_panel = SettingsPanel(drafters, default_drafter)
        self.settings_dock = make_dock(
            self, "Settings", self.settings_panel, Qt.RightDockWidgetArea
        )
        self.inspector = Inspector()
        self.inspector_dock = make_dock(self, "Inspector", self.inspector, Qt.RightDockWidgetArea)
        self.server_panel = ServerPanel(SERVER_PORT)
        self.server_dock = make_dock(self, "Server", self.server_panel, Qt.RightDockWidgetArea)
        self.tabifyDockWidget(self.settings_dock, self.inspector_dock)
        self.tabifyDockWidget(self.inspector_dock, self.server_dock)
        self.settings_dock.raise_()
        self.resizeDocks([self.sessions_dock, self.settings_dock], [220, 330], Qt.Horizontal)
        self.sessions_dock.setMinimumWidth(max(150, self.sessions_panel.minimumSizeHint().width()))
        right = [self.settings_dock, self.inspector_dock, self.server_dock]
        needed = tab_width(right, least=280)
        # the side panels in folding order: the chat list, then the settings/inspector/server column
        self.panels = SidePanels(
            self,
            {"chats": [self.sessions_dock], "side": right},
            {
                "chats": max(CHATS_WIDTH, self.sessions_panel.minimumSizeHint().width()),
                "side": max(SIDE_WIDTH, needed),
            },
        )

    def resizeEvent(self, event):
        """Side panels fold when the chat would get narrower than it can use, and come back
        when the window grows (``side_panels``)."""
        super().resizeEvent(event)
        self.panels.fit(event.size().width())

    def keyPressEvent(self, event):  # noqa: N802 (Qt's name)
        """Esc stops the answer from wherever the focus is: a key no control of the window
        takes comes here, even when the window is not the active one and the Stop action's
        shortcut does not fire (a desktop without a window manager, until a click)."""
        if event.key() == Qt.Key_Escape and self.controller.answering_here:
            self.controller.stop()
            event.accept()
            return
        super().keyPressEvent(event)

    def focusNextPrevChild(self, forward: bool) -> bool:  # noqa: N802 (Qt's name)
        """Tab and Shift+Tab walk the controls in the order they are on the screen."""
        return move_focus(self, self.focus_columns(), forward) or super().focusNextPrevChild(
            forward
        )

    def focus_columns(self) -> list:
        """The window's columns, left to right: the docks on the left, the chat, the docks
        on the right, the status bar."""
        docks = (self.sessions_dock, self.settings_dock, self.inspector_dock, self.server_dock)
        left = [d for d in docks if self.dockWidgetArea(d) == Qt.LeftDockWidgetArea]
        right = [d for d in docks if d not in left]
        return [*left, self.centralWidget(), *right, self.statusBar()]

    def _menus(self) -> None:
        chat = self.menuBar().addMenu("&Chat")
        self.new_action = chat.addAction("New chat", self.new_chat, QKeySequence.New)
        self.new_folder_action = chat.addAction(
            "New folder…", lambda: self.folder_actions.new_folder()
        )
        self.regenerate_action = chat.addAction(
            "Regenerate answer", self.regenerate, QKeySequence("Ctrl+R")
        )
        self.stop_action = chat.addAction("Stop", self.controller.stop, QKeySequence("Esc"))
        self.stop_action.setEnabled(False)
        chat.addSeparator()
        for kind, (name, _) in FORMATS.items():
            chat.addAction(f"Export chat as {name}…", lambda *_, kind=kind: self.export_open(kind))
        chat.addSeparator()
        self.settings_action = chat.addAction("Settings…", self.show_settings)
        self.settings_action.setShortcuts(
            [QKeySequence(QKeySequence.Preferences), QKeySequence("Ctrl+,")]
        )
        self.settings_action.setMenuRole(QAction.PreferencesRole)  # Cmd+, in the app menu on a Mac
        chat.addSeparator()
        chat.addAction("Quit", self.close, QKeySequence.Quit)  # last, as in every app
        self.model_menu = self.menuBar().addMenu("&Model")  # filled by the model presenter
        view = self.menuBar().addMenu("&View")
        self.find_action = view.addAction(
            "Find in chat…", self.find_bar.open, QKeySequence(QKeySequence.Find)
        )
        view.addSeparator()
        for dock in (self.sessions_dock, self.settings_dock, self.inspector_dock, self.server_dock):
            view.addAction(dock.toggleViewAction())
        view.addSeparator()
        self.zoom_in_action = view.addAction("Bigger text", lambda: self.zoom(1))
        self.zoom_in_action.setShortcuts(
            [QKeySequence(QKeySequence.ZoomIn), QKeySequence("Ctrl+=")]
        )
        self.zoom_out_action = view.addAction(
            "Smaller text", lambda: self.zoom(-1), QKeySequence(QKeySequence.ZoomOut)
        )
        view.addAction("Actual size", lambda: self.zoom(0), QKeySequence("Ctrl+0"))
        view.addSeparator()
        self.highlight_action = QAction("Highlight accepted drafts", self, checkable=True)
        self.highlight_action.setChecked(True)
        self.highlight_action.toggled.connect(self.speculation_bar.toggle.setChecked)
        view.addAction(self.highlight_action)
        self.markdown_action = QAction("Render Markdown", self, checkable=True)
        self.markdown_action.setChecked(True)
        self.markdown_action.setToolTip("Off: show answers as the raw text the model wrote")
        self.markdown_action.toggled.connect(self.transcript.set_markdown)
        view.addAction(self.markdown_action)
        help_menu = self.menuBar().addMenu("&Help")
        self.help_action = help_menu.addAction(
            "How Draftless works", self.show_help, QKeySequence.HelpContents
        )
        self.about_action = help_menu.addAction("About Draftless", lambda: show_about(self))
        self.about_action.setMenuRole(QAction.AboutRole)  # in the app menu on a Mac

    def _connect_signals(self) -> None:
        c = self.controller
        self.input.submitted.connect(self.send)
        self.send_button.clicked.connect(lambda: self.send(self.input.toPlainText()))
        self.composer.readyToSend.connect(lambda: self.send(self.input.toPlainText()))
        self.stop_button.clicked.connect(c.stop)
        self.sessions_panel.newRequested.connect(self.new_chat)
        self.sessions_panel.openRequested.connect(self.open_chat)
        self.find_bar.closed.connect(self.input.setFocus)
        self.sessions_panel.renameRequested.connect(self.rename_chat)
        self.sessions_panel.deleteRequested.connect(self.delete_chat)
        self.sessions_panel.exportRequested.connect(self.export_chat)
        self.sessions_panel.searchChanged.connect(lambda _: self.refresh_sessions())
        self.folder_actions = FolderActions(self, c)
        self.settings_panel.settingsEdited.connect(c.update_settings)
        self.speculation_bar.highlightToggled.connect(self.set_highlight)
        self.transcript.copyRequested.connect(self.copy_message)
        self.transcript.regenerateRequested.connect(self.regenerate)
        self.transcript.variedRequested.connect(self.regenerate_varied)
        self.transcript.continueRequested.connect(self.continue_answer)
        self.transcript.versionRequested.connect(c.show_version)
        self.transcript.editRequested.connect(self.start_edit)
        self.edit_bar.cancel_button.clicked.connect(self.cancel_edit)
        c.sessionsChanged.connect(self.refresh_sessions)
        c.sessionOpened.connect(self.show_session)
        c.messageAdded.connect(self.message_added)
        c.messageRemoved.connect(self.transcript.remove_message)
        c.answerStarted.connect(self.answer_started)
        c.answerUpdated.connect(self.answer_updated)
        c.answerProgress.connect(self.answer_progress)
        c.answerFinished.connect(self.answer_finished)
        c.busyChanged.connect(self.set_busy)
        c.models.loadFinished.connect(self.model_ready)
        c.problem.connect(self.banner.show_message)
        c.solved.connect(self.banner.resolve)
        c.status.connect(self.show_status)
        c.settingsChanged.connect(self._settings_changed)
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(self.follow_color_scheme)

    # chat actions -------------------------------------------------------------------------
    def send(self, text: str):
        self.settings_panel.flush()
        if self.composer.reading:  # sent once the files are read
            self.composer.wait_to_send()
            return None
        if not (text := self.composer.message(text)).strip():  # with the attached files
            return None
        if self.controller.models.loading:  # sent once the model is in (model_ready)
            self.composer.wait_for_model(self.model_presenter.picker.loading or "the model")
            return None
        if self.controller.busy:
            self.composer.say(
                "An answer is being written: press Esc to stop it, or wait for it; your "
                "message stays here."
                if self.controller.answering_here
                else "Another chat is answering: Send works when it has finished; your "
                "message stays here."
            )
            return None
        if self.editing is not None:
            task = self.controller.edit(self.editing, text)
        else:
            task = self.controller.send(text)
        if task is not None:
            self.composer.clear()
            self.cancel_edit()
        self.input.setFocus()  # sent or not, the next words typed go into the composer
        return task

    def model_ready(self, ok: bool, why: str) -> None:
        """A load ended: a message that waited for it goes now, or stays with the reason."""
        if not self.composer.send_when_loaded:
            return
        self.composer.send_when_loaded = False
        if ok:
            self.composer.say("")
            self.send(self.input.toPlainText())
        else:
            self.composer.say(f"Not sent: the model did not load ({why}). Your message is here.")

    def start_edit(self, message_id: int, text: str) -> None:
        """Put an earlier question in the composer; sending it branches the chat there."""
        self.editing = message_id
        self.composer.set_message(text)
        self.input.setFocus()
        self.edit_bar.show()

    def cancel_edit(self) -> None:
        if self.editing is not None:
            self.editing = None
            self.edit_bar.hide()

    def regenerate(self):
        self.settings_panel.flush()
        return self.controller.regenerate()

    def continue_answer(self):
        self.settings_panel.flush()
        return self.controller.continue_answer()

    def regenerate_varied(self):
        self.settings_panel.flush()
        return self.controller.regenerate(VARIED_TEMPERATURE)

    def show_help(self) -> HelpDialog:
        """What the highlights and the gauge mean (a window beside the chat)."""
        if self.help_dialog is None:
            self.help_dialog = HelpDialog(self)
            zoom_window(self.help_dialog, 1.0, self.zoomed, keep=self.transcript)  # a window
        self.help_dialog.show()
        self.help_dialog.raise_()
        return self.help_dialog

    def show_settings(self) -> None:
        self.panels.open("side", self.settings_dock)
        self.settings_panel.setFocus()

    def new_chat(self) -> None:
        self.controller.new_session()
        self.input.setFocus()

    def open_chat(self, session_id: str) -> None:
        """Open a chat picked in the list; picked while searching, at the first match."""
        self.controller.open_session(session_id)
        search = self.sessions_panel.search.text()
        if search.strip() and find_matches(self.controller.messages, search):
            self.find_bar.open(search)

    def rename_chat(self, session_id: str) -> None:
        session = self.controller.store.session(session_id)
        if session is None:
            return
        title = self.ask_text("Rename chat", "Name:", session.title)
        if title:
            self.controller.rename_session(session_id, title)

    def delete_chat(self, session_id: str) -> None:
        session = self.controller.store.session(session_id)
        if session is not None and self.confirm_delete(session.title):
            self.controller.delete_session(session_id)

    def export_chat(self, session_id: str, kind: str) -> None:
        session = self.controller.store.session(session_id)
        if session is None:
            return
        name, extension = FORMATS[kind]
        stem = "".join(c if c.isalnum() or c in " -_" else " " for c in session.title)
        suggested = (" ".join(stem.split()) or "chat") + "." + extension
        path = self.ask_save_path(
            f"Export “{session.title}” as {name}", suggested, f"{name} (*.{extension})"
        )
        if path and self.controller.export_session(session_id, kind, path):
            self.statusBar().showMessage(f"Exported to {path}", 4000)

    def export_open(self, kind: str) -> None:
        """Chat ▸ Export: the open chat."""
        if self.controller.session is not None:
            self.export_chat(self.controller.session.id, kind)

    def ask_save_path(self, title: str, suggested: str, filter_: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self, title, suggested, filter_)
        return path or None

    def confirm_delete(self, title: str) -> bool:
        question = f"Delete “{title}” and all its messages? This cannot be undone."
        return ask_to_delete(self, "Delete chat", question)

    def ask_text(self, title: str, label: str, text: str = "") -> str | None:
        value, ok = QInputDialog.getText(self, title, label, text=text)
        return value if ok else None

    def ask_server(self, url: str, key: str | None, keychain: bool):
        dialog = ServerDialog(url, key, keychain, self)
        return dialog.values() if dialog.exec() == QDialog.Accepted else None

    def show_status(self, text: str) -> None:
        """Engine work the answer waits on (measuring, tables): the status bar, no dialog."""
        if text:
            self.statusBar().showMessage(text)
        else:
            self.statusBar().clearMessage()

    def copy_message(self, text: str) -> None:
        copy_text(text)
        self.statusBar().showMessage("Copied to the clipboard", 2000)

    def set_highlight(self, on: bool) -> None:
        self.highlight_action.setChecked(on)
        self.transcript.set_highlight(on)
        if on != self.controller.settings.highlight:
            self.controller.update_settings(replace(self.controller.settings, highlight=on))

    def zoom(self, step: int) -> None:
        """Bigger (+1), smaller (-1) or normal (0) text in the whole window; remembered for
        the next start."""
        factor = self.transcript.zoom(step)
        self._zoom_rest(factor)
        if factor != self.controller.settings.zoom:
            self.controller.update_settings(replace(self.controller.settings, zoom=factor))

    def _zoom_rest(self, factor: float) -> None:
        """Everything but the transcript (zoomed by itself) at the transcript's ``factor``."""
        zoom_window(self, self.zoomed, factor, keep=self.transcript)
        self.zoomed = factor

    def _settings_changed(self, settings) -> None:
        if settings != self.settings_panel.settings():
            self.settings_panel.set_settings(settings)
        self.transcript.set_repeats(self.controller.regenerate_repeats)
        self.gauges.show_gauge()  # its scale is the draft count

    # sessions -----------------------------------------------------------------------------
    def refresh_sessions(self) -> None:
        """The chats matching the search; the open chat always stays listed, so Rename and
        Delete keep working on it while searching."""
        current = self.controller.session
        found = self.controller.sessions(self.sessions_panel.search.text())
        pinned = current is not None and all(s.id != current.id for s in found)
        if pinned:
            found.insert(0, current)
        self.sessions_panel.set_sessions(
            found, current.id if current else None, pinned, self.controller.store.folders()
        )
        self.setWindowTitle(f"{current.title} — Draftless" if current else "Draftless")

    def show_session(self, session) -> None:
        c = self.controller
        self.transcript.set_messages([] if session is None else c.messages)
        if session is not None and c.answering_here:
            self.transcript.start_answer(c.answer.provenance)
        self.transcript.set_busy(c.busy)
        self._show_stop()
        self.refresh_sessions()
        self.gauges.show_session()

    def message_added(self, message) -> None:
        if on_screen(self.controller, message):
            self.transcript.add_message(message)

    def answer_started(self, answer) -> None:
        if on_screen(self.controller, answer):
            self.transcript.start_answer(answer.provenance)

    def answer_updated(self, answer) -> None:
        if on_screen(self.controller, answer):
            self.transcript.answer_changed()

    def answer_progress(self, answer, event) -> None:
        if on_screen(self.controller, answer):
            self.transcript.reading_prompt(event.done, event.total, self.controller.reading_pace())

    def answer_finished(self, answer) -> None:
        if on_screen(self.controller, answer):
            self.transcript.finish_answer(answer.message)
        if answer.error:
            self.banner.engine_failed(answer.error)
        else:
            self.banner.engine_works()

    def set_busy(self, busy: bool) -> None:
        self.send_button.setEnabled(not busy)
        if not busy and not self.composer.send_when_loaded:
            self.composer.say("")  # "an answer is being written" no longer holds
        self._show_stop()
        self.regenerate_action.setEnabled(not busy)
        self.transcript.set_busy(busy)

    def _show_stop(self) -> None:
        c = self.controller
        self.stop_button.setEnabled(c.answering_here)
        self.stop_action.setEnabled(c.answering_here)
        self.send_button.setToolTip(
            "Another chat is answering: Send works when it has finished"
            if c.busy and not c.answering_here
            else "Send (Enter)"
        )

    # theme --------------------------------------------------------------------------------
    def follow_color_scheme(self, *_):
        theme.apply(QApplication.instance())
        self.gauges.restyle()
        self.transcript.restyle()
