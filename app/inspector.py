"""The acceptance inspector: how far into its drafts each answer's guesses held.

Two painted bar charts for the answers ticked in the list (so drafters can be compared
side by side): acceptance by draft position (``per_position_acceptance``) and the share
of passes that accepted 0, 1, 2, … drafted tokens (``accepted_length_counts``).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import (QLabel, QListWidget, QListWidgetItem, QSizePolicy, QVBoxLayout, QWidget)

from . import theme


@dataclass
class Series:
    name: str
    values: list[float]  # 0..1


class BarChart(QWidget):
    """Grouped vertical bars, values from 0 to 1 shown as percentages."""

    def __init__(self, title: str, x_title: str, parent=None):
        super().__init__(parent)
        self.title = title
        self.x_title = x_title
        self.series: list[Series] = []
        self.labels: list[str] = []
        self.setMinimumHeight(170)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)

    def sizeHint(self) -> QSize:
        return QSize(300, 200)

    def set_data(self, labels: list[str], series: list[Series]) -> None:
        self.labels, self.series = labels, series
        self.update()

    def paintEvent(self, _event):
        colors = theme.current()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.Antialiasing)
        font = QFont(self.font())
        small = QFont(font)
        small.setPointSizeF(font.pointSizeF() * 0.82)
        bold = QFont(font)
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(QColor(colors.text))
        painter.drawText(QRectF(0, 0, self.width(), 20), Qt.AlignLeft | Qt.AlignVCenter, self.title)
        plot = QRectF(36, 28, self.width() - 44, self.height() - 28 - 34)
        painter.setFont(small)
        for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
            y = plot.bottom() - fraction * plot.height()
            painter.setPen(QPen(QColor(colors.grid), 1))
            painter.drawLine(plot.left(), y, plot.right(), y)
            painter.setPen(QColor(colors.muted))
            painter.drawText(QRectF(0, y - 7, plot.left() - 4, 14), Qt.AlignRight | Qt.AlignVCenter,
                             f"{fraction:.0%}")
        if not self.series or not self.labels:
            painter.setPen(QColor(colors.muted))
            painter.drawText(plot, Qt.AlignCenter, "No drafts in this answer" if self.series
                             else "Pick an answer to inspect")
            painter.end()
            return
        groups = len(self.labels)
        group_width = plot.width() / groups
        bar_width = max(min(group_width * 0.8 / len(self.series), 28.0), 1.5)
        for g, label in enumerate(self.labels):
            left = plot.left() + g * group_width + (group_width - bar_width * len(self.series)) / 2
            for s, series in enumerate(self.series):
                value = series.values[g] if g < len(series.values) else 0.0
                height = max(min(value, 1.0), 0.0) * plot.height()
                color = QColor(colors.series[s % len(colors.series)])
                painter.fillRect(QRectF(left + s * bar_width, plot.bottom() - height,
                                        bar_width - 1, height), color)
            if groups <= 16 or g % max(groups // 16, 1) == 0:
                painter.setPen(QColor(colors.muted))
                painter.drawText(QRectF(plot.left() + g * group_width, plot.bottom() + 2,
                                        group_width, 14), Qt.AlignHCenter | Qt.AlignTop, label)
        painter.setPen(QColor(colors.muted))
        painter.drawText(QRectF(plot.left(), plot.bottom() + 16, plot.width(), 16),
                         Qt.AlignHCenter | Qt.AlignTop, self.x_title)
        painter.end()


def position_series(stats: dict) -> list[float]:
    return [float(x) for x in stats.get("per_position_acceptance", [])]


def length_series(stats: dict) -> list[float]:
    counts = stats.get("accepted_length_counts", [])
    total = sum(counts)
    return [c / total for c in counts] if total else []


class Inspector(QWidget):
    """Lists the session's answers; the ticked ones are drawn in both charts."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("inspector")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        hint = QLabel("Tick answers to compare their drafters.")
        hint.setObjectName("hint")
        hint.setWordWrap(True)
        layout.addWidget(hint)
        self.list = QListWidget()
        self.list.setMaximumHeight(110)
        self.list.itemChanged.connect(self._redraw)
        layout.addWidget(self.list)
        self.positions = BarChart("Acceptance by draft position", "position in the draft")
        self.positions.setToolTip("Of the passes that drafted a token at this position, the "
                                  "share where it was accepted")
        self.lengths = BarChart("Accepted drafts per pass", "drafted tokens accepted in a pass")
        self.lengths.setToolTip("Share of passes that accepted 0, 1, 2, … drafted tokens")
        layout.addWidget(self.positions, 1)
        layout.addWidget(self.lengths, 1)
        self.summary = QLabel()
        self.summary.setObjectName("hint")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout.addWidget(self.summary)
        self._stats: dict[int, dict] = {}

    def set_answers(self, answers: list[tuple[int, str, dict]], checked: set[int] | None = None) -> None:
        """``answers``: (message id, label, stats) in order; ``checked``: ids to draw."""
        previously = self.checked_ids() if checked is None else checked
        self.list.blockSignals(True)
        self.list.clear()
        self._stats = {}
        for message_id, label, stats in answers:
            item = QListWidgetItem(label)
            item.setData(Qt.UserRole, message_id)
            item.setFlags(item.flags() | Qt.ItemIsUserCheckable)
            item.setCheckState(Qt.Checked if message_id in previously else Qt.Unchecked)
            self.list.addItem(item)
            self._stats[message_id] = stats
        self.list.blockSignals(False)
        self._redraw()

    def checked_ids(self) -> set[int]:
        return {self.list.item(i).data(Qt.UserRole) for i in range(self.list.count())
                if self.list.item(i).checkState() == Qt.Checked}

    def inspect(self, message_id: int, only: bool = True) -> None:
        self.list.blockSignals(True)
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.UserRole) == message_id:
                item.setCheckState(Qt.Checked)
                self.list.scrollToItem(item)
            elif only:
                item.setCheckState(Qt.Unchecked)
        self.list.blockSignals(False)
        self._redraw()

    def _redraw(self, *_):
        chosen = []
        colors = theme.current()
        self.list.blockSignals(True)
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.checkState() == Qt.Checked:
                color = colors.series[len(chosen) % len(colors.series)]
                chosen.append((item.text(), self._stats.get(item.data(Qt.UserRole), {})))
                item.setForeground(QColor(color))
            else:
                item.setForeground(QColor(colors.text))
        self.list.blockSignals(False)
        longest = max((len(position_series(s)) for _, s in chosen), default=0)
        self.positions.set_data([str(i + 1) for i in range(longest)],
                                [Series(name, position_series(s)) for name, s in chosen])
        longest = max((len(length_series(s)) for _, s in chosen), default=0)
        self.lengths.set_data([str(i) for i in range(longest)],
                              [Series(name, length_series(s)) for name, s in chosen])
        lines = []
        for name, stats in chosen:
            counters = stats.get("drafter_counters", {})
            lines.append(f"<b>{name}</b>: {stats.get('passes', 0)} passes, "
                         f"{stats.get('drafted', 0)} drafted, {stats.get('accepted', 0)} accepted "
                         f"({stats.get('acceptance_rate', 0):.0%}); calls {counters.get('calls', 0)}, "
                         f"gen drafts {counters.get('gen_drafts', 0)}, acc drafts "
                         f"{counters.get('acc_drafts', 0)}")
        self.summary.setText("<br>".join(lines))
