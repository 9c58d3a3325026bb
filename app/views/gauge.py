"""The live speculation gauge: tokens per forward pass, current and running mean.

A painted dial from 1 (plain decoding) to draft count + 1 (every guess accepted): the
filled arc is the running mean, the dot is the last pass. Beside it: tokens per second
and the share of drafted tokens accepted. ``SpeculationBar`` packs them with the legend.
"""

from __future__ import annotations

import html

import math

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen, QTextDocument
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from engine.stats import estimate_is_guess, speed_parts, tokens_per_pass_of

from . import theme
from ..presenters.livestats import NOT_MEASURED
from .zoom import zoom_of

START_DEG, SPAN_DEG = 210.0, -240.0  # clockwise from lower left to lower right


class Gauge(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.maximum = 5.0
        self.mean = 0.0
        self.current = 0.0
        self.active = False
        self.setToolTip(
            "Tokens per forward pass: the arc is the running mean for this answer, "
            "the dot the last pass. 1 = plain decoding; more means accepted guesses."
        )
        self.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)
        self.setAccessibleName("Tokens per pass")
        self._describe()

    def _describe(self) -> None:
        """The values in words, for a screen reader (the dial is painted)."""
        scale = f"on a scale from 1 to {self.maximum:g}"
        if not self.mean:
            said = f"No answer yet, {scale}."
        else:
            said = f"{self.mean:.1f} tokens per pass for this answer, {scale}."
            if self.current >= 1.0:
                said += f" The last pass made {self.current:g}."
        self.setAccessibleDescription(said)

    def sizeHint(self) -> QSize:
        scale = zoom_of(self)
        return QSize(round(120 * scale), round(100 * scale))

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def set_values(self, mean: float, current: float, maximum: float, active: bool = True) -> None:
        self.mean, self.current = float(mean), float(current)
        self.maximum = max(float(maximum), 2.0)
        self.active = active
        self._describe()
        self.update()

    def fraction(self, value: float) -> float:
        """Where ``value`` sits between 1 and the maximum, on a logarithmic scale: with a
        draft count of 64, 2 and 4 tokens a pass still move the needle visibly."""
        if value <= 1.0:
            return 0.0
        return min(math.log(value) / math.log(self.maximum), 1.0)

    def paintEvent(self, _event):
        colors = theme.current()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.Antialiasing)
        radius = min((self.width() - 16) / 2, (self.height() - 26) / 1.5)
        side = 2 * radius  # the 240° arc is 1.5 radii tall
        rect = QRectF((self.width() - side) / 2, 6, side, side)
        width = 9.0
        painter.setPen(QPen(QColor(colors.grid), width, Qt.SolidLine, Qt.RoundCap))
        painter.drawArc(rect, int(START_DEG * 16), int(SPAN_DEG * 16))
        if self.mean >= 1.0:
            accent = QColor(colors.accent)
            if not self.active:
                accent.setAlpha(150)
            painter.setPen(QPen(accent, width, Qt.SolidLine, Qt.RoundCap))
            painter.drawArc(
                rect, int(START_DEG * 16), int(SPAN_DEG * self.fraction(self.mean) * 16) or -1
            )
        if self.current >= 1.0:
            angle = math.radians(START_DEG + SPAN_DEG * self.fraction(self.current))
            center = rect.center()
            radius = rect.width() / 2
            dot = QPointF(
                center.x() + radius * math.cos(angle), center.y() - radius * math.sin(angle)
            )
            painter.setPen(QPen(QColor(colors.base), 2))
            painter.setBrush(QColor(colors.draft if not colors.dark else "#ffd24d"))
            painter.drawEllipse(dot, 6, 6)
        painter.setPen(QColor(colors.text))
        font = QFont(self.font())
        font.setPointSizeF(font.pointSizeF() * 1.45)
        font.setBold(True)
        painter.setFont(font)
        text = f"{self.mean:.1f}" if self.mean else "–"
        painter.drawText(
            QRectF(rect.left(), rect.top() + side * 0.22, side, side * 0.36), Qt.AlignCenter, text
        )
        small = QFont(self.font())
        small.setPointSizeF(small.pointSizeF() * 0.8)
        painter.setFont(small)
        painter.setPen(QColor(colors.muted))
        painter.drawText(
            QRectF(0, rect.top() + side * 0.56, self.width(), side * 0.22),
            Qt.AlignCenter,
            "tokens/pass",
        )
        center = rect.center()
        for sign, label in ((-1, "1"), (1, f"{self.maximum:g}")):
            x = center.x() + sign * 0.866 * radius
            y = center.y() + 0.5 * radius + 12
            painter.drawText(QRectF(x - 12, y - 8, 24, 16), Qt.AlignCenter, label)
        painter.end()


