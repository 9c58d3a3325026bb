"""Small parts of the main window: the composer (text box, attached files, Send and Stop),
the chips that show a message's files, the bar shown while an earlier question is edited,
and the banner above the transcript."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import shiboken6
from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from . import theme
from ..storage.attachments import (
    CHARS_PER_TOKEN,
    MAX_CHARS_UNKNOWN_WINDOW,
    Attachment,
    AttachmentError,
    budget_chars,
    clean_name,
    compose,
    read_attachment,
    split_message,
    wrap,
)
from .context_meter import context_use
from ..storage.downloads import duration_text
from .flow_layout import FlowLayout
from ..storage.pdf_reading import WorkerRead
from .keyboard import tab_leaves
from .zoom import keep_lines, small_print

ATTACH_FILTER = (
    "Text, Markdown or PDF (*.txt *.md *.markdown *.pdf *.csv *.json *.log *.py *.rst);;"
    "All files (*)"
)
COMPOSER_LINES = 3.5  # a short question whole, a long one scrolls
PREVIEW_LINES = 10  # of a file's text in its chip's tooltip
PREVIEW_WIDTH = 100  # characters: a file of one huge line still gives a tooltip that fits
# Feather icons' "paperclip" and "file-text" outlines (MIT licence), drawn in the theme's
# muted colour: no font here or on a Mac is needed for them, unlike emoji
PAPERCLIP = (
    "M21.44 11.05l-9.19 9.19a6 6 0 0 1-8.49-8.49l9.19-9.19a4 4 0 0 1 5.66 5.66"
    "l-9.2 9.19a2 2 0 0 1-2.83-2.83l8.49-8.48"
)
DOCUMENT = (
    "M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8z M14 2v6h6 M16 13H8 M16 17H8 M10 9H8"
)
ICON_PIXELS = 48  # drawn at twice the 24-unit outline: sharp on a Retina screen too


def line_icon(outline: str) -> QIcon:
    """An outline icon (SVG path data on a 24-unit grid) in the theme's muted colour."""
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{ICON_PIXELS}" '
        f'height="{ICON_PIXELS}" viewBox="0 0 24 24" fill="none" '
        f'stroke="{theme.current().muted}" stroke-width="2" stroke-linecap="round" '
        f'stroke-linejoin="round"><path d="{outline}"/></svg>'
    )
    pixmap = QPixmap()  # a null icon where Qt's SVG image plugin is missing
    return QIcon(pixmap) if pixmap.loadFromData(svg.encode(), "SVG") else QIcon()


def local_files(mime) -> list[str]:
    """The local files a drag carries (none for text or web links)."""
    if not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]


