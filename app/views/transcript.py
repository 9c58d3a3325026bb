"""The conversation: one ``MessageView`` per message in a scrolling column.

Each view renders its message as Markdown with the accepted-draft characters painted
(see render.py); the answer being written is re-rendered at most every ``REFRESH_MS``,
so a fast engine cannot flood the GUI. Hovering a character shows which tokens made it.

A long chat costs what is near the reader, not what it holds. Each message has a ``Slot`` in
the column: a cheap box that holds the message's card (a ``MessageView``) only while it is
within ``BUILD_SCREENS`` of the view. A card is built, rendered, highlighted and its code
coloured when it comes that near, and released again when it is more than
``RELEASE_SCREENS`` away; its box keeps the card's last height (or, for one never built, an
estimate from the text), so the scroll bar and the reading position stay put. Older
messages get their boxes in batches, only while the reader is within ``AHEAD_SCREENS`` of
the top. Opening a chat of thousands of messages, scrolling it and zooming it touch only a
few screens of cards, in steps of ``STEP_S`` of work per event-loop turn.
"""

from __future__ import annotations

import gc
import time
import weakref
from bisect import bisect_left, bisect_right

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QDesktopServices, QFont, QGuiApplication, QTextOption
from PySide6.QtWidgets import (
    QBoxLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
    QApplication,
)

from . import theme
from .chat_widgets import FileChips
from .code_blocks import COPY_SCHEME
from ..presenters.continuable import INTERRUPTED, can_go_on, continue_tip
from ..storage.downloads import DownloadMeter, duration_text
from .flow_layout import FlowLayout
from ..presenters.livestats import EDITED, footer_details, footer_text
from ..storage.provenance import Provenance
from .render import RenderMap, render
from ..storage.settings import VARIED_TEMPERATURE
from .thinking import ThinkingPanel, split
from .zoom import caption_font

REFRESH_MS = 80
REPEATS_HINT = (
    f"At temperature 0 the model writes the same answer again. Regenerate with "
    f"temperature {VARIED_TEMPERATURE:g} writes one that can differ (the Temperature "
    "setting stays as it is)."
)
READABLE_WIDTH = 820  # the transcript column's widest, so lines stay readable on wide screens
ZOOM_STEPS = (0.67, 0.8, 0.9, 1.0, 1.15, 1.3, 1.5, 1.75, 2.0)
# GUI-thread time per step of building or re-rendering a long chat. Qt's event loop (glib)
# runs two such steps back to back before a timer's turn (measured), and each card built
# leaves Qt ~2-4 ms of showing, laying out and painting it in the same turn: two 8 ms steps
# and what follows them stay within 50 ms; 15 ms steps made 55-60 ms turns while scrolling.
STEP_S = 0.008
AHEAD_SCREENS = 2  # older messages get their boxes while the reader is this near the top
BUILD_SCREENS = 1  # cards are built this many screens above and below the view...
RELEASE_SCREENS = 4  # ...and released beyond this many (a margin, so scrolling back is free)
RELEASES = 4  # cards released per step at most: a fling leaves dozens behind at once
BATCH = 40  # older messages boxed per step: at the estimated ~150 px each, several screens
CARD_SPACING = 10  # pixels between cards
SHOWN_ABOVE_PX = 60  # a card scrolled to (a match) keeps this much of what is above it
QWIDGETSIZE_MAX = 16777215  # Qt's "no maximum" for a widget's size
ALL_FONT_PROPERTIES = 0x3FFFF  # QFont::AllPropertiesResolved (PySide6 does not export it)
# A never-built card's estimated height: its frame, header and footer, and a line per
# wrapped line of text (measured at 100% zoom: 14-19 px a line, ~90 characters wide).
CARD_PX, LINE_PX, LINE_CHARS = 60, 18, 90
# A stored message longer than this shows its beginning and says so (Copy takes all of it):
# rendering and highlighting cost ~7 us a character here (a 1 MB message took 11 s to open,
# a chat of 50 MB messages never opened), so a card this long takes ~0.7 s. It is about
# 31,000 tokens at 3.2 characters a token, nearly the longest answer Max tokens allows.
SHOWN_CHARS = 100_000


def shown_part(text: str) -> tuple[str, bool]:
    """What a stored message's card shows of ``text``, and whether that is only its start."""
    if len(text) <= SHOWN_CHARS:
        return text, False
    note = (
        f"\n\n*… {len(text):,} characters in all: the first {SHOWN_CHARS:,} are shown. "
        "Copy copies all of it.*"
    )
    return text[:SHOWN_CHARS] + note, True


