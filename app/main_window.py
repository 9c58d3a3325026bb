"""The main window: chats on the left, the transcript in the middle, settings and the
inspector on the right. It only wires views to the ``ChatController``."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QProgressDialog,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)


from . import theme
from .controller import ChatController
from .export import FORMATS
from .gauge import SpeculationBar
from .help import ABOUT, HelpDialog, version
from .inspector import Inspector
from .livestats import LiveStats
from .model_catalog import ModelCatalogDialog
from .models_view import DownloadBar, InstalledModelsDialog
from .side_panels import SidePanels
from .remote_engine import api_base
from .server_dialog import ServerDialog
from .sessions_panel import SessionsPanel
from .settings import VARIED_TEMPERATURE
from .context_meter import ContextMeter
from .settings_panel import SettingsPanel
from .system_prompt import SystemPromptBar
from .transcript import TranscriptView, copy_text


MIN_WIDTH = 420  # the composer and one card still fit
CHATS_WIDTH = 220  # the chat list's width when it opens
SIDE_WIDTH = 330  # the settings/inspector column's width when it opens


class ChatInput(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line."""

    submitted = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("chatInput")
        self.setPlaceholderText("Message Draftless — Enter to send, Shift+Enter for a new line")
        self.setTabChangesFocus(True)
        self.setFixedHeight(72)

    def keyPressEvent(self, event):
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and not (
            event.modifiers() & Qt.ShiftModifier
        ):
            self.submitted.emit(self.toPlainText())
            return
        super().keyPressEvent(event)