class Legend(QWidget):
    """A swatch in the accepted-draft colour and its meaning."""

    def __init__(self, text: str, parent=None):
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.swatch = QFrame(self)
        self.swatch.setObjectName("legendSwatch")
        self.swatch.setFixedSize(14, 14)
        layout.addWidget(self.swatch)
        self.label = QLabel(text, self)
        layout.addWidget(self.label)
        self.restyle()

    def restyle(self) -> None:
        colors = theme.current()  # the fill and the underline the transcript paints
        self.swatch.setStyleSheet(
            f"background: {colors.draft}; border-bottom: 2px solid {colors.mark};"
        )


def one_line_width(label: QLabel) -> float:
    """The width a rich-text label needs to show its text on one line."""
    document = QTextDocument()
    document.setDefaultFont(label.font())
    document.setDocumentMargin(0)
    document.setHtml(label.text())
    return document.idealWidth() + 2


class SpeculationBar(QFrame):
    """Gauge, tokens/s, acceptance, legend and the highlight toggle, above the transcript."""

    highlightToggled = Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("speculationBar")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 4, 12, 4)
        layout.setSpacing(14)
        self.gauge = Gauge(self)
        layout.addWidget(self.gauge)
        numbers = QVBoxLayout()
        numbers.setSpacing(2)
        self.current_label = self._figure(
            "this pass",
            "Tokens the last forward pass produced (accepted guesses + the model's own token)",
        )
        self.speed_label = self._figure("tok/s", "Tokens per second while decoding")
        self.acceptance_label = self._figure(
            "drafts accepted", "Share of drafted tokens the model accepted"
        )
        self.speedup_label = self._figure(
            "vs plain (est.)",
            "Plain decoding's predicted time over this answer's, "
            "from this machine's measured verify-cost curve",
        )
        self.figures = (
            self.current_label,
            self.speed_label,
            self.acceptance_label,
            self.speedup_label,
        )
        for label in self.figures:
            numbers.addWidget(label)
        layout.addLayout(numbers)
        self.right = QWidget(self)  # model line and legend: dropped first when narrow
        self.right.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        right = QVBoxLayout(self.right)
        right.setContentsMargins(0, 0, 0, 0)
        right.setSpacing(4)
        self.model_label = QLabel("No model loaded yet")
        self.model_label.setObjectName("modelLabel")
        self.model_label.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        self.model_label.setWordWrap(True)
        self.model_label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        right.addWidget(self.model_label)
        legend_row = QHBoxLayout()
        legend_row.addStretch(1)
        self.legend = Legend("accepted draft")
        self.legend.setToolTip(
            "Characters whose tokens were all guessed by the drafter and accepted by the model"
        )
        legend_row.addWidget(self.legend)
        self.toggle = QCheckBox("Highlight")
        self.toggle.setChecked(True)
        self.toggle.setToolTip("Show which characters came from accepted drafts")
        self.toggle.toggled.connect(self.highlightToggled)
        legend_row.addWidget(self.toggle)
        right.addLayout(legend_row)
        layout.addWidget(self.right, 1)
        self.show_numbers(None)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        needed = self.legend.sizeHint().width() + self.toggle.sizeHint().width() + 16
        self.right.setVisible(self.right.width() >= needed or self.width() >= 620)
        self._wrap_figures()

    def _wrap_figures(self) -> None:
        """Figures stay on one line where they fit; a narrow chat wraps their units instead
        of cutting them off."""
        margins = self.layout().contentsMargins()
        room = (
            self.width()
            - margins.left()
            - margins.right()
            - self.gauge.width()
            - self.layout().spacing()
        )
        wrap = max(one_line_width(label) for label in self.figures) > room
        for label in self.figures:
            if label.wordWrap() != wrap:
                label.setWordWrap(wrap)

    def _figure(self, unit: str, tip: str) -> QLabel:
        label = QLabel()
        label.setObjectName("figure")
        label.setProperty("unit", unit)
        label.setToolTip(tip)
        label.setTextFormat(Qt.RichText)
        return label

    @staticmethod
    def _set(label: QLabel, value: str) -> None:
        label.setText(
            f"<b>{value}</b> <span style='color:{theme.current().muted}'>"
            f"{label.property('unit')}</span>"
        )

    def show_numbers(self, live, draft_count: int | None = None, active: bool = False) -> None:
        """Show the open chat's latest answer (``LiveStats``; None: no answer yet). The
        last pass and its dot only while that answer is being written."""
        self.replaying = None
        if live is None or not live.passes:
            self.gauge.set_values(0, 0, (draft_count or 4) + 1, active)
            for label in self.figures:
                self._set(label, "–")
            self._wrap_figures()
            return
        current = live.last_emitted if active else 0
        self.gauge.set_values(live.tokens_per_pass, current, (draft_count or 4) + 1, active)
        self._set(self.current_label, f"{current}" if active else "–")
        self._set(self.speed_label, f"{live.tokens_per_s:.1f}")
        self._set(self.acceptance_label, f"{live.acceptance_rate:.0%}" if live.drafted else "–")
        self._show_speedup(
            {
                "estimated_speedup": live.estimated_speedup,
                "estimate_curve": live.stats.estimate_curve,
            }
        )
        self._wrap_figures()

    def show_replay(self, stats: dict, draft_count: int, label: str) -> None:
        """A replay's figures (``DecodeStats.to_dict()``) while its highlights are shown; the
        first figure says "replay" and which one. A replay has no speed of its own."""
        self.gauge.set_values(tokens_per_pass_of(stats), 0, draft_count + 1, False)
        self.current_label.setText(
            f"<b>replay</b> <span style='color:{theme.current().muted}'>{html.escape(label)}</span>"
        )
        self._set(self.speed_label, "–")
        drafted = stats.get("drafted", 0)
        self._set(
            self.acceptance_label, f"{stats.get('acceptance_rate', 0):.0%}" if drafted else "–"
        )
        self._show_speedup(stats)
        self.replaying = label
        self._wrap_figures()

    def _show_speedup(self, stats: dict) -> None:
        """'≈2.1× faster than plain (est.)'; on a curve not measured yet, says so instead of
        showing the guess (the footer's tooltip still gives it)."""
        speedup = stats.get("estimated_speedup")
        if speedup and estimate_is_guess(stats.get("estimate_curve")):
            self.speedup_label.setText(
                f"<span style='color:{theme.current().muted}'>{NOT_MEASURED}</span>"
            )
        elif speedup:
            figure, words = speed_parts(speedup)
            self.speedup_label.setText(
                f"<b>{figure}</b> <span style='color:{theme.current().muted}'>{words} (est.)</span>"
            )
        else:
            self._set(self.speedup_label, "–")

    def show_model(self, name: str, speculation: str) -> None:
        state = "speculation on" if speculation == "on" else f"speculation {speculation}"
        self.model_label.setText(f"<b>{name}</b> · {state}")
        self.model_label.setToolTip(f"Model: {name}\nSpeculative decoding: {speculation}")

    def restyle(self) -> None:
        self.legend.restyle()
        self.gauge.update()