class MessageBody(QTextBrowser):
    """A read-only rich text view as tall as its content; tooltips show token provenance."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)  # links are handled in _link: web links open, Copy copies
        self.anchorClicked.connect(self._link)
        self.setFrameShape(QFrame.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setWordWrapMode(QTextOption.WrapAtWordBoundaryOrAnywhere)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.provenance: Provenance | None = None
        self.render_map = RenderMap()
        self.viewport().setMouseTracking(True)

    codeCopyRequested = Signal(str)

    def _link(self, url) -> None:
        if url.scheme() == COPY_SCHEME:
            index = int(url.path()) if url.path().isdigit() else -1
            if 0 <= index < len(self.render_map.code):
                self.codeCopyRequested.emit(self.render_map.code[index])
        else:
            QDesktopServices.openUrl(url)

    def _fit(self, *_):
        height = int(self.document().size().height()) + 4
        if self.height() != height:
            self.setFixedHeight(height)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self._fit()

    def source_index_at(self, point: QPoint) -> int | None:
        layout = self.document().documentLayout()
        position = layout.hitTest(
            point + QPoint(self.horizontalScrollBar().value(), self.verticalScrollBar().value()),
            Qt.ExactHit,
        )
        if position < 0:
            return None
        return self.render_map.source_index(position)

    def tooltip_at(self, point: QPoint) -> str:
        index = self.source_index_at(point)
        if index is None or self.provenance is None:
            return ""
        return self.provenance.tooltip(index)

    def viewportEvent(self, event):
        if event.type() == QEvent.ToolTip:
            text = self.tooltip_at(event.pos())
            if text:
                QToolTip.showText(event.globalPos(), text, self)
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)

    def wheelEvent(self, event):  # let the transcript scroll
        event.ignore()


class MessageView(QFrame):
    copyRequested = Signal(str)
    inspectRequested = Signal(object)  # MessageView
    regenerateRequested = Signal()
    variedRequested = Signal()  # regenerate once at VARIED_TEMPERATURE
    continueRequested = Signal()  # go on with an answer cut at its token limit or stopped
    versionRequested = Signal(int, int)  # message id, -1 previous / +1 next
    editRequested = Signal(int, str)  # message id, its text
    menuRequested = Signal(object, object)  # MessageView; QPoint on its text, None: the ⋯

    def __init__(self, role: str, parent=None):
        super().__init__(parent)
        self.role = role
        self.setObjectName("assistantMessage" if role == "assistant" else "userMessage")
        self.setProperty("role", role)
        self.text = ""
        self.provenance: Provenance | None = None
        self.stats: dict = {}
        self.timing: dict = {}
        self.finish_reason: str | None = None
        self.message_id: int | None = None
        self.streaming = False
        self.markdown = True
        self.highlight = True
        self.reading: tuple[int, int] | None = None  # prompt tokens read, of total
        self.reading_left: float | None = None  # seconds the rest of the prompt will take
        self.overlay: Provenance | None = None  # a replay's highlights instead of the real run's
        self.overlay_stats: dict | None = None  # that replay's figures, for the footer
        self.overlay_label = ""
        self._dirty = False
        self.editing = None  # the app.views.inline_editor.InlineEditor that stands in for the text

        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(4)
        header = QHBoxLayout()
        header.setSpacing(4)
        self.who = QLabel("You" if role == "user" else "Draftless")
        self.who.setObjectName("messageAuthor")
        self.who.setSizePolicy(
            QSizePolicy.Ignored, QSizePolicy.Preferred
        )  # never widens the column
        self.who.setMinimumWidth(60)
        header.addWidget(self.who, 1)
        # the buttons sit under the text, where a long answer's reader ends up, and wrap to a
        # second row in a narrow chat
        self.actions = QWidget(self)
        actions = FlowLayout(self.actions)
        self.previous_button = self._tool("←", "Previous version")
        self.previous_button.clicked.connect(lambda: self._step(-1))
        self.version_label = QLabel()
        self.version_label.setObjectName("versionLabel")
        self.next_button = self._tool("→", "Next version")
        self.next_button.clicked.connect(lambda: self._step(1))
        for widget in (self.previous_button, self.version_label, self.next_button):
            actions.addWidget(widget)
        self.set_versions([])
        self.edit_button = self._tool(
            "Edit", "Edit this question and send it again (the chat branches; this version stays)"
        )
        self.edit_button.clicked.connect(
            lambda: (
                self.message_id is not None and self.editRequested.emit(self.message_id, self.text)
            )
        )
        self.edit_button.setVisible(role == "user")
        actions.addWidget(self.edit_button)
        self.copy_button = self._tool("Copy", "Copy this message as Markdown")
        self.copy_button.clicked.connect(lambda: self.copyRequested.emit(self.text))
        actions.addWidget(self.copy_button)
        self.inspect_button = self._tool(
            "Inspect", "Show this answer's acceptance by draft position and accepted lengths"
        )
        self.inspect_button.clicked.connect(lambda: self.inspectRequested.emit(self))
        self.regenerate_button = self._tool("Regenerate", "Write this answer again")
        self.regenerate_button.clicked.connect(self.regenerateRequested.emit)
        self.continue_button = self._tool("Continue", continue_tip("length"))
        self.continue_button.clicked.connect(self.continueRequested.emit)
        actions.addWidget(self.inspect_button)
        actions.addWidget(self.continue_button)
        actions.addWidget(self.regenerate_button)
        self.more_button = self._tool("⋯", "More: edit, delete, fork the chat from here")
        self.more_button.setAccessibleName("More actions")
        self.more_button.clicked.connect(lambda: self.menuRequested.emit(self, None))
        actions.addWidget(self.more_button)  # the entries: app.views.message_actions
        self.inspect_button.setVisible(role == "assistant")
        self.regenerate_button.setVisible(False)
        self.continue_button.setVisible(False)
        layout.addLayout(header)
        self.files = FileChips(removable=False, parent=self)  # a question's attached files
        layout.addWidget(self.files)
        # a reasoning model's <think>; the panel makes its text view through a weak reference
        # to this card: a bound method would tie the card and its widgets into a reference
        # cycle, freed only by Python's cycle collector (measured: a fling through a long chat
        # left it 80,000 objects at once, tokens included, 75-260 ms in one event-loop turn)
        card = weakref.ref(self)
        self.thinking = ThinkingPanel(lambda: card()._thinking_body(), self)
        layout.addWidget(self.thinking)
        self.body = MessageBody(self)
        self.body.setAccessibleName("Your message" if role == "user" else "Answer")
        self.body.codeCopyRequested.connect(self.copyRequested)
        self.body.setContextMenuPolicy(Qt.CustomContextMenu)  # the text's menu gains the ⋯'s
        self.body.customContextMenuRequested.connect(lambda at: self.menuRequested.emit(self, at))
        layout.addWidget(self.body)
        self.footer = QLabel()
        self.footer.setObjectName("messageFooter")
        self.footer.setWordWrap(True)
        self.footer.setVisible(False)
        layout.addWidget(self.footer)
        layout.addWidget(self.actions)
        self.vary_row = QWidget(self)  # under the last answer at temperature 0
        self.vary_layout = row = QBoxLayout(QBoxLayout.LeftToRight, self.vary_row)
        row.setContentsMargins(0, 0, 0, 0)
        self.vary_hint = hint = QLabel("Temperature 0 writes this same answer again.")
        hint.setObjectName("hint")
        hint.setWordWrap(True)
        row.addWidget(hint, 1)
        self.vary_button = self._tool(
            f"Regenerate with temperature {VARIED_TEMPERATURE:g}", REPEATS_HINT
        )
        self.vary_button.clicked.connect(self.variedRequested.emit)
        row.addWidget(self.vary_button, 0, Qt.AlignRight)
        self.vary_row.setVisible(False)
        layout.addWidget(self.vary_row)
        self._fit_small_print()

    def changeEvent(self, event):
        super().changeEvent(event)
        if event.type() == QEvent.FontChange and hasattr(self, "vary_hint"):
            self._fit_small_print()

    def _fit_small_print(self) -> None:
        """The footer and the hint as small print of the card's text, at every zoom."""
        for label in (self.footer, self.vary_hint):
            label.setFont(caption_font(label.font(), self.font()))

    def resizeEvent(self, event):
        super().resizeEvent(event)
        side_by_side = (
            self.vary_hint.sizeHint().width() // 2 + self.vary_button.sizeHint().width() + 8
            <= self.vary_row.width()
        )
        self.vary_layout.setDirection(
            QBoxLayout.LeftToRight if side_by_side else QBoxLayout.TopToBottom
        )

    def _thinking_body(self) -> MessageBody:
        body = MessageBody(self)
        body.setAccessibleName("Thinking")
        body.codeCopyRequested.connect(self.copyRequested)
        return body

    def _tool(self, text: str, tip: str) -> QToolButton:
        button = QToolButton(self)
        button.setText(text)
        button.setToolTip(tip)
        button.setAutoRaise(True)
        button.setCursor(Qt.PointingHandCursor)
        return button

    def set_versions(self, versions: list[int]) -> None:
        """Show '← 2/3 →' when this message has other versions."""
        self.versions = list(versions)
        several = len(self.versions) > 1 and self.message_id in self.versions
        for widget in (self.previous_button, self.version_label, self.next_button):
            widget.setVisible(several)
        if several:
            index = self.versions.index(self.message_id)
            self.version_label.setText(f"{index + 1}/{len(self.versions)}")
            self.previous_button.setEnabled(index > 0)
            self.next_button.setEnabled(index < len(self.versions) - 1)

    def _step(self, step: int) -> None:
        if self.message_id is not None:
            self.versionRequested.emit(self.message_id, step)

    # content ------------------------------------------------------------------------------
    def set_message(self, message) -> None:
        """Show a stored message (``app.storage.store.Message``)."""
        self.text = message.content
        self.provenance = message.provenance
        self.stats, self.timing = dict(message.stats or {}), dict(message.timing or {})
        self.finish_reason = message.finish_reason
        self.message_id = message.id
        self.streaming = False
        self.inspect_button.setVisible(self.role == "assistant" and self.finish_reason != EDITED)
        self.refresh()
        self.set_versions(list(message.versions))

    def set_streaming(self, provenance: Provenance) -> None:
        self.provenance = provenance
        self.streaming = True
        self.text = provenance.text
        self._dirty = True
        self.refresh()

    def mark_dirty(self) -> None:
        self._dirty = True

    def refresh_if_dirty(self) -> bool:
        if self._dirty:
            self.refresh()
            return True
        return False

    def refresh(self) -> None:
        if self.editing is not None:  # the editor stays alone; refreshed when it closes
            self._dirty = True
            return
        self._dirty = False
        if self.provenance is not None and self.streaming:
            self.text = self.provenance.text
        shown = self.overlay or self.provenance
        self.body.provenance = shown
        text = self.text if self.text or not self.streaming else self._waiting_text()
        if self.role == "user":  # attached files show as chips, not as their text
            text = self.files.show_message(text)
        if not self.streaming:
            text, cut = shown_part(text)
            if cut:  # no highlights: the note is not the answer's text
                shown = None
        palette = theme.current().palette()
        parts = split(
            text if self.role == "assistant" and self.text else "",
            self.provenance is not None and self.provenance.opened_thinking,
        )
        look = dict(markdown=self.markdown, highlight=self.highlight, palette=palette)
        font = self.body.document().defaultFont()
        self.thinking.show_parts(parts, shown, writing=self.streaming, font=font, **look)
        if parts.thinking is not None:
            text, origin = parts.answer_text, parts.answer_origin
        else:
            origin = None
        self.body.setVisible(bool(text.strip()) or parts.thinking is None)
        self.body.render_map = render(self.body.document(), text, shown, origin=origin, **look)
        self.body._fit()
        self._update_footer()

    def _waiting_text(self) -> str:
        if self.reading is None:
            return "…"
        done, total = self.reading
        if done >= total:
            return f"*Prompt read ({total:,} tokens); answering…*"
        left = (
            f" · about {duration_text(self.reading_left)} left"
            if self.reading_left is not None
            else ""
        )
        return f"*Reading the prompt… {done * 100 // max(total, 1)}% of {total:,} tokens{left}*"

    def _update_footer(self) -> None:
        if self.role != "assistant" or self.streaming:
            self.footer.setVisible(False)
            return
        tokens = len(self.provenance.tokens) if self.provenance else 0
        if self.overlay is not None and self.overlay_stats:
            # a replay has no timing of its own: its passes, drafts and estimate only
            figures, replay = (tokens, self.overlay_stats, {}), f"Replay {self.overlay_label}: "
        else:
            figures, replay = (tokens, self.stats, self.timing, self.finish_reason), ""
        self.footer.setText(replay + footer_text(*figures))
        self.footer.setToolTip(replay + footer_details(*figures))
        self.footer.setVisible(True)

    def show_overlay(
        self, provenance: Provenance | None, label: str = "", stats: dict | None = None
    ) -> None:
        """Paint another run's accepted drafts (a replay) and give its figures (``stats``,
        the engine's ``DecodeStats.to_dict()``) in the footer; None: back to this answer's own."""
        self.overlay = provenance
        self.overlay_stats = stats if provenance is not None else None
        self.overlay_label = label if provenance is not None else ""
        self.who.setText(f"Draftless · replay {label}" if provenance else "Draftless")
        self.who.setToolTip(self.who.text())
        self.refresh()

    def set_highlight(self, on: bool) -> None:
        if on != self.highlight:
            self.highlight = on
            self.refresh()

    def set_markdown(self, on: bool) -> None:
        if on != self.markdown:
            self.markdown = on
            self.refresh()


