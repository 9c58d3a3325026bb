"""How much of the model's context window the open chat uses, shown by the composer.

The counts are the engine's: the prompt tokens of the last answer (its ``timing``) plus the
tokens it wrote, and the context length the loaded model's facts give (``ModelEvent.facts``,
``engine.models.model_facts``). The app never tokenizes anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QLabel, QProgressBar, QVBoxLayout, QWidget

from . import theme

# past this share of the window the meter warns: at 85 % a 8,192-token model has about
# 1,200 tokens left, two or three more exchanges of a typical chat answer
WARN_SHARE = 0.85
MIN_ANSWER_ROOM = 64  # tokens: less room than this leaves no useful answer (a few lines)
# a prompt read of fewer tokens says little about the pace of a long one: one pass over a
# few tokens costs about what a pass over one does (this machine's verify-cost curve)
MIN_PACE_TOKENS = 64
BAR_HEIGHT = 4  # a thin line under the count: the status bar keeps its one-line height


@dataclass(frozen=True)
class ContextUse:
    used: int  # tokens of the chat so far: the last prompt and the answer to it
    window: int | None  # the model's context length; None when the model does not say
    max_tokens: int  # what the next answer may add (the Max tokens setting)
    pending: int = 0  # tokens of files attached in the composer, not sent yet

    @property
    def total(self) -> int:
        """The chat and what the next message brings."""
        return self.used + self.pending

    @property
    def share(self) -> float:
        return self.total / self.window if self.window else 0.0

    @property
    def tokens_left(self) -> int | None:
        """Tokens the next message can add: the window less the chat so far and Max tokens
        (below 0: the next answer would not fit); None when the model gives no window."""
        return self.window - self.used - self.max_tokens if self.window else None

    @property
    def answer_room(self) -> int | None:
        """The longest answer the engine would take now (the window less the chat and the
        files attached); None when the model gives no window."""
        return self.window - self.total if self.window else None

    @property
    def next_refused(self) -> bool:
        """The engine refuses an answer whose prompt plus Max tokens pass the window."""
        return self.answer_room is not None and self.answer_room < self.max_tokens

    @property
    def nearly_full(self) -> bool:
        """The chat itself fills the window: past ``WARN_SHARE``, or no room for an answer
        (never said without a window to go by)."""
        if self.answer_room is None:
            return False
        return self.share >= WARN_SHARE or self.answer_room < MIN_ANSWER_ROOM

    @property
    def warning(self) -> bool:
        return self.nearly_full or self.next_refused

    def text(self) -> str:
        if not self.window:
            return f"{self.total:,} tokens"
        said = f"{self.total:,} / {self.window:,} tokens"
        if self.nearly_full:
            return said + " — nearly full"
        if self.next_refused:  # the chat fits; the Max tokens setting does not
            return said + " — lower Max tokens"
        return said

    def tooltip(self) -> str:
        if not self.window:
            return (
                f"This chat uses {self.total:,} tokens; the model does not say how long its "
                "context window is."
            )
        said = (
            f"This chat uses {self.used:,} of the {self.window:,} tokens the model reads at "
            f"once ({self.used / self.window:.0%}), counting the last prompt and its answer."
        )
        if self.pending:
            said += f" The files attached add {self.pending:,}."
        full = (
            " When the chat and Max tokens no longer fit, the engine refuses to answer: start "
            "a new chat, or lower Max tokens for a short last answer."
        )
        if self.next_refused:
            return (
                said + f" The next answer may need {self.max_tokens:,} more (Max tokens): it would "
                f"not fit. Lower Max tokens to {max(self.answer_room, 0):,} or less." + full
            )
        return said + (full if self.warning else "")


def chat_use(messages, streaming=None) -> int:
    """Tokens the chat holds: the last answer's prompt tokens and the tokens it wrote (the
    engine's counts); with ``streaming`` (an answer being written), its tokens so far on top."""
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    used = 0
    if last is not None:
        written = len(last.provenance.tokens) if last.provenance else 0
        used = int((last.timing or {}).get("prompt_tokens", 0)) + written
    if streaming is not None:
        if streaming.continues is not None:  # its tokens so far include the earlier ones
            return (
                chat_use([streaming.continues])
                + len(streaming.provenance.tokens)
                - (len(streaming.continues.provenance.tokens))
            )
        used += len(streaming.provenance.tokens)
    return used