class Banner(QFrame):
    """A dismissable line above the transcript for errors and notices."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("banner")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 6, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.PlainText)  # messages quote paths and errors as they are
        self.label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        layout.addWidget(close, 0, Qt.AlignTop)
        self.messages: list[str] = []
        self.hide()

    def show_message(self, text: str) -> None:
        self.messages.append(text)
        self.label.setText(text)
        self.show()


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
        self.progress: QProgressDialog | None = None
        self.help_dialog: HelpDialog | None = None
        self._init_central()
        self._init_docks(drafters, default_drafter)
        self._menus()
        self._connect_signals()

        self.settings_panel.set_settings(controller.settings)
        self.speculation_bar.toggle.setChecked(controller.settings.highlight)
        self.transcript.set_highlight(controller.settings.highlight)
        self.transcript.set_zoom(controller.settings.zoom)
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
        self.speculation_bar = SpeculationBar()
        column.addWidget(self.speculation_bar)
        self.banner = Banner()
        column.addWidget(self.banner)
        self.system_prompt_bar = SystemPromptBar(self.controller)
        column.addWidget(self.system_prompt_bar)
        self.transcript = TranscriptView()
        column.addWidget(self.transcript, 1)
        self.editing: int | None = None  # the question being edited, if any
        self.edit_bar = QFrame()
        self.edit_bar.setObjectName("editBar")
        edit_row = QHBoxLayout(self.edit_bar)
        edit_row.setContentsMargins(12, 4, 12, 0)
        edit_label = QLabel(
            "Editing an earlier question: Send starts a new branch from it "
            "(the earlier version stays, ← → switch)."
        )
        edit_label.setWordWrap(True)
        edit_row.addWidget(edit_label, 1)
        self.cancel_edit_button = QPushButton("Cancel edit")
        edit_row.addWidget(self.cancel_edit_button)
        self.edit_bar.hide()
        column.addWidget(self.edit_bar)
        composer = QFrame()
        composer.setObjectName("composer")
        row = QHBoxLayout(composer)
        row.setContentsMargins(12, 8, 12, 10)
        self.input = ChatInput()
        row.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("primary")
        self.send_button.setToolTip("Send (Enter)")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stop")
        self.stop_button.setToolTip("Stop the answer after the current pass (Esc)")
        self.stop_button.setEnabled(False)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        row.addLayout(buttons)
        column.addWidget(composer)
        self.setCentralWidget(central)
        self.server_label = QLabel()
        self.server_label.setObjectName("serverLabel")
        self.server_label.hide()
        # made now, not on the first message: a message never shifts the chat (a test checks)
        self.statusBar().addPermanentWidget(self.server_label)
        self.download_bar = DownloadBar()
        self.statusBar().addPermanentWidget(self.download_bar)
        self.context_meter = ContextMeter(self.controller)  # under the composer, at the right
        self.statusBar().addPermanentWidget(self.context_meter)

    def _init_docks(self, drafters: dict[str, str], default_drafter: str) -> None:
        """The chat list on the left, settings and inspector tabbed on the right."""
        self.sessions_panel = SessionsPanel()
        self.sessions_dock = self._dock("Chats", self.sessions_panel, Qt.LeftDockWidgetArea)
        self.settings_panel = SettingsPanel(drafters, default_drafter)
        self.settings_dock = self._dock("Settings", self.settings_panel, Qt.RightDockWidgetArea)
        self.inspector = Inspector()
        self.inspector_dock = self._dock("Inspector", self.inspector, Qt.RightDockWidgetArea)
        self.tabifyDockWidget(self.settings_dock, self.inspector_dock)
        self.settings_dock.raise_()
        self.resizeDocks([self.sessions_dock, self.settings_dock], [220, 330], Qt.Horizontal)
        self.sessions_dock.setMinimumWidth(max(150, self.sessions_panel.minimumSizeHint().width()))
        needed = max(  # tabbed together, so one width: what the wider content needs
            280,
            *(
                dock.widget().widget().minimumSizeHint().width()
                + dock.widget().verticalScrollBar().sizeHint().width()
                + 4
                for dock in (self.settings_dock, self.inspector_dock)
            ),
        )
        for dock in (self.settings_dock, self.inspector_dock):  # tabbed together: one width
            dock.setMinimumWidth(needed)
        # the side panels in folding order: the chat list, then the settings/inspector column
        self.panels = SidePanels(
            self,
            {"chats": [self.sessions_dock], "side": [self.settings_dock, self.inspector_dock]},
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

    def _dock(self, title: str, widget: QWidget, area) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(title.lower() + "Dock")
        scroller = widget
        if not isinstance(widget, QScrollArea):  # a short window scrolls the panel, never clips it
            scroller = QScrollArea()
            scroller.setObjectName(title.lower() + "Scroller")
            scroller.setWidget(widget)
            scroller.setWidgetResizable(True)
            scroller.setFrameShape(QFrame.NoFrame)
            scroller.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)  # panels fit their width
        dock.setWidget(scroller)
        dock.setFeatures(
            QDockWidget.DockWidgetMovable
            | QDockWidget.DockWidgetClosable
            | QDockWidget.DockWidgetFloatable
        )
        self.addDockWidget(area, dock)
        return dock

    def _menus(self) -> None:
        chat = self.menuBar().addMenu("&Chat")
        self.new_action = chat.addAction("New chat", self.new_chat, QKeySequence.New)
        self.regenerate_action = chat.addAction(
            "Regenerate answer", self.regenerate, QKeySequence("Ctrl+R")
        )
        self.stop_action = chat.addAction("Stop", self.controller.stop, QKeySequence("Esc"))
        self.stop_action.setEnabled(False)
        chat.addSeparator()
        chat.addAction("Quit", self.close, QKeySequence.Quit)
        model = self.menuBar().addMenu("&Model")
        model.addAction("Open model folder…", self.pick_folder)
        model.addAction("Download a model…", self.pick_from_catalog)
        model.addAction("Hugging Face model…", self.pick_hub)
        model.addAction("Built-in model", lambda: self.controller.models.load_model(None))
        model.addAction("Installed models…", self.show_installed_models)
        model.addSeparator()
        model.addAction("Connect to server…", self.connect_server)
        model.addAction(
            "Use this machine's engine",
            lambda: self.controller.models.use_engine(self.controller.models.local_service),
        )
        self.settings_action = chat.addAction("Settings…", self.show_settings)
        self.settings_action.setShortcuts(
            [QKeySequence(QKeySequence.Preferences), QKeySequence("Ctrl+,")]
        )
        self.settings_action.setMenuRole(QAction.PreferencesRole)  # Cmd+, in the app menu on a Mac
        view = self.menuBar().addMenu("&View")
        for dock in (self.sessions_dock, self.settings_dock, self.inspector_dock):
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
        self.about_action = help_menu.addAction("About Draftless", self.show_about)
        self.about_action.setMenuRole(QAction.AboutRole)  # in the app menu on a Mac

    def _connect_signals(self) -> None:
        c = self.controller
        self.input.submitted.connect(self.send)
        self.send_button.clicked.connect(lambda: self.send(self.input.toPlainText()))
        self.stop_button.clicked.connect(c.stop)
        self.sessions_panel.newRequested.connect(self.new_chat)
        self.sessions_panel.openRequested.connect(c.open_session)
        self.sessions_panel.renameRequested.connect(self.rename_chat)
        self.sessions_panel.deleteRequested.connect(self.delete_chat)
        self.sessions_panel.exportRequested.connect(self.export_chat)
        self.sessions_panel.searchChanged.connect(lambda _: self.refresh_sessions())
        self.settings_panel.settingsEdited.connect(c.update_settings)
        self.settings_panel.openFolderRequested.connect(self.pick_folder)
        self.settings_panel.hubRequested.connect(self.pick_hub)
        self.settings_panel.embeddedRequested.connect(lambda: c.models.load_model(None))
        self.speculation_bar.highlightToggled.connect(self.set_highlight)
        self.transcript.copyRequested.connect(self.copy_message)
        self.transcript.inspectRequested.connect(self.inspect_view)
        self.transcript.regenerateRequested.connect(self.regenerate)
        self.transcript.variedRequested.connect(self.regenerate_varied)
        self.transcript.continueRequested.connect(self.continue_answer)
        self.transcript.versionRequested.connect(c.show_version)
        self.transcript.editRequested.connect(self.start_edit)
        self.cancel_edit_button.clicked.connect(self.cancel_edit)
        c.sessionsChanged.connect(self.refresh_sessions)
        c.sessionOpened.connect(self.show_session)
        c.messageAdded.connect(self.message_added)
        c.messageRemoved.connect(self.transcript.remove_message)
        c.answerStarted.connect(self.answer_started)
        c.answerUpdated.connect(self.answer_updated)
        c.passRecorded.connect(self.pass_recorded)
        c.answerProgress.connect(self.answer_progress)
        c.answerFinished.connect(self.answer_finished)
        c.busyChanged.connect(self.set_busy)
        c.models.modelChanged.connect(self.model_changed)
        c.models.loadStarted.connect(self.load_started)
        c.models.loadProgress.connect(self.load_progress)
        c.models.loadFinished.connect(self.load_finished)
        c.problem.connect(self.banner.show_message)
        c.models.downloadProgress.connect(self.download_progress)
        c.models.downloadFinished.connect(self.download_finished)
        self.download_bar.cancelRequested.connect(c.models.cancel_download)
        c.status.connect(self.show_status)
        c.settingsChanged.connect(self._settings_changed)
        c.models.engineChanged.connect(self.engine_changed)
        c.replayFinished.connect(self.inspector.replay.show_results)
        c.replayFailed.connect(self.inspector.replay.show_failure)
        self.inspector.replay.replayRequested.connect(self.replay)
        self.inspector.replay.highlightRequested.connect(self.show_replay_highlights)
        self.inspector.replay.applyRequested.connect(self.apply_replay_settings)
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(self.follow_color_scheme)

    # chat actions -------------------------------------------------------------------------
    def send(self, text: str):
        self.settings_panel.flush()
        if not text.strip():
            return None
        if self.editing is not None:
            task = self.controller.edit(self.editing, text)
        else:
            task = self.controller.send(text)
        if task is not None:
            self.input.clear()
            self.cancel_edit()
        self.input.setFocus()  # sent or not, the next words typed go into the composer
        return task

    def start_edit(self, message_id: int, text: str) -> None:
        """Put an earlier question in the composer; sending it branches the chat there."""
        self.editing = message_id
        self.input.setPlainText(text)
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
        self.help_dialog.show()
        self.help_dialog.raise_()
        return self.help_dialog

    def show_about(self) -> QMessageBox:
        box = QMessageBox(
            QMessageBox.NoIcon,
            "About Draftless",
            ABOUT.format(version=version()),
            QMessageBox.Ok,
            self,
        )
        box.setObjectName("aboutBox")
        box.setIconPixmap(theme.app_icon().pixmap(64, 64))
        box.setAttribute(Qt.WA_DeleteOnClose)
        box.open()
        return box

    def show_settings(self) -> None:
        self.panels.open("side", self.settings_dock)
        self.settings_panel.setFocus()

    def new_chat(self) -> None:
        self.controller.new_session()
        self.input.setFocus()

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

    def ask_save_path(self, title: str, suggested: str, filter_: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self, title, suggested, filter_)
        return path or None

    def confirm_delete(self, title: str) -> bool:
        box = QMessageBox(
            QMessageBox.Warning,
            "Delete chat",
            f"Delete “{title}” and all its messages? This cannot be undone.",
            QMessageBox.Cancel,
            self,
        )
        box.setObjectName("confirmDelete")
        delete = box.addButton("Delete", QMessageBox.DestructiveRole)
        box.setDefaultButton(QMessageBox.Cancel)
        box.exec()
        return box.clickedButton() is delete

    def ask_text(self, title: str, label: str, text: str = "") -> str | None:
        value, ok = QInputDialog.getText(self, title, label, text=text)
        return value if ok else None

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
        """Bigger (+1), smaller (-1) or normal (0) text; remembered for the next start."""
        factor = self.transcript.zoom(step)
        if factor != self.controller.settings.zoom:
            self.controller.update_settings(replace(self.controller.settings, zoom=factor))

    def _settings_changed(self, settings) -> None:
        if settings != self.settings_panel.settings():
            self.settings_panel.set_settings(settings)
        self.transcript.set_repeats(self.controller.regenerate_repeats)
        self._show_gauge()  # its scale is the draft count

    # sessions -----------------------------------------------------------------------------
    def refresh_sessions(self) -> None:
        """The chats matching the search; the open chat always stays listed, so Rename and
        Delete keep working on it while searching."""
        current = self.controller.session
        found = self.controller.sessions(self.sessions_panel.search.text())
        pinned = current is not None and all(s.id != current.id for s in found)
        if pinned:
            found.insert(0, current)
        self.sessions_panel.set_sessions(found, current.id if current else None)
        self.setWindowTitle(f"{current.title} — Draftless" if current else "Draftless")
        if pinned:  # listed because it is open, not because it matched: say so
            item = self.sessions_panel.list.item(0)
            font = item.font()
            font.setItalic(True)
            item.setFont(font)
            item.setToolTip(f"{current.title}\n(the open chat; it does not match the search)")

    def show_session(self, session) -> None:
        c = self.controller
        self.transcript.set_messages([] if session is None else c.messages)
        if session is not None:
            answer = c.answer
            if answer is not None and c.busy and answer.session_id == session.id:
                self.transcript.start_answer(answer.provenance)
        self.transcript.set_busy(c.busy)
        self._show_stop()
        self._show_gauge()
        self.refresh_sessions()
        self._refresh_inspector()

    def message_added(self, message) -> None:
        if self.controller.session and message.session_id == self.controller.session.id:
            self.transcript.add_message(message)

    def _visible(self, answer) -> bool:
        return (
            self.controller.session is not None and answer.session_id == self.controller.session.id
        )

    def _show_gauge(self) -> None:
        """The gauge shows the open chat's latest answer: live while it is being written."""
        c = self.controller
        answer = c.answer
        if (
            answer is not None
            and c.session is not None
            and answer.session_id == c.session.id
            and not answer.finished
        ):
            self.speculation_bar.show_numbers(answer.live, answer.draft_count, True)
            return
        last = next((m for m in reversed(c.messages) if m.role == "assistant" and m.stats), None)
        self.speculation_bar.show_numbers(
            LiveStats.of_message(last.stats, last.timing) if last else None,
            c.settings.draft_count,
            False,
        )

    def answer_started(self, answer) -> None:
        if self._visible(answer):
            self.transcript.start_answer(answer.provenance)
            self.speculation_bar.show_numbers(None, answer.draft_count, True)

    def answer_updated(self, answer) -> None:
        if self._visible(answer):
            self.transcript.answer_changed()

    def answer_progress(self, answer, event) -> None:
        if self._visible(answer):
            self.transcript.reading_prompt(event.done, event.total)

    def pass_recorded(self, answer) -> None:
        if self._visible(answer):
            self.speculation_bar.show_numbers(answer.live, answer.draft_count, True)

    def answer_finished(self, answer) -> None:
        message = answer.message
        if self._visible(answer):
            self.transcript.finish_answer(message)
        self._show_gauge()
        if message is not None:
            self._refresh_inspector(message.id)

    def set_busy(self, busy: bool) -> None:
        self.send_button.setEnabled(not busy)
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

    # inspector ----------------------------------------------------------------------------
    def _refresh_inspector(self, newest: int | None = None) -> None:
        answers = self.controller.inspectable_answers()
        checked = self.inspector.checked_ids() & {a[0] for a in answers}
        if newest is not None or not checked:
            checked = {newest if newest is not None else (answers[-1][0] if answers else -1)}
        self.inspector.set_answers(answers, checked)

    def inspect_view(self, view) -> None:
        if view.message_id is not None:
            self.inspector.inspect(view.message_id)
        self.panels.open("side", self.inspector_dock)

    # replay -------------------------------------------------------------------------------
    def replay(self, message_id: int, draft_counts: list[int], ngram_orders: list[int]):
        return self.controller.replay_grid(message_id, draft_counts, ngram_orders)

    def show_replay_highlights(self, message_id: int, result) -> None:
        view = self.transcript.view_of(message_id)
        if view is None or view.provenance is None:
            return
        if result is None:
            view.show_overlay(None)
            self._show_gauge()
            return
        label = result.label
        try:
            overlay = view.provenance.with_flags(result.from_draft, label + " (replay)")
        except ValueError as error:
            self.banner.show_message(f"Cannot show that replay on this answer ({error}).")
            return
        view.show_overlay(overlay, label, result.stats)
        self.speculation_bar.show_replay(result.stats, result.draft_count, label)

    def apply_replay_settings(self, result) -> None:
        self.statusBar().showMessage(self.controller.use_replayed_settings(result), 4000)

    # models -------------------------------------------------------------------------------
    def pick_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Choose an mlx-lm model folder")
        if folder:
            self.controller.models.load_model(folder)

    def pick_from_catalog(self) -> ModelCatalogDialog:
        dialog = ModelCatalogDialog(self)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.chosen.connect(self.controller.models.choose)
        dialog.open()
        return dialog

    def show_installed_models(self) -> InstalledModelsDialog:
        dialog = InstalledModelsDialog(self.controller.models.model_path, self)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.loadRequested.connect(self.controller.models.load_model)
        dialog.open()
        return dialog

    def download_progress(self, repo: str, text: str) -> None:
        meter = self.controller.models.download_meter
        self.download_bar.show_progress(text, meter.done, meter.total)

    def download_finished(self, repo: str, ok: bool, why: str) -> None:
        self.download_bar.finish()
        if not ok:
            self.banner.show_message(why)

    def pick_hub(self) -> None:
        repo = self.ask_text(
            "Hugging Face model", "Model id (for example mlx-community/SmolLM2-360M-Instruct):", ""
        )
        if repo and repo.strip():
            self.controller.models.choose(repo.strip())

    def connect_server(self):
        """Model → Connect to server…: the address (remembered) and the key (keychain)."""
        c = self.controller
        url = c.settings.server_url
        answer = self.ask_server(
            url,
            c.models.server_keys.get(api_base(url)) if url else None,
            c.models.server_keys.persistent,
        )
        if answer is None or not answer[0]:
            return None
        return c.models.connect_server(*answer)

    def ask_server(self, url: str, key: str | None, keychain: bool):
        dialog = ServerDialog(url, key, keychain, self)
        return dialog.values() if dialog.exec() == QDialog.Accepted else None

    def engine_changed(self, url: str) -> None:
        """Say in the status bar, for as long as it lasts, that a server answers."""
        self.server_label.setText(f"Answers from the server at {url}" if url else "")
        self.server_label.setToolTip(
            f"Answers come from the Draftless server at {url}. Model → Use this machine's "
            "engine switches back."
            if url
            else ""
        )
        self.server_label.setVisible(bool(url))

    def model_changed(self, name: str, path: str, speculation: str) -> None:
        self.settings_panel.show_model(
            name, path, speculation, self.controller.models.model_details
        )
        self.speculation_bar.show_model(name, speculation)

    def load_started(self, what: str) -> None:
        self.settings_panel.set_loading(True, what)
        self.send_button.setEnabled(False)
        if self.progress is None:
            self.progress = QProgressDialog(f"Loading {what}…", None, 0, 0, self)
            self.progress.setWindowTitle("Draftless")
            self.progress.setMinimumDuration(24 * 3600 * 1000)  # shown by _show_progress
            self.progress.setAutoClose(False)
            self.progress.setAutoReset(False)
            self.progress.setWindowModality(Qt.WindowModal)
            self.progress.setMinimumWidth(420)
        self.progress.setLabelText(
            f"Loading {what}…"
            if what != "the built-in model"
            else "Preparing the built-in model…\nThe first launch converts it "
            "once; this can take a minute."
        )
        self.progress.setRange(0, 0)
        self.progress.setValue(0)
        QTimer.singleShot(400, self._show_progress)  # quick loads never flash a dialog

    def _show_progress(self) -> None:
        if self.progress is not None and (self.controller.models.loading or self.controller.busy):
            self.progress.show()

    def load_progress(self, event) -> None:
        if event.stage == "prefill":
            return
        if self.progress is None:  # a load that happens inside a chat request
            self.load_started("the model")
        self.progress.setLabelText(event.message)
        if event.stage == "download" and self.controller.models.loading:
            self._offer_cancel(self.progress)
        if event.total > 0:
            self.progress.setRange(0, event.total)
            self.progress.setValue(min(event.done, event.total))

    def _offer_cancel(self, progress: QProgressDialog) -> None:
        """A download can be stopped; choosing the model again resumes it."""
        if progress.property("cancellable"):
            return
        progress.setProperty("cancellable", True)
        progress.setCancelButtonText("Cancel")
        progress.canceled.connect(self.controller.models.cancel_load)

    def load_finished(self, ok: bool, message: str) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress.deleteLater()
            self.progress = None
        self.settings_panel.set_loading(False)
        self.send_button.setEnabled(not self.controller.busy)
        if self.controller.models.model_name:
            self.model_changed(
                self.controller.models.model_name,
                self.controller.models.model_path,
                self.controller.models.speculation,
            )
        elif not ok:
            self.settings_panel.model_name.setText("No model loaded")
            self.settings_panel.speculation.setText(message)

    # theme --------------------------------------------------------------------------------
    def follow_color_scheme(self, *_):
        theme.apply(QApplication.instance())
        self.speculation_bar.restyle()
        self.inspector.refresh()
        self.transcript.restyle()