class Slot(QWidget):
    """A message's place in the column: its card while the reader is near, else an empty box
    as tall as the card was (or is estimated to be)."""

    def __init__(self, message, parent=None):
        super().__init__(parent)
        self.message = message  # an ``app.storage.store.Message``; None: the answer being written
        self.view: MessageView | None = None
        # the column's width decides the card's, never the other way round: a card laid out
        # wider once (its buttons in one row) would otherwise keep the column that wide
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)

    @property
    def role(self) -> str:
        return self.view.role if self.view is not None else self.message.role

    @property
    def message_id(self) -> int | None:
        return self.message.id if self.message is not None else self.view.message_id

    def hold(self, view: MessageView) -> None:
        self.view = view
        self.setMinimumHeight(0)
        self.setMaximumHeight(QWIDGETSIZE_MAX)
        self.layout().addWidget(view)

    def release(self) -> None:
        """Drop the card, keeping its height, and the highlights read for it."""
        self.message.drop_read_provenance()
        height = self.height()
        view, self.view = self.view, None
        self.layout().removeWidget(view)
        view.hide()
        view.deleteLater()
        self.setFixedHeight(height)

    def estimate(self, zoom: float) -> None:
        """The height of a card never built, from its text."""
        text, _ = shown_part(self.message.content)
        lines = text.count("\n") + len(text) // LINE_CHARS + 1
        self.setFixedHeight(int((CARD_PX + LINE_PX * lines) * zoom))