def measured_pace(timing: dict | None) -> float | None:
    """Prompt tokens a second the engine read in an answer's ``timing`` (None when it read
    too few to tell: a short prompt's reading is mostly the fixed cost of a pass)."""
    timing = timing or {}
    tokens, seconds = timing.get("prefilled_tokens"), timing.get("prefill_s")
    if not isinstance(tokens, int) or not isinstance(seconds, (int, float)):
        return None
    return tokens / seconds if tokens >= MIN_PACE_TOKENS and seconds > 0 else None


def context_use(c, answer=None) -> ContextUse:
    """How much of the window the controller ``c``'s open chat uses (``answer``: one being
    written)."""
    streaming = answer if answer is not None and not answer.finished else None
    if streaming is None and c.answering_here:
        streaming = c.answer
    window = c.models.facts.get("context_length")
    return ContextUse(
        chat_use(c.messages, streaming),
        window if isinstance(window, int) and window > 0 else None,
        c.settings.max_tokens,
    )


class ContextMeter(QWidget):
    """'1,234 / 8,192 tokens' over a thin bar; amber, and saying so, when nearly full."""

    def __init__(self, controller=None, parent=None):
        super().__init__(parent)
        self.setObjectName("contextMeter")
        self.setAccessibleName("Context window")
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(1)
        self.label = QLabel()
        self.label.setObjectName("contextMeterText")
        self.label.setAlignment(Qt.AlignCenter)
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(BAR_HEIGHT)
        column.addWidget(self.label)
        column.addWidget(self.bar)
        self.use = ContextUse(0, None, 0)
        self.pending = 0
        self.controller = controller
        if controller is not None:
            controller.sessionOpened.connect(lambda _: self.refresh())
            controller.answerStarted.connect(self.refresh)
            controller.answerUpdated.connect(self.refresh)
            controller.answerFinished.connect(lambda _: self.refresh())
            controller.messageRemoved.connect(lambda _: self.refresh())
            controller.settingsChanged.connect(lambda _: self.refresh())
            controller.models.modelChanged.connect(lambda *_: self.refresh())
            self.refresh()

    def text(self) -> str:
        return self.label.text()

    def refresh(self, answer=None) -> None:
        """Count the open chat again (``answer``: one being written)."""
        self.show_use(replace(context_use(self.controller, answer), pending=self.pending))

    def set_pending(self, tokens: int) -> None:
        """The files attached in the composer come to ``tokens``: counted before Send."""
        self.pending = tokens
        self.refresh()

    def changeEvent(self, event):
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:  # light/dark switched: the theme's colours
            self.show_use(self.use)

    def show_use(self, use: ContextUse) -> None:
        self.use = use
        self.bar.setRange(0, use.window or max(use.total, 1))
        self.bar.setValue(min(use.total, use.window or use.total))
        self.label.setText(use.text())
        self.setToolTip(use.tooltip())
        self.setAccessibleDescription(f"{use.text()}. {use.tooltip()}")
        self.setProperty("warning", use.warning)
        colors = theme.current()
        chunk = colors.mark if use.warning else colors.accent
        sheet = f"QProgressBar::chunk {{ background: {chunk}; }}"
        if sheet != self.bar.styleSheet():  # a new sheet changes the palette: set it only once
            self.bar.setStyleSheet(sheet)
        label_sheet = f"color: {colors.mark}; font-weight: bold;" if use.warning else ""
        if label_sheet != self.label.styleSheet():
            self.label.setStyleSheet(label_sheet)