class ChatInput(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line; files dropped on it are attached."""

    submitted = Signal(str)
    filesDropped = Signal(list)  # paths

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("chatInput")
        self.setPlaceholderText("Message Draftless — Enter to send, Shift+Enter for a new line")
        self.setAccessibleName("Message")
        tab_leaves(self)
        keep_lines(self, COMPOSER_LINES)

    def keyPressEvent(self, event):
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and not (
            event.modifiers() & Qt.ShiftModifier
        ):
            self.submitted.emit(self.toPlainText())
            return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source) -> bool:  # noqa: N802 (Qt's name)
        return bool(local_files(source)) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source) -> None:  # noqa: N802
        files = local_files(source)
        if files:  # attached, not pasted as a path
            self.filesDropped.emit(files)
        else:
            super().insertFromMimeData(source)


@dataclass(frozen=True)
class TokenCount:
    """What an attached file costs: the loaded model's own count, else an estimate."""

    tokens: int
    counted: bool  # the tokenizer counted them (else CHARS_PER_TOKEN estimated them)

    def text(self) -> str:
        return f"{'' if self.counted else '≈'}{self.tokens:,} tokens"


def count_tokens(service, text: str) -> TokenCount:
    """``text``'s tokens by the engine's tokenizer when it can say (this machine's engine
    with a model loaded; runs on a worker thread), else estimated from its characters."""
    counter = getattr(service, "count_tokens", None)
    counted = counter(text) if counter is not None else None
    if counted is None:
        return TokenCount(-(-len(text) // CHARS_PER_TOKEN), False)
    return TokenCount(counted, True)


def reading_time(tokens: TokenCount, pace: float | None) -> str:
    """'3,850 tokens attached: the model reads them in about 5 min (13 tokens/s here)'."""
    said = f"{tokens.text()} attached"
    tokens = tokens.tokens
    if not pace:
        return said + ": how long the model takes to read them is measured with an answer"
    return (
        f"{said}: the model reads them in about {duration_text(tokens / pace)} "
        f"({pace:,.0f} tokens/s here) before it answers"
    )


@dataclass(eq=False)  # compared by identity: the same file may be attached twice
class FileRead:
    """A file being read in the background; its chip says so until it is done. A PDF is
    parsed in ``worker``'s process, which removing the file stops."""

    path: Path
    name: str
    worker: WorkerRead = field(default_factory=WorkerRead)


class FileChip(QFrame):
    """One attached file: its name and size, its first lines on hover, ✕ when removable;
    a file still being read says so (its ✕ discards it)."""

    removeRequested = Signal()

    def __init__(
        self,
        attachment: Attachment | FileRead,
        removable: bool,
        parent=None,
        tokens: TokenCount | None = None,
    ):
        super().__init__(parent)
        self.setObjectName("fileChip")
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 2, 2 if removable else 8, 2)
        row.setSpacing(4)
        self.icon = QLabel()
        row.addWidget(self.icon)
        reading = isinstance(attachment, FileRead)
        label = f"reading {attachment.name}…" if reading else attachment.label
        if tokens is not None:
            label += f" · {tokens.text()}"
        self.label = QLabel(label)
        self.label.setTextFormat(Qt.PlainText)  # a file's name is shown as it is
        row.addWidget(self.label)
        if reading:
            self.setToolTip(f"{attachment.name} is being read; Send waits for it")
        else:
            preview = "\n".join(
                line[:PREVIEW_WIDTH] + ("…" if len(line) > PREVIEW_WIDTH else "")
                for line in attachment.text.splitlines()[:PREVIEW_LINES]
            )
            more = "\n…" if attachment.text.count("\n") >= PREVIEW_LINES else ""
            self.setToolTip(
                f"{attachment.name} ({len(attachment.text):,} characters)\n\n{preview}{more}"
            )
        if removable:
            remove = QToolButton()
            remove.setText("✕")
            remove.setAutoRaise(True)
            remove.setToolTip(f"Remove {attachment.name}")
            remove.clicked.connect(self.removeRequested.emit)
            row.addWidget(remove)
            self.remove_button = remove
        self.restyle()

    def restyle(self) -> None:
        size = self.label.fontMetrics().height()
        self.icon.setPixmap(line_icon(DOCUMENT).pixmap(QSize(size, size)))

    def changeEvent(self, event):  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:  # light/dark switched
            self.restyle()


class FileChips(QWidget):
    """A row of file chips that wraps; hidden when there are none."""

    removeRequested = Signal(int)  # the index of the file to take off

    def __init__(self, removable: bool, parent=None):
        super().__init__(parent)
        self.removable = removable
        self.flow = FlowLayout(self, spacing=6, align_right=False)
        self.chips: list[FileChip] = []
        self.hide()

    def show_files(
        self, attachments: list[Attachment | FileRead], tokens: dict | None = None
    ) -> None:
        """A chip per file (``tokens``: what each costs, by attachment)."""
        for chip in self.chips:
            self.flow.removeWidget(chip)
            chip.deleteLater()
        tokens = tokens or {}
        self.chips = [FileChip(a, self.removable, self, tokens.get(id(a))) for a in attachments]
        for index, chip in enumerate(self.chips):
            chip.removeRequested.connect(lambda index=index: self.removeRequested.emit(index))
            self.flow.addWidget(chip)
        self.setVisible(bool(attachments))

    def show_message(self, content: str) -> str:
        """Chips for the files at the start of a stored message; the rest of its text."""
        text, files = split_message(content)
        if files or self.chips:
            self.show_files(files)
        return text


class Composer(QFrame):
    """The message box with Send and Stop beside it, the paperclip that attaches files, and
    the attached files' chips above it. A file must fit in what the ``controller``'s open
    chat leaves of the model's context window (``app.storage.attachments.budget_chars``).

    Files are read one after another on a worker thread (a PDF's pages take ~35 ms each
    here), so the window keeps answering; their chips say "reading …" meanwhile. Send
    pressed while a file reads waits for it: ``readyToSend`` fires once the files are in,
    unless one of them was refused."""

    readyToSend = Signal()
    pendingChanged = Signal(int)  # tokens of the attached files, not sent yet

    def __init__(self, controller=None, parent=None):
        super().__init__(parent)
        self.setObjectName("composer")
        self.setAcceptDrops(True)
        self.controller = controller
        self.attachments: list[Attachment] = []
        self.tokens: dict[int, TokenCount] = {}  # by id() of an attachment in the box
        self.reading: list[FileRead] = []  # in order; the first is on the worker thread
        self.refused: list[str] = []  # why files read since the last idle moment were refused
        self.send_when_read = False
        self.read_task: asyncio.Task | None = None
        column = QVBoxLayout(self)
        column.setContentsMargins(12, 8, 12, 10)
        column.setSpacing(4)
        self.chips = FileChips(removable=True)
        self.chips.removeRequested.connect(self.remove_file)
        column.addWidget(self.chips)
        self.notice = QLabel()  # why a file was refused
        self.notice.setObjectName("attachNotice")
        self.notice.setWordWrap(True)
        self.notice.setTextFormat(Qt.PlainText)
        self.notice.hide()
        column.addWidget(self.notice)
        self.note = QLabel()  # what Send is waiting for, or why it did nothing
        self.note.setObjectName("composerNote")
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.PlainText)
        self.note.hide()
        column.addWidget(self.note)
        self.send_when_loaded = False  # Send was pressed while the model loads
        self.cost = QLabel()  # what the attached files cost: tokens, and the wait they mean
        self.cost.setObjectName("hint")
        small_print(self.cost)
        self.cost.setWordWrap(True)
        self.cost.hide()
        column.addWidget(self.cost)
        row = QHBoxLayout()
        column.addLayout(row)
        self.attach_button = QToolButton()
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setAccessibleName("Attach files")  # an icon: screen readers need words
        self.attach_button.setIcon(line_icon(PAPERCLIP))
        self.attach_button.setIconSize(QSize(20, 20))
        if self.attach_button.icon().isNull():
            self.attach_button.setText("Attach")
        self.attach_button.setToolTip(
            "Attach a text, Markdown or PDF file: its text goes into your message "
            "(or drop files on the message box)"
        )
        self.attach_button.clicked.connect(self.pick_files)
        row.addWidget(self.attach_button, 0, Qt.AlignTop)
        self.input = ChatInput()
        self.input.filesDropped.connect(self.attach_files)
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
        self.under = QHBoxLayout()  # the context meter, under Send
        self.under.setContentsMargins(0, 0, 0, 0)
        self.under.addStretch(1)
        column.addLayout(self.under)

    def place_meter(self, meter: QWidget) -> None:
        """The context meter under Send, at the right."""
        self.under.addWidget(meter, 0, Qt.AlignRight | Qt.AlignTop)

    def changeEvent(self, event):  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:  # light/dark switched
            self.attach_button.setIcon(line_icon(PAPERCLIP))

    # attached files -----------------------------------------------------------------------
    def pick_files(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files", "", ATTACH_FILTER)
        self.attach_files(paths)

    def attach_files(self, paths) -> asyncio.Task | None:
        """Read and attach each file that can be, in the background; say why for those
        refused. The task that reads them (None when there is nothing to read)."""
        self.reading += [FileRead(Path(path), clean_name(Path(path).name)) for path in paths]
        self._show_files()
        if self.reading and (self.read_task is None or self.read_task.done()):
            self.refused = []
            self.read_task = asyncio.ensure_future(self._read_files())
        return self.read_task

    async def _read_files(self) -> None:
        loop = asyncio.get_running_loop()
        while self.reading:
            file = self.reading[0]
            room = self.budget() - sum(len(wrap(a)) for a in self.attachments)
            try:
                result = await loop.run_in_executor(
                    None, read_attachment, file.path, room, file.worker.run
                )
            except AttachmentError as error:
                result = str(error)
            except Exception as error:  # never leave a chip reading, nor Send waiting
                result = f"{file.name} could not be read ({type(error).__name__}: {error})."
            if not shiboken6.isValid(self):  # the window closed while the file was read
                return
            if not isinstance(result, str):  # its tokens, while it still reads: Send waits
                service = self.controller.models.service if self.controller else None
                counted = await loop.run_in_executor(None, count_tokens, service, wrap(result))
                if not shiboken6.isValid(self):
                    return
            if not self.reading or self.reading[0] is not file:  # discarded meanwhile
                continue
            del self.reading[0]
            if isinstance(result, str):
                self.refused.append(result)
            else:
                self.attachments.append(result)
                self.tokens[id(result)] = counted
            self._show_files()
        if self.send_when_read and not self.refused:
            self.send_when_read = False
            self.readyToSend.emit()
        self.send_when_read = False

    def wait_to_send(self) -> None:
        """Send was pressed while files are read: send once they are in."""
        self.send_when_read = True

    def wait_for_model(self, what: str) -> None:
        """Send was pressed while a model loads: the message waits in the box (and can still
        be changed) and goes once the model has loaded (``MainWindow.model_ready``)."""
        self.send_when_loaded = True
        self.say(f"Sends when {what} has loaded; keep typing if you like.")

    def say(self, text: str) -> None:
        """A line under the box about Send ("" takes it away)."""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _show_files(self) -> None:
        self.tokens = {id(a): self.tokens[id(a)] for a in self.attachments if id(a) in self.tokens}
        self.chips.show_files([*self.attachments, *self.reading], self.tokens)
        self.notice.setText("\n".join(self.refused))
        self.notice.setVisible(bool(self.refused))
        counts = list(self.tokens.values())
        pending = TokenCount(sum(c.tokens for c in counts), all(c.counted for c in counts))
        pace = self.controller.reading_pace() if self.controller and counts else None
        self.cost.setText(reading_time(pending, pace) if counts else "")
        self.cost.setVisible(bool(counts))
        self.pendingChanged.emit(pending.tokens)

    def remove_file(self, index: int) -> None:
        if index < len(self.attachments):
            del self.attachments[index]
        else:  # still being read: stopped, and what it read is dropped
            self.reading.pop(index - len(self.attachments)).worker.cancel()
        self.refused = []
        self._show_files()

    def dragEnterEvent(self, event):  # noqa: N802 (Qt's name)
        if local_files(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event):  # noqa: N802
        self.attach_files(local_files(event.mimeData()))
        event.acceptProposedAction()

    def budget(self) -> int:
        """Characters of files the next message can hold."""
        if self.controller is None:
            return MAX_CHARS_UNKNOWN_WINDOW
        return budget_chars(context_use(self.controller))

    # the message --------------------------------------------------------------------------
    def message(self, text: str) -> str:
        """What Send sends: the attached files' text, then ``text``."""
        return compose(text, self.attachments)

    def set_message(self, content: str) -> None:
        """Put a stored message back (Edit): its files as chips, its words in the box."""
        text, self.attachments = split_message(content)
        self.tokens = {id(a): count_tokens(None, wrap(a)) for a in self.attachments}
        self._drop_reads()
        self.input.setPlainText(text)

    def clear(self) -> None:
        """After sending: an empty box and no files."""
        self.input.clear()
        self.attachments = []
        self.say("")
        self._drop_reads()

    def _drop_reads(self) -> None:
        """Files still being read are stopped and discarded, and so is a Send waiting for them."""
        for file in self.reading:
            file.worker.cancel()
        self.reading, self.refused, self.send_when_read = [], [], False
        self._show_files()


class EditBar(QFrame):
    """Shown above the composer while an earlier question is being edited."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("editBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 4, 12, 0)
        label = QLabel(
            "Editing an earlier question: Send starts a new branch from it "
            "(the earlier version stays, ← → switch)."
        )
        label.setWordWrap(True)
        row.addWidget(label, 1)
        self.cancel_button = QPushButton("Cancel edit")
        row.addWidget(self.cancel_button)
        self.hide()


class Banner(QFrame):
    """A dismissable line above the transcript for errors and notices.

    A failure of the engine (a model that did not load, a server that refused the key, an
    answer that failed) is marked with ``engine_failed``; ``engine_works`` (a load or an
    answer that succeeded) takes such a message away, since it no longer holds. Other
    notices stay until dismissed."""

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
        self.engine_failures: set[str] = set()
        self.hide()

    def show_message(self, text: str) -> None:
        self.messages.append(text)
        self.label.setText(text)
        self.show()

    def resolve(self, text: str) -> None:
        """``text`` no longer holds (the message it was about was sent after all): it goes,
        and an earlier message still shown under it comes back."""
        self.messages = [m for m in self.messages if m != text]
        if self.label.text() == text:
            if self.messages and self.isVisible():
                self.label.setText(self.messages[-1])
            else:
                self.hide()

    def engine_failed(self, text: str) -> None:
        """``text`` (shown now or about to be) tells of an engine failure."""
        if text:
            self.engine_failures.add(text)

    def engine_works(self) -> None:
        """The engine loaded or answered: a failure it reported earlier is gone."""
        if self.label.text() in self.engine_failures:
            self.hide()
        self.engine_failures.clear()


def ask_to_delete(parent, title: str, question: str) -> bool:
    """Ask ``question`` with Delete and Cancel (the default); True when Delete was pressed."""
    box = QMessageBox(QMessageBox.Warning, title, question, QMessageBox.Cancel, parent)
    box.setObjectName("confirmDelete")
    delete = box.addButton("Delete", QMessageBox.DestructiveRole)
    box.setDefaultButton(QMessageBox.Cancel)
    box.exec()
    return box.clickedButton() is delete