class Page(QWidget):
    """A batch of slots. A card that changes height moves the slots of its page and the pages
    below it, not every slot of the chat (measured: one relayout of 5,000 slots in one
    column took 22 ms)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(CARD_SPACING)
        # A font of its own stops the column's font (the zoom) here: a new text size reaches
        # the built cards (the transcript gives it to each), not thousands of empty boxes
        # (measured: zooming with 5,000 boxes blocked the window 0.9 s).
        font = QFont(self.font())
        font.setResolveMask(ALL_FONT_PROPERTIES)
        self.setFont(font)


class TranscriptView(QScrollArea):
    """The messages of one session, newest at the bottom, following the answer as it grows."""

    copyRequested = Signal(str)
    inspectRequested = Signal(object)
    continueRequested = Signal()
    regenerateRequested = Signal()
    variedRequested = Signal()
    versionRequested = Signal(int, int)
    editRequested = Signal(int, str)
    menuRequested = Signal(object, object)
    offerTaken = Signal(str)  # a link of the empty chat's offer (a model to download)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.offer = ""  # under the empty chat's welcome: a real model to get (HTML)
        self.setObjectName("transcript")
        self.setAccessibleName("Conversation")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.NoFrame)
        self.column = QWidget()
        self.column.setObjectName("transcriptColumn")
        self.layout_ = QVBoxLayout(self.column)
        self.layout_.setContentsMargins(16, 12, 16, 12)
        self.layout_.setSpacing(CARD_SPACING)
        self.placeholder = QLabel()
        self.placeholder.setObjectName("placeholder")
        self._placeholder_text()
        self.placeholder.setAlignment(Qt.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setTextInteractionFlags(Qt.TextBrowserInteraction)
        self.placeholder.linkActivated.connect(self.offerTaken)
        self.layout_.addWidget(self.placeholder, 1)
        self.layout_.addStretch(0)
        self.setWidget(self.column)
        self._slots: list[Slot] = []  # every message given a place, in chat order
        self._pages: list[Page] = []  # the slots' pages, in chat order
        # the slots holding a card: the few a step looks through for far ones to release
        # (walking all 5,000 slots of a long chat took 1-5 ms a step)
        self._built: dict[Slot, None] = {}
        self._pending: list = []  # older messages still to build
        self._stale: list[MessageView] = []  # built cards still to re-render (zoom, theme)
        # the box at the top of the view and how far into it the reader is: kept in place
        # while boxes and cards above it come, go and change height
        self._anchor: tuple[Slot, int] | None = None
        self._release_left = False  # far cards wait to be released in a later step
        self._restoring = False  # the scroll bar is being moved back to the anchor
        self._step_queued = False
        self.busy = False
        self.highlight = True
        self.markdown = True
        self.repeats = False  # Regenerate would write the same answer (temperature 0)
        self.streaming_view: MessageView | None = None
        self.read_meter = DownloadMeter()
        self._follow = True
        self.verticalScrollBar().rangeChanged.connect(self._range_changed)
        self.verticalScrollBar().valueChanged.connect(self._scrolled)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self._refresh_streaming)
        self.latest_button = QPushButton("↓ Latest", self)  # floats over the bottom right
        self.latest_button.setObjectName("latestButton")
        self.latest_button.setToolTip("Jump to the latest message")
        self.latest_button.setCursor(Qt.PointingHandCursor)
        self.latest_button.clicked.connect(self.scroll_to_latest)
        self.latest_button.hide()
        self.setMinimumWidth(320)
        self.zoom_index = ZOOM_STEPS.index(1.0)
        self.base_point_size = self.column.font().pointSizeF()

    def zoom(self, step: int) -> float:
        """Text size: +1 bigger, -1 smaller, 0 back to normal. Returns the factor."""
        return self.set_zoom(
            1.0
            if step == 0
            else ZOOM_STEPS[min(max(self.zoom_index + step, 0), len(ZOOM_STEPS) - 1)]
        )

    def set_zoom(self, factor: float) -> float:
        """Text size: the step nearest ``factor``. Returns that step."""
        before = ZOOM_STEPS[self.zoom_index]
        self.zoom_index = min(range(len(ZOOM_STEPS)), key=lambda i: abs(ZOOM_STEPS[i] - factor))
        font = self.column.font()
        font.setPointSizeF(self.base_point_size * ZOOM_STEPS[self.zoom_index])
        self.column.setFont(font)
        self.placeholder.setFont(font)  # styled by the sheet, it keeps a font of its own
        for slot in self._slots:  # boxes without a card: their height at the new size
            if slot.view is None:
                slot.setFixedHeight(int(slot.height() * ZOOM_STEPS[self.zoom_index] / before))
        self._refresh_all()  # each view takes the column's font as it is re-rendered
        return ZOOM_STEPS[self.zoom_index]

    def resizeEvent(self, event):
        super().resizeEvent(event)
        side = max(16, (self.viewport().width() - READABLE_WIDTH + 1) // 2)
        self.layout_.setContentsMargins(side, 12, side, 12)
        self._place_latest()

    def _place_latest(self) -> None:
        button = self.latest_button
        button.adjustSize()
        area = self.viewport().geometry()
        button.move(area.right() - button.width() - 16, area.bottom() - button.height() - 12)
        button.raise_()

    def show_card(self, view: MessageView, offset: int = 0) -> None:
        """Scroll ``view`` into sight, ``offset`` pixels into it near the top of the view (a
        match found in it), and stay there while answers arrive."""
        slot = self._slot_of(view)
        if slot is None:
            return
        for _ in range(3):  # the card's page and the column lay out in turn
            QApplication.sendPostedEvents(None, QEvent.LayoutRequest)
        self._follow = False
        bar = self.verticalScrollBar()
        bar.setValue(max(self._top(slot) + offset - SHOWN_ABOVE_PX, 0))
        self.latest_button.setVisible(bar.value() < bar.maximum() - 24)
        self._place_latest()

    def scroll_to_latest(self) -> None:
        self._follow = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())
        self.latest_button.hide()

    # building -----------------------------------------------------------------------------
    @property
    def _views(self) -> list[MessageView]:
        """The cards built now, in chat order."""
        return [slot.view for slot in self._slots if slot.view is not None]

    @property
    def views(self) -> list[MessageView]:
        """Every message's card, in order: builds all of them (for a short chat, or a test)."""
        self.finish_loading()
        return self._views

    @property
    def loaded(self) -> bool:
        """Every message has its card, rendered as the current settings say."""
        return not self._pending and not self._stale and all(s.view for s in self._slots)

    def finish_loading(self) -> None:
        while not self.loaded:
            self._step(float("inf"))

    def clear(self) -> None:
        for page in self._pages:
            page.setParent(None)
            page.deleteLater()
        self._slots = []
        self._pages = []
        self._built = {}
        self._pending = []
        self._stale = []
        self.streaming_view = None
        self.timer.stop()
        self.placeholder.setVisible(True)
        self._follow = True
        self._anchor = None
        self.latest_button.hide()

    def set_messages(self, messages: list) -> None:
        """Show a chat (``app.storage.store.Message`` items): the newest messages now, the older ones
        as the reader comes near them."""
        self.clear()
        self._pending = list(messages)
        self._step(STEP_S)
        self._update_regenerate()
        QTimer.singleShot(0, freeze_long_lived)  # a turn of its own, after the first screen

    def add_message(self, message) -> MessageView:
        view = self._fill(self._new_slot(message))
        self._update_regenerate()
        return view

    def _box_older(self) -> None:
        """Boxes for the next older messages, placed above the others; cards come later."""
        zoom = ZOOM_STEPS[self.zoom_index]
        page = self._new_page(older=True)
        for message in reversed(self._pending[-BATCH:]):
            self._new_slot(message, page).estimate(zoom)
        del self._pending[-BATCH:]

    def _step(self, budget: float) -> None:
        """Re-render stale cards, build the cards near the view (nearest first) and box older
        messages, one piece after another (at least one) while the next, expected to cost what
        the last did, still ends within ``budget`` seconds; then release the cards far from
        the view. The rest waits for a later event-loop turn."""
        started = finished = time.perf_counter()
        everything = budget == float("inf")
        wanted = [s for s in self._slots if s.view is None] if everything else self._wanted()
        built = []
        while True:
            if self._stale:  # built cards first: the reader may be looking at them
                self._rerender(self._stale.pop(0))
            elif wanted:
                slot = wanted.pop(0)
                built.append(slot)
                self._fill(slot)
            elif self._pending and (everything or self._near_top()):
                self._box_older()
                if everything:
                    wanted = [s for s in self._slots if s.view is None]
                else:
                    break  # their places are known after the next layout
            else:
                break
            now = time.perf_counter()
            piece_s, finished = now - finished, now
            if now - started + piece_s > budget:
                break
        if not everything:
            self._release_far(built)
        if any(slot in self._slots[-2:] for slot in built):
            self._update_regenerate()
        self._queue_step()

    def _wanted(self) -> list[Slot]:
        """The boxes without a card within ``BUILD_SCREENS`` of the view, nearest first."""
        screen = max(self.viewport().height(), 1)
        if self._follow:  # at the bottom: count heights up from the end (no layout needed)
            found, height = [], 0
            for slot in reversed(self._slots):
                if height > screen * (1 + BUILD_SCREENS):
                    break
                height += slot.height() if slot.view is None else slot.sizeHint().height()
                if slot.view is None:
                    found.append(slot)
            return found
        top = self.verticalScrollBar().value()
        first, last = self._slots_between(
            top - BUILD_SCREENS * screen, top + (1 + BUILD_SCREENS) * screen
        )
        middle = top + screen // 2
        near = [s for s in self._slots[first:last] if s.view is None]
        return sorted(near, key=lambda s: abs(self._top(s) + s.height() // 2 - middle))

    def _slots_between(self, top: int, bottom: int) -> tuple[int, int]:
        """The range of slot indices whose boxes meet the column's band [top, bottom)."""
        first = bisect_right(self._slots, top, key=lambda s: self._top(s) + s.height())
        last = bisect_left(self._slots, bottom, lo=first, key=self._top)
        return first, last

    def _release_far(self, just_built: list[Slot]) -> None:
        """Drop up to ``RELEASES`` cards more than ``RELEASE_SCREENS`` from the view (their
        boxes stay; the rest go in later steps). The answer being written and a card showing
        a replay keep theirs."""
        screen = max(self.viewport().height(), 1)
        top = self.verticalScrollBar().value()
        near_top, near_bottom = top - RELEASE_SCREENS * screen, top + (1 + RELEASE_SCREENS) * screen
        released = 0
        self._release_left = False
        for slot in list(self._built):
            view = slot.view
            if released == RELEASES:
                self._release_left = True
                break
            if (
                near_top < self._top(slot) + slot.height()
                and self._top(slot) < near_bottom
                or slot in just_built
                or not view.isVisible()  # not laid out yet: its place is not known
                or view is self.streaming_view
                or view.overlay is not None
            ):
                continue
            if view in self._stale:
                self._stale.remove(view)
            slot.release()
            del self._built[slot]
            released += 1

    def _near_top(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() < AHEAD_SCREENS * max(self.viewport().height(), 1)

    def _queue_step(self) -> None:
        """Another step in a later turn, if there is work the reader may soon see."""
        if self._step_queued:
            return
        if (
            self._stale
            or self._release_left
            or (self._pending and self._near_top())
            or self._wanted()
        ):
            self._step_queued = True
            QTimer.singleShot(0, self, self._queued_step)  # dropped if the view is deleted first

    def _queued_step(self) -> None:
        self._step_queued = False
        self._release_left = False
        self._step(STEP_S)

    def _refresh_all(self) -> None:
        """Re-render every card: those in sight now, the others in later turns."""
        area = self.viewport().rect().translated(0, self.verticalScrollBar().value())
        built = [s for s in self._slots if s.view is not None]
        seen = [s.view for s in built if area.intersects(self._box(s))]
        seen = seen or [s.view for s in built[-3:]]
        for view in seen:
            self._rerender(view)
        others = [s.view for s in built if s.view not in seen]
        self._stale = list(reversed(others))  # nearest the end (usually the reader) first
        self._step(0)

    def _rerender(self, view: MessageView) -> None:
        font = self.column.font()
        if view.font() != font:
            view.setFont(font)
        document = view.body.document()
        if document.defaultFont() != font:
            document.setDefaultFont(font)
        view.refresh()

    @staticmethod
    def _top(slot: Slot) -> int:
        """Where ``slot`` begins in the column."""
        return slot.y() + slot.parentWidget().y()

    def _box(self, slot: Slot):
        """``slot``'s rectangle in the column."""
        return slot.geometry().translated(0, slot.parentWidget().y())

    def _new_page(self, older: bool = False) -> Page:
        page = Page(self.column)
        if older:
            self.layout_.insertWidget(1, page)  # below the (hidden) placeholder
            self._pages.insert(0, page)
        else:
            self.layout_.insertWidget(self.layout_.count() - 1, page)
            self._pages.append(page)
        return page

    def _new_slot(self, message, page: Page | None = None) -> Slot:
        """A slot at the end of the chat, or (``page``: an older page) at the top of it."""
        self.placeholder.setVisible(False)
        if page is not None:
            slot = Slot(message, page)
            page.layout().insertWidget(0, slot)
            self._slots.insert(0, slot)
            return slot
        if not self._pages or self._pages[-1].layout().count() >= BATCH:
            self._new_page()
        slot = Slot(message, self._pages[-1])
        self._pages[-1].layout().addWidget(slot)
        self._slots.append(slot)
        self._follow = True
        return slot

    def _fill(self, slot: Slot, role: str | None = None) -> MessageView:
        """Build ``slot``'s card (for the answer being written, as ``role``)."""
        view = MessageView(role or slot.role, slot)
        view.setFont(self.column.font())
        view.body.document().setDefaultFont(self.column.font())
        view.highlight = self.highlight
        view.markdown = self.markdown
        view.copyRequested.connect(self.copyRequested)
        view.inspectRequested.connect(self.inspectRequested)
        view.regenerateRequested.connect(self.regenerateRequested)
        view.variedRequested.connect(self.variedRequested)
        view.continueRequested.connect(self.continueRequested)
        view.versionRequested.connect(self.versionRequested)
        view.editRequested.connect(self.editRequested)
        view.menuRequested.connect(self.menuRequested)
        self._set_busy(view, self.busy)
        slot.hold(view)
        self._built[slot] = None
        if slot.message is not None:
            view.set_message(slot.message)
        return view

    def start_answer(self, provenance: Provenance) -> MessageView:
        self.timer.setInterval(REFRESH_MS)
        self.read_meter = DownloadMeter()  # how fast the prompt is read: the time left
        view = self._fill(self._new_slot(None), "assistant")
        view.set_streaming(provenance)
        self.streaming_view = view
        self._update_regenerate()
        self.timer.start()
        return view

    def reading_prompt(self, done: int, total: int, pace: float | None = None) -> None:
        """Show how far the engine has read the prompt while the answer has no text yet,
        and the time left: at the pace it reads this prompt, or before that is known, at
        ``pace`` (prompt tokens a second measured on earlier answers)."""
        view = self.streaming_view
        if view is not None:
            now = time.monotonic()
            self.read_meter.update(done, total, now)
            left = self.read_meter.seconds_left_at(now)
            if left is None and pace:
                left = (total - done) / pace
            view.reading, view.reading_left = (done, total), left
            if not view.text:
                view.refresh()

    def answer_changed(self) -> None:
        if self.streaming_view is not None:
            self.streaming_view.mark_dirty()

    def finish_answer(self, message) -> None:
        """The streamed answer is done: show it as stored (``message``), or drop its view
        when nothing of it was kept (None)."""
        view = self.streaming_view
        self.timer.stop()
        self.streaming_view = None
        if view is None:
            return
        if message is None:
            self.remove_view(view)
            return
        self._slot_of(view).message = message
        view.set_message(message)
        self._update_regenerate()

    def _slot_of(self, view: MessageView) -> Slot | None:
        return next((slot for slot in self._slots if slot.view is view), None)

    def remove_view(self, view: MessageView) -> None:
        self._remove(self._slot_of(view))

    def _remove(self, slot: Slot | None) -> None:
        if slot is not None:
            self._slots.remove(slot)
            self._built.pop(slot, None)
            if self._anchor is not None and self._anchor[0] is slot:
                self._anchor = None
            if slot.view in self._stale:
                self._stale.remove(slot.view)
            slot.setParent(None)
            slot.deleteLater()
        self.placeholder.setVisible(not self._slots and not self._pending)
        self._update_regenerate()

    def view_of(self, message_id: int) -> MessageView | None:
        """``message_id``'s card, built now if it was not (older messages get boxes down to
        it; their cards wait until the reader comes near)."""
        slot = next((s for s in self._slots if s.message_id == message_id), None)
        while slot is None and any(m.id == message_id for m in self._pending):
            self._box_older()
            slot = next((s for s in self._slots if s.message_id == message_id), None)
        if slot is None:
            return None
        if slot.view is None:
            self._fill(slot)
            self._update_regenerate()
        elif slot.view in self._stale:
            self._stale.remove(slot.view)
            self._rerender(slot.view)
        return slot.view

    def remove_message(self, message_id: int) -> None:
        """Take ``message_id`` out of the chat shown; a card not built is not built for it."""
        self._pending = [m for m in self._pending if m.id != message_id]
        self._remove(next((s for s in self._slots if s.message_id == message_id), None))

    def _update_regenerate(self) -> None:
        last = self._slots[-1] if self._slots else None
        for slot in self._slots[-2:]:  # the only ones that can have shown it
            view = slot.view
            if view is None:
                continue
            shown = slot is last and slot.role == "assistant" and self.streaming_view is None
            view.regenerate_button.setVisible(shown)
            view.regenerate_button.setText(
                "Retry" if view.finish_reason == INTERRUPTED else "Regenerate"
            )
            written = view.provenance is not None and bool(view.provenance.tokens)
            view.continue_button.setVisible(shown and can_go_on(view.finish_reason) and written)
            view.continue_button.setToolTip(continue_tip(view.finish_reason))
            view.regenerate_button.setToolTip(
                REPEATS_HINT if self.repeats else "Write this answer again"
            )
            if view.editing is not None:  # the editor stays alone; the row shows after it
                view.editing.show_after(view.vary_row, shown and self.repeats)
            else:
                view.vary_row.setVisible(shown and self.repeats)

    def set_repeats(self, repeats: bool) -> None:
        """At temperature 0 Regenerate writes the same answer: say so, offer another way."""
        self.repeats = repeats
        self._update_regenerate()

    def set_busy(self, busy: bool) -> None:
        self.busy = busy
        for view in self._views:
            self._set_busy(view, busy)

    @staticmethod
    def _set_busy(view: MessageView, busy: bool) -> None:
        for button in (
            view.regenerate_button,
            view.continue_button,
            view.vary_button,
            view.edit_button,
            view.previous_button,
            view.next_button,
        ):
            button.setEnabled(not busy)
        if not busy:
            view.set_versions(view.versions)

    def set_highlight(self, on: bool) -> None:
        if on != self.highlight:
            self.highlight = on
            for view in self._views:
                view.highlight = on
            self._refresh_all()

    def set_markdown(self, on: bool) -> None:
        if on != self.markdown:
            self.markdown = on
            for view in self._views:
                view.markdown = on
            self._refresh_all()

    def _placeholder_text(self) -> None:
        self.placeholder.setText(
            "<h2>Ask anything.</h2><p>Draftless guesses ahead with n-gram drafts and the model "
            "checks each guess in one pass.<br>Characters from guesses it accepted are "
            "<span style='background:%s; text-decoration: underline'>highlighted and "
            "underlined</span>; hover them to see the pass and the draft position.</p>"
            % theme.current().draft
            + self.offer
        )

    def set_offer(self, offer: str) -> None:
        """What the empty chat offers under its welcome (HTML; "" for nothing)."""
        if offer != self.offer:
            self.offer = offer
            self._placeholder_text()

    def restyle(self) -> None:
        self._placeholder_text()
        self._refresh_all()

    # following the answer -----------------------------------------------------------------
    def _refresh_streaming(self) -> None:
        """Re-render the growing answer; back off when rendering gets expensive, so the
        GUI thread never spends more than about a fifth of its time on it."""
        if self.streaming_view is not None:
            started = time.perf_counter()
            if self.streaming_view.refresh_if_dirty():
                cost_ms = (time.perf_counter() - started) * 1000
                self.timer.setInterval(int(max(REFRESH_MS, 4 * cost_ms)))

    def _scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._follow = value >= bar.maximum() - 24
        self.latest_button.setVisible(not self._follow)  # scrolled up: a way back down
        if not self._follow:
            self._place_latest()
        if not self._restoring:
            index = bisect_right(self._slots, value, key=lambda s: self._top(s) + s.height())
            anchor = self._slots[index] if index < len(self._slots) else None
            self._anchor = (anchor, value - self._top(anchor)) if anchor is not None else None
        self._queue_step()

    def _range_changed(self, _low: int, high: int) -> None:
        bar = self.verticalScrollBar()
        if self._follow:
            bar.setValue(high)
        elif self._anchor is not None and bar.value() > bar.minimum():
            # what the reader reads stays where it is; at the very top (the handle dragged
            # there) the reader wants the chat's start, which the older boxes come above
            slot, offset = self._anchor
            self._restoring = True
            bar.setValue(self._top(slot) + offset)
            self._restoring = False
        self._queue_step()


def copy_text(text: str) -> None:
    QGuiApplication.clipboard().setText(text)


def freeze_long_lived() -> None:
    """Collect the garbage there is and move every object alive now into Python's permanent
    generation (``gc.freeze``), which the cycle collector's full passes skip. A full pass
    walks every object it tracks: 96,000 with the app's modules imported (35-47 ms here) and
    60,000 more for a chat of 5,000 messages; one arriving while scrolling held the event
    loop 25-80 ms on top of the turn's work, and 2-6 ms once the open chat was frozen. The
    modules, the window and an open chat's messages live on; a frozen object that later ends
    in a reference cycle is not reclaimed (reference counting frees all else, as before).
    Nothing is unfrozen: that would make each opening walk every object (it doubled the time
    of the app's GUI tests)."""
    gc.collect()
    gc.freeze()
