"""The conversation: one ``MessageView`` per message in a scrolling column.

Each view renders its message as Markdown with the accepted-draft characters painted
(see render.py); the answer being written is re-rendered at most every ``REFRESH_MS``,
so a fast engine cannot flood the GUI. Hovering a character shows which tokens made it.

A long chat is built lazily: the newest messages at once, older ones above them, in steps
of ``STEP_S`` of work per event-loop turn, only while the reader is within a few screens of
the top of what is built. Opening a chat of hundreds of messages never freezes the window,
and the window's layout never grows with messages nobody has scrolled to. A new text size
or theme likewise re-renders the messages in view at once and the others in later turns.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication, QTextOption
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
)

from . import theme
from .chat_widgets import FileChips
from .code_blocks import COPY_SCHEME
from .continuable import can_go_on, continue_tip
from .flow_layout import FlowLayout
from .livestats import EDITED, footer_details, footer_text
from .provenance import Provenance
from .render import RenderMap, render
from .settings import VARIED_TEMPERATURE
from .thinking import ThinkingPanel, split

REFRESH_MS = 80
REPEATS_HINT = (
    f"At temperature 0 the model writes the same answer again. Regenerate with "
    f"temperature {VARIED_TEMPERATURE:g} writes one that can differ (the Temperature "
    "setting stays as it is)."
)
READABLE_WIDTH = 820  # the transcript column's widest, so lines stay readable on wide screens
ZOOM_STEPS = (0.8, 0.9, 1.0, 1.15, 1.3, 1.5, 1.75, 2.0)
STEP_S = 0.015  # GUI-thread time per step of building or re-rendering a long chat
AHEAD_SCREENS = 2  # older messages are built while the reader is this near the top


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
        self.overlay: Provenance | None = None  # a replay's highlights instead of the real run's
        self.overlay_stats: dict | None = None  # that replay's figures, for the footer
        self.overlay_label = ""
        self._dirty = False

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
        actions.addWidget(self.more_button)  # the entries: app.message_actions
        self.inspect_button.setVisible(role == "assistant")
        self.regenerate_button.setVisible(False)
        self.continue_button.setVisible(False)
        layout.addLayout(header)
        self.files = FileChips(removable=False, parent=self)  # a question's attached files
        layout.addWidget(self.files)
        self.thinking = ThinkingPanel(self._thinking_body, self)  # a reasoning model's <think>
        layout.addWidget(self.thinking)
        self.body = MessageBody(self)
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
        """Show a stored message (``app.store.Message``)."""
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
        self._dirty = False
        if self.provenance is not None and self.streaming:
            self.text = self.provenance.text
        shown = self.overlay or self.provenance
        self.body.provenance = shown
        text = self.text if self.text or not self.streaming else self._waiting_text()
        if self.role == "user":  # attached files show as chips, not as their text
            text = self.files.show_message(text)
        palette = theme.current().palette()
        parts = split(text if self.role == "assistant" and self.text else "")
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
        return f"*Reading the prompt… {done * 100 // max(total, 1)}% of {total:,} tokens*"

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

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.NoFrame)
        self.column = QWidget()
        self.column.setObjectName("transcriptColumn")
        self.layout_ = QVBoxLayout(self.column)
        self.layout_.setContentsMargins(16, 12, 16, 12)
        self.layout_.setSpacing(10)
        self.placeholder = QLabel()
        self.placeholder.setObjectName("placeholder")
        self._placeholder_text()
        self.placeholder.setAlignment(Qt.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.layout_.addWidget(self.placeholder, 1)
        self.layout_.addStretch(0)
        self.setWidget(self.column)
        self._views: list[MessageView] = []  # built, in chat order
        self._pending: list = []  # older messages still to build
        self._stale: list[MessageView] = []  # built views still to re-render (zoom, theme)
        self._step_queued = False
        self._from_bottom = 0  # where the reader is, kept while older messages arrive above
        self.busy = False
        self.highlight = True
        self.markdown = True
        self.repeats = False  # Regenerate would write the same answer (temperature 0)
        self.streaming_view: MessageView | None = None
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
        self.zoom_index = min(range(len(ZOOM_STEPS)), key=lambda i: abs(ZOOM_STEPS[i] - factor))
        font = self.column.font()
        font.setPointSizeF(self.base_point_size * ZOOM_STEPS[self.zoom_index])
        self.column.setFont(font)
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

    def scroll_to_latest(self) -> None:
        self._follow = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())
        self.latest_button.hide()

    # building -----------------------------------------------------------------------------
    @property
    def views(self) -> list[MessageView]:
        """Every message's view, in order (building and re-rendering what is still to do)."""
        self.finish_loading()
        return self._views

    @property
    def loaded(self) -> bool:
        """All messages are built and rendered as the current settings say."""
        return not self._pending and not self._stale

    def finish_loading(self) -> None:
        while not self.loaded:
            self._step(float("inf"))

    def clear(self) -> None:
        for view in self._views:
            view.setParent(None)
            view.deleteLater()
        self._views = []
        self._pending = []
        self._stale = []
        self.streaming_view = None
        self.timer.stop()
        self.placeholder.setVisible(True)
        self._follow = True
        self.latest_button.hide()

    def set_messages(self, messages: list) -> None:
        """Show a chat (``app.store.Message`` items): the newest messages now, the older ones
        above them in later event-loop turns."""
        self.clear()
        self._pending = list(messages)
        self._step(STEP_S)
        self._update_regenerate()

    def add_message(self, message) -> MessageView:
        view = self._new_view(message.role)
        view.set_message(message)
        self._update_regenerate()
        return view

    def _build(self, message) -> MessageView:
        """The view of an older message, placed above the ones built."""
        view = self._new_view(message.role, older=True)
        view.set_message(message)
        return view

    def _step(self, budget: float) -> None:
        """Build older messages, newest first, then re-render stale views, for about
        ``budget`` seconds (at least one); the rest waits for a later event-loop turn."""
        started = time.perf_counter()
        bar = self.verticalScrollBar()
        self._from_bottom = bar.maximum() - bar.value()
        build = self._near_top() or budget == float("inf")
        while self._stale or (build and self._pending):
            if self._stale:  # built views first: the reader may be looking at them
                self._rerender(self._stale.pop(0))
            else:
                self._build(self._pending.pop())
            if time.perf_counter() - started >= budget:
                break
        self._queue_step()

    def _near_top(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() < AHEAD_SCREENS * max(self.viewport().height(), 1)

    def _queue_step(self) -> None:
        """Another step in a later turn, if there is work the reader may soon see."""
        if (self._stale or (self._pending and self._near_top())) and not self._step_queued:
            self._step_queued = True
            QTimer.singleShot(0, self._build_older)

    def _build_older(self) -> None:
        self._step_queued = False
        if not self.loaded:
            self._step(STEP_S)

    def _refresh_all(self) -> None:
        """Re-render every view: those in sight now, the others in later turns."""
        area = self.viewport().rect().translated(0, self.verticalScrollBar().value())
        seen = [v for v in self._views if v.geometry().intersects(area)] or self._views[-3:]
        for view in seen:
            self._rerender(view)
        others = [v for v in self._views if v not in seen]
        self._stale = list(reversed(others))  # nearest the end (usually the reader) first
        self._step(0)

    def _rerender(self, view: MessageView) -> None:
        document = view.body.document()
        if document.defaultFont() != self.column.font():
            document.setDefaultFont(self.column.font())
        view.refresh()

    def _new_view(self, role: str, older: bool = False) -> MessageView:
        self.placeholder.setVisible(False)
        view = MessageView(role, self.column)
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
        if older:
            self.layout_.insertWidget(1, view)  # below the (hidden) placeholder
            self._views.insert(0, view)
            self._set_busy(view, self.busy)
        else:
            self.layout_.insertWidget(self.layout_.count() - 1, view)
            self._views.append(view)
            self._follow = True
        return view

    def start_answer(self, provenance: Provenance) -> MessageView:
        self.timer.setInterval(REFRESH_MS)
        view = self._new_view("assistant")
        view.set_streaming(provenance)
        self.streaming_view = view
        self._update_regenerate()
        self.timer.start()
        return view

    def reading_prompt(self, done: int, total: int) -> None:
        """Show how far the engine has read the prompt while the answer has no text yet."""
        view = self.streaming_view
        if view is not None:
            view.reading = (done, total)
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
        view.set_message(message)
        self._update_regenerate()

    def remove_view(self, view: MessageView) -> None:
        if view in self._views:
            self._views.remove(view)
            if view in self._stale:
                self._stale.remove(view)
            view.setParent(None)
            view.deleteLater()
        self.placeholder.setVisible(not self._views and not self._pending)
        self._update_regenerate()

    def view_of(self, message_id: int) -> MessageView | None:
        view = next((v for v in self._views if v.message_id == message_id), None)
        if view is None and any(m.id == message_id for m in self._pending):
            while view is None:  # build down to it (the ones above it can wait)
                view = self._build(self._pending.pop())
                view = view if view.message_id == message_id else None
        if view is not None and view in self._stale:
            self._stale.remove(view)
            self._rerender(view)
        return view

    def remove_message(self, message_id: int) -> None:
        view = self.view_of(message_id)
        if view is not None:
            self.remove_view(view)

    def _update_regenerate(self) -> None:
        last_assistant = next((v for v in reversed(self._views) if v.role == "assistant"), None)
        for view in self._views[-2:]:  # the only ones that can have shown it
            shown = (
                view is last_assistant and view is self._views[-1] and self.streaming_view is None
            )
            view.regenerate_button.setVisible(shown)
            view.continue_button.setVisible(shown and can_go_on(view.finish_reason))
            view.continue_button.setToolTip(continue_tip(view.finish_reason))
            view.regenerate_button.setToolTip(
                REPEATS_HINT if self.repeats else "Write this answer again"
            )
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
        )

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
        self._from_bottom = bar.maximum() - value
        self.latest_button.setVisible(not self._follow)  # scrolled up: a way back down
        if not self._follow:
            self._place_latest()
        if self._pending:
            self._queue_step()

    def _range_changed(self, _low: int, high: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(high)
        elif self._pending or self._step_queued:  # older messages arrive above the reader
            self.verticalScrollBar().setValue(high - self._from_bottom)
        if self._pending:
            self._queue_step()


def copy_text(text: str) -> None:
    QGuiApplication.clipboard().setText(text)
