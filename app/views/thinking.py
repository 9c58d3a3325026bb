"""A reasoning model's ``<think> … </think>`` text, folded away from its answer.

Reasoning models (Qwen3, DeepSeek-R1) write their reasoning between ``<think>`` and
``</think>``, then the answer. ``split`` finds the two parts:

- ``<think>`` … ``</think>`` anywhere: the text between is thinking; the text before
  ``<think>`` and after ``</think>`` is the answer;
- ``<think>`` with no ``</think>`` yet: all after it is thinking, still being written (or
  cut off, when the answer is finished);
- ``</think>`` with no ``<think>`` before it: the chat template opened the block in the
  prompt (DeepSeek-R1's, and Qwen3's thinking templates do this), so all before it is
  thinking. Nothing in the text says so before that ``</think>`` arrives: while the answer
  streams, the engine says so instead (``opened_by_template``, from its "prefill" event),
  and all of the text is thinking until ``</think>``.

Only the first block counts; a tag the model writes later is answer text. The card shows
the thinking in a ``ThinkingPanel``, collapsed under "Thinking…" (LM Studio's way), with
the accepted-draft highlights painted through render.py like the answer's. Later turns
send the model the answer without its thinking (``answer_only``), as Qwen3's and
DeepSeek-R1's chat templates do with earlier answers; an answer cut off while thinking
sends only what it wrote before its think block, often nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QTextBrowser, QToolButton, QVBoxLayout, QWidget

from ..storage.provenance import Provenance
from .render import Palette, render

OPEN, CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class Parts:
    """Where the thinking and the answer lie in a message's text."""

    text: str
    thinking: range | None  # the thinking text, without its tags; None: no think block
    closed: bool  # the block ended with </think>
    block: range = range(0)  # the whole block, tags included
    answer: tuple[range, ...] = ()  # the answer: before the block, after it

    @property
    def thinking_text(self) -> str:
        return self.text[self.thinking.start : self.thinking.stop] if self.thinking else ""

    @property
    def answer_text(self) -> str:
        return "".join(self.text[r.start : r.stop] for r in self.answer)

    @property
    def answer_origin(self) -> list[int]:
        """For each character of ``answer_text``, its index in ``text``."""
        return [i for r in self.answer for i in r]


def _unfinished_tag(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` are the start of ``tag`` (streaming)."""
    return next((n for n in range(len(tag) - 1, 0, -1) if text.endswith(tag[:n])), 0)


def split(text: str, opened_by_template: bool = False) -> Parts:
    opened, closed = text.find(OPEN), text.find(CLOSE)
    if (opened_by_template and text) or (closed >= 0 and not 0 <= opened < closed):
        opened = start = 0  # the template opened the block in the prompt
    elif opened >= 0:
        start = opened + len(OPEN)
    elif text.lstrip() and OPEN.startswith(text.lstrip()):  # "<thi" of a block starting
        return Parts(text, range(len(text), len(text)), False, range(len(text)))
    else:
        return Parts(text, None, False, range(0), (range(len(text)),))
    if closed < 0:
        end = len(text) - _unfinished_tag(text, CLOSE)
        return Parts(text, range(start, end), False, range(opened, len(text)), (range(opened),))
    block = range(opened, closed + len(CLOSE))
    after = block.stop
    while after < len(text) and text[after] in "\r\n":  # the answer's own first line
        after += 1
    return Parts(text, range(start, closed), True, block, (range(opened), range(after, len(text))))


def answer_only(text: str, opened_by_template: bool = False) -> str:
    """``text`` without its think block, finished or cut off (``opened_by_template``: the
    text starts inside the block, all of it thinking until ``</think>``)."""
    return split(text, opened_by_template).answer_text


def thinking_tokens(parts: Parts, provenance: Provenance | None) -> int | None:
    """How many tokens wrote the think block (its tags included); None: not known."""
    if provenance is None or parts.thinking is None:
        return None
    block = parts.block
    return sum(1 for t in provenance.tokens if t.start < block.stop and t.end > block.start)


def heading(parts: Parts, tokens: int | None, writing: bool) -> str:
    count = "" if tokens is None else f"{tokens:,} token{'s' if tokens != 1 else ''}"
    if writing and not parts.closed:
        return f"Thinking… {count}".rstrip()
    if not parts.closed:
        return f"Thought for {count}, cut off before an answer" if count else "Thoughts (cut off)"
    return f"Thought for {count}" if count else "Thoughts"


class ThinkingPanel(QWidget):
    """A card's thinking: a toggle line ("▸ Thought for 412 tokens") over the thinking
    text, which is shown (and rendered) only while expanded. The toggle and the text view
    are built when a message first has thinking: most cards never need them, and a long
    chat builds hundreds of cards (built with each card, they made it 2.7–3.7 ms instead of
    1.9–2.2 ms here, 300 cards, offscreen)."""

    def __init__(self, make_body: Callable[[], QTextBrowser], parent=None):
        super().__init__(parent)
        self.setObjectName("thinkingPanel")
        self.setVisible(False)
        self._make_body = make_body
        self.toggle: QToolButton | None = None
        self.body: QTextBrowser | None = None
        self._shown: tuple | None = None  # what to render when expanded
        self._label = ""

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.toggle = QToolButton(self)
        self.toggle.setObjectName("thinkingToggle")
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setCursor(Qt.PointingHandCursor)
        self.toggle.setToolButtonStyle(Qt.ToolButtonTextOnly)
        self.toggle.setToolTip("Show or hide the model's reasoning before its answer")
        self.toggle.toggled.connect(self._toggled)
        layout.addWidget(self.toggle, 0, Qt.AlignLeft)
        self.body = self._make_body()
        self.body.setObjectName("thinkingText")
        self.body.setVisible(False)
        layout.addWidget(self.body)

    @property
    def expanded(self) -> bool:
        return self.toggle is not None and self.toggle.isChecked()

    def set_expanded(self, on: bool) -> None:
        if self.toggle is not None:
            self.toggle.setChecked(on)

    def show_parts(
        self,
        parts: Parts,
        provenance: Provenance | None,
        *,
        writing: bool,
        font: QFont,
        markdown: bool,
        highlight: bool,
        palette: Palette,
    ) -> None:
        """Show the thinking of ``parts`` (hidden when there is none)."""
        # an empty block that is closed (Qwen3 with thinking off) is not worth a toggle
        empty = parts.closed and not parts.thinking_text.strip()
        self.setVisible(parts.thinking is not None and not empty)
        if parts.thinking is None or empty:
            self._shown = None
            return
        if self.toggle is None:
            self._build()
        self._label = heading(parts, thinking_tokens(parts, provenance), writing)
        self._shown = (parts, provenance, markdown, highlight, palette)
        if self.body.document().defaultFont() != font:
            self.body.document().setDefaultFont(font)
        muted = (palette.muted or QColor("gray")).name()
        # an aside, ruled at the left; its text keeps the answer's colour, which stays
        # readable on the accepted-draft colour in both themes (grey on it did not, in dark)
        sheet = f"#thinkingText {{ border-left: 2px solid {muted}; padding-left: 6px; }}"
        if self.body.styleSheet() != sheet:  # Qt re-polishes on every set, even the same one
            self.body.setStyleSheet(sheet)
        self._update()

    def _toggled(self, _on: bool) -> None:
        self._update()

    def _update(self) -> None:
        self.toggle.setText(("▾ " if self.expanded else "▸ ") + self._label)
        self.body.setVisible(self.expanded and self._shown is not None)
        if self.expanded and self._shown is not None:
            parts, provenance, markdown, highlight, palette = self._shown
            self.body.provenance = provenance
            self.body.render_map = render(
                self.body.document(),
                parts.thinking_text,
                provenance,
                markdown=markdown,
                highlight=highlight,
                palette=palette,
                origin=parts.thinking,
            )
            self.body._fit()
