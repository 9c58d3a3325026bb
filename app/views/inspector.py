"""The acceptance inspector: how far into its drafts each answer's guesses held.

Two painted bar charts for the answers ticked in the list (so drafters can be compared
side by side): acceptance by draft position (``per_position_acceptance``) and the share
of passes that accepted 0, 1, 2, … drafted tokens (``accepted_length_counts``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QGridLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSizePolicy,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.events import ReplayOutcome
from engine.stats import (
    DEFINITIONS,
    SAME_SPEED,
    DecodeStats,
    speed_words,
    tokens_per_pass_of,
)

from . import theme
from .zoom import small_print


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
        self.setMinimumHeight(160)
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
            painter.drawText(
                QRectF(0, y - 7, plot.left() - 4, 14),
                Qt.AlignRight | Qt.AlignVCenter,
                f"{fraction:.0%}",
            )
        if not self.series or not self.labels:
            painter.setPen(QColor(colors.muted))
            painter.drawText(
                plot,
                Qt.AlignCenter,
                "No drafts in this answer" if self.series else "Pick an answer to inspect",
            )
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
                painter.fillRect(
                    QRectF(left + s * bar_width, plot.bottom() - height, bar_width - 1, height),
                    color,
                )
            if groups <= 16 or g % max(groups // 16, 1) == 0:
                painter.setPen(QColor(colors.muted))
                painter.drawText(
                    QRectF(plot.left() + g * group_width, plot.bottom() + 2, group_width, 14),
                    Qt.AlignHCenter | Qt.AlignTop,
                    label,
                )
        painter.setPen(QColor(colors.muted))
        painter.drawText(
            QRectF(plot.left(), plot.bottom() + 16, plot.width(), 16),
            Qt.AlignHCenter | Qt.AlignTop,
            self.x_title,
        )
        painter.end()


def position_series(stats: dict) -> list[float]:
    return [float(x) for x in stats.get("per_position_acceptance", [])]


def length_series(stats: dict) -> list[float]:
    counts = stats.get("accepted_length_counts", [])
    total = sum(counts)
    return [c / total for c in counts] if total else []


# the figures of engine/stats.py in the words the inspector says them in, for its tooltip
FIGURE_WORDS = (
    ("tokens_per_pass", "tokens/pass"),
    ("passes", "forward passes"),
    ("drafted", "draft tokens sent"),
    ("accepted", "draft tokens accepted"),
    ("gen_drafts", "drafts sent"),
    ("acc_drafts", "drafts accepted"),
)


def figures_in_words(name: str, stats: dict) -> str:
    """'<b>#2 · suffix</b>: 98 forward passes · 40 draft tokens sent, 25 accepted (62%) · 11
    drafts sent, 7 accepted' (a stored answer's figures: untrusted, read by ``DecodeStats``)."""
    figures = DecodeStats.from_dict(stats)
    passes = f"{figures.passes} forward pass{'es' if figures.passes != 1 else ''}"
    if not figures.drafted:
        return f"<b>{html.escape(name)}</b>: {passes} · no drafts"
    return (
        f"<b>{html.escape(name)}</b>: {passes} · {figures.drafted} draft tokens sent, "
        f"{figures.accepted} accepted ({figures.acceptance_rate:.0%}) · "
        f"{figures.gen_drafts} drafts sent, {figures.acc_drafts} accepted"
    )


def same_replay(result: ReplayOutcome) -> tuple:
    """What makes two replays one row: the same drafter and draft count, and the same
    accepted tokens and figures (an n-gram order that changed nothing)."""
    figures = tuple(sorted((k, repr(v)) for k, v in result.stats.items()))
    return result.drafter, result.draft_count, result.from_draft, figures, result.notes


def folded_rows(results: list[ReplayOutcome]) -> list[tuple[ReplayOutcome, list[int]]]:
    """``results`` (best first) with the replays that differ only in their n-gram order as
    one row: (the first of them, every n-gram order it stands for), in the same order."""
    rows: dict[tuple, tuple[ReplayOutcome, list[int]]] = {}
    for result in results:
        key = same_replay(result)
        if key in rows:
            rows[key][1].append(result.ngram_order)
        else:
            rows[key] = (result, [result.ngram_order])
    return list(rows.values())


def orders_text(orders: list[int]) -> str:
    """[2, 3, 4] → '2–4'; [2, 4, 8] → '2, 4, 8'."""
    orders = sorted(set(orders))
    if len(orders) > 2 and orders == list(range(orders[0], orders[-1] + 1)):
        return f"{orders[0]}–{orders[-1]}"
    return ", ".join(map(str, orders))


def parse_numbers(text: str, low: int, high: int) -> list[int]:
    """'2, 4,8' → [2, 4, 8]; values outside [low, high] and non-numbers are dropped."""
    values = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if part.isdigit() and low <= int(part) <= high and int(part) not in values:
            values.append(int(part))
    return values


MIN_COLUMN = 24  # px: a column stays wide enough to show it is there
# The speed ranks the table, so it stands next to the names: a panel too narrow for every
# column (a 600-px window's) scrolls the others away, not it. Headers wrap at their spaces.
NAME, SPEED, PER_PASS, KEPT, ORDER = range(5)
REPLAY_COLUMNS = ("Drafter", "× plain (est.)", "tokens per pass", "drafts kept", "n")
HEADER_MARGIN = 8  # px above and below a header's lines
REPLAY_TIPS = (
    "Drafter and draft count k",
    DEFINITIONS["estimated_speedup"],
    DEFINITIONS["tokens_per_pass"],
    DEFINITIONS["acceptance_rate"],
    "N-gram order (a range: every order in it replays the same)",
)


class NumberItem(QTableWidgetItem):
    """Sorts by its number, shows its text."""

    def __init__(self, text: str, value):
        super().__init__(text)
        self.value = value
        self.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)

    def __lt__(self, other):
        return self.value < getattr(other, "value", 0)


class ReplayPanel(QWidget):
    """Replay every drafter over one answer: a sortable table, its highlights, its settings."""

    replayRequested = Signal(int, list, list)  # message id, draft counts, n-gram orders
    highlightRequested = Signal(int, object)  # message id, result dict (None: the real run)
    applyRequested = Signal(object)  # result dict
    plainRequested = Signal()  # nothing replayed beats plain decoding: turn drafting off

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        title = QLabel(
            "<b>Replay</b> — every drafter over this answer's own tokens, no model "
            "passes. Exact for greedy answers; <i>italic</i>: an estimate (hover for why)."
        )
        title.setWordWrap(True)
        layout.addWidget(title)
        row = QHBoxLayout()
        self.draft_counts = QLineEdit("2, 4, 8")
        self.draft_counts.setMinimumWidth(40)
        self.draft_counts.setAccessibleName("Draft counts to replay")
        self.draft_counts.setToolTip("Draft counts to replay, comma-separated (1–64)")
        self.ngram_orders = QLineEdit("4")
        self.ngram_orders.setMinimumWidth(30)
        self.ngram_orders.setAccessibleName("N-gram orders to replay")
        self.ngram_orders.setToolTip("N-gram orders to replay, comma-separated (1–32)")
        row.addWidget(QLabel("k"))
        row.addWidget(self.draft_counts, 2)
        row.addWidget(QLabel("n"))
        row.addWidget(self.ngram_orders, 1)
        self.run_button = QPushButton("Replay")
        self.run_button.setToolTip("Replay the inspected answer with every drafter")
        self.run_button.clicked.connect(self._request)
        row.addWidget(self.run_button)
        layout.addLayout(row)
        self.table = QTableWidget(0, len(REPLAY_COLUMNS))
        self.table.setObjectName("replayTable")
        self.table.setAccessibleName("Replay results")
        self.table.setHorizontalHeaderLabels(REPLAY_COLUMNS)
        for column, tip in enumerate(REPLAY_TIPS):
            self.table.horizontalHeaderItem(column).setToolTip(tip)
        self.table.setWordWrap(False)
        # drafter names are shown whole ("ngram-map-k" and "ngram-map-k4v" must stay apart):
        # the figures take their values' width (a header wider than its figures is cut, its
        # tooltip says it whole), the drafter column the rest, and a panel too narrow for the
        # names scrolls the table sideways (``_fit_columns``)
        self.table.setTextElideMode(Qt.ElideRight)
        self.table.viewport().installEventFilter(self)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarAsNeeded)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.setSortingEnabled(True)
        self.table.setMinimumHeight(190)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.Fixed)
        header.setTextElideMode(Qt.ElideNone)  # wrapped whole (``_fit_columns``), never cut
        header.setDefaultAlignment(Qt.AlignCenter | Qt.TextWordWrap)
        header.setMinimumSectionSize(MIN_COLUMN)
        header.sortIndicatorChanged.connect(lambda *_: self._fit_columns())
        self.table.itemSelectionChanged.connect(self._selected)
        layout.addWidget(self.table, 1)
        buttons = QGridLayout()  # Use settings on a row of its own: the panel fits at 600 px
        self.highlight_button = QPushButton("Highlights")
        self.highlight_button.setToolTip(
            "Paint the answer with what this drafter would have had accepted"
        )
        self.highlight_button.clicked.connect(self._highlight)
        self.actual_button = QPushButton("Actual")
        self.actual_button.setToolTip("Back to the highlights of the answer's real run")
        self.actual_button.clicked.connect(
            lambda: (
                self.message_id is not None and self.highlightRequested.emit(self.message_id, None)
            )
        )
        self.apply_button = QPushButton("Use settings")
        self.apply_button.setObjectName("primary")
        self.apply_button.setToolTip(
            "Make this drafter, draft count and n-gram order the settings for the next answers"
        )
        self.apply_button.clicked.connect(
            lambda: self.chosen() and self.applyRequested.emit(self.chosen())
        )
        self.plain_button = QPushButton("Turn drafting off")
        self.plain_button.setToolTip(
            "Answer with plain decoding (drafter none): on this answer no drafter was faster"
        )
        self.plain_button.clicked.connect(self.plainRequested)
        self.plain_button.hide()
        buttons.addWidget(self.highlight_button, 0, 0)
        buttons.addWidget(self.actual_button, 0, 1)
        buttons.addWidget(self.apply_button, 1, 0, 1, 2)
        buttons.addWidget(self.plain_button, 2, 0, 1, 2)
        layout.addLayout(buttons)
        self.status = QLabel()
        self.status.setObjectName("hint")
        small_print(self.status)
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.message_id: int | None = None
        self.label = ""  # the answer's name in the inspector's list
        self.results: list[ReplayOutcome] = []
        self.rows: list[tuple[ReplayOutcome, list[int]]] = []  # the table's, n-gram orders folded
        self.show_results(None, [])

    def set_message(self, message_id: int | None, label: str = "") -> None:
        """The answer to replay (None: none ticked); its table and "Best" go with it."""
        if message_id != self.message_id:
            self.message_id, self.label = message_id, label
            self.show_results(None, [])
        self.run_button.setEnabled(message_id is not None)

    def hint(self) -> str:
        """What to do next, when there are no results to show."""
        if self.message_id is None:
            return "Tick an answer above, or press Inspect under one, to replay it."
        answer = f"<b>{html.escape(self.label)}</b>" if self.label else "the ticked answer"
        return f"Press Replay to try every drafter on {answer}."

    def _request(self) -> None:
        counts = parse_numbers(self.draft_counts.text(), 1, 64)
        orders = parse_numbers(self.ngram_orders.text(), 1, 32)
        if self.message_id is None or not counts or not orders:
            self.status.setText("Give at least one draft count (1–64) and n-gram order (1–32).")
            return
        self.status.setText("Replaying…")
        self.run_button.setEnabled(False)
        self.replayRequested.emit(self.message_id, counts, orders)

    def show_results(self, message_id: int | None, results: list[ReplayOutcome]) -> None:
        """``results``: best first."""
        if message_id is not None and message_id != self.message_id:
            return
        self.run_button.setEnabled(self.message_id is not None)
        self.results = list(results)
        self.rows = folded_rows(self.results)
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(self.rows))
        for row, (result, orders) in enumerate(self.rows):
            self._fill_row(row, result, orders)
        self.table.setSortingEnabled(True)
        self.table.sortItems(SPEED, Qt.DescendingOrder)  # best first, as the engine ranks them
        self.table.setColumnHidden(ORDER, len({r.ngram_order for r in results}) <= 1)
        # no verify-cost curve (not measured here yet, a server's answer): no speed column
        speeds = [r.stats.get("estimated_speedup") for r in results]
        self.table.setColumnHidden(SPEED, not any(speeds))
        self._fit_columns()
        self.table.horizontalScrollBar().setValue(0)  # the names in sight, as a new table
        self.plain_button.setVisible(False)
        if results:
            self.table.selectRow(0)
            self.status.setText(self._best_text(results))
        elif message_id is not None:
            self.status.setText("Nothing to replay.")
        else:
            self.status.setText(self.hint())
        self._selected()

    def _fill_row(self, row: int, result: ReplayOutcome, orders: list[int]) -> None:
        stats = result.stats
        speedup = stats.get("estimated_speedup")
        per_pass = tokens_per_pass_of(stats)
        cells = [None] * len(REPLAY_COLUMNS)
        cells[NAME] = QTableWidgetItem(f"{result.drafter} k={result.draft_count}")
        cells[SPEED] = NumberItem(f"{speedup:.2f}×" if speedup else "–", (speedup or 0.0, per_pass))
        cells[PER_PASS] = NumberItem(f"{per_pass:.2f}", per_pass)
        cells[KEPT] = NumberItem(f"{stats['acceptance_rate']:.0%}", stats["acceptance_rate"])
        cells[ORDER] = NumberItem(orders_text(orders), min(orders))
        tip = (
            "Exact: what a greedy run with these settings would have done"
            if result.exact
            else "Estimate: " + ", ".join(result.notes)
        )
        several = "s" if len(orders) > 1 else ""
        name = (
            f"{result.drafter}, draft count {result.draft_count}, n-gram order{several} "
            f"{orders_text(orders)}"
        )
        for column, cell in enumerate(cells):
            cell.setData(Qt.UserRole, row)
            cell.setToolTip(f"{name}\n{tip}")
            if not result.exact:  # estimates in italics; the tooltip says why
                font = cell.font()
                font.setItalic(True)
                cell.setFont(font)
            self.table.setItem(row, column, cell)

    def _best_text(self, results: list[ReplayOutcome]) -> str:
        """'Best: …' with its speed in plain words; where nothing beats plain decoding, says
        so and offers to turn drafting off instead."""
        best = results[0]
        speedup = best.stats.get("estimated_speedup")
        common = [n for n in best.notes if all(n in r.notes for r in results)]
        estimates = f"<br><i>All estimates</i>: {html.escape('; '.join(common))}." if common else ""
        orders = orders_text(self.rows[0][1]) if self.rows else str(best.ngram_order)
        named = f"<b>{html.escape(best.drafter)}</b> k={best.draft_count} n={orders}"
        per_pass = f"{tokens_per_pass_of(best.stats):.2f} tokens/pass"
        if speedup and speedup < 1.0 + SAME_SPEED:
            self.plain_button.setVisible(True)
            return (
                f"Nothing here beats plain decoding on this answer: the best, {named} "
                f"({per_pass}), is {speed_words(speedup)} (estimate). Turn drafting off to "
                f"answer like this plainly.{estimates}"
            )
        speed = (
            f", {speed_words(speedup)} (estimate from this machine's verify-cost curve)"
            if speedup
            else ""
        )
        return f"Best: {named}, {per_pass}{speed}.{estimates}"

    def eventFilter(self, watched, event):
        if watched is self.table.viewport() and event.type() == QEvent.Resize:
            self._fit_columns()
        return super().eventFilter(watched, event)

    def _fit_columns(self) -> None:
        """The drafter names whole; each figure's column as wide as its values and its
        header's longest word (the header wraps), and wider toward its header on one line
        as far as the room allows; the drafter column the rest."""
        table, header = self.table, self.table.horizontalHeader()
        shown = [c for c in range(1, len(REPLAY_COLUMNS)) if not table.isColumnHidden(c)]
        words = header.fontMetrics()
        values = {
            c: max(
                table.sizeHintForColumn(c),
                MIN_COLUMN,
                max(map(words.horizontalAdvance, REPLAY_COLUMNS[c].split())) + self._padding(c),
            )
            for c in shown
        }
        gaps = {c: max(header.sectionSizeHint(c) - values[c], 0) for c in shown}
        names = max(table.sizeHintForColumn(0), MIN_COLUMN)
        spare = max(table.viewport().width() - names - sum(values.values()), 0)
        share = min(spare / sum(gaps.values()), 1.0) if sum(gaps.values()) else 0.0
        widths = {c: values[c] + int(gaps[c] * share) for c in shown}
        widths[0] = max(names, table.viewport().width() - sum(widths.values()))
        for column, width in widths.items():
            table.setColumnWidth(column, width)
        wrapped = [
            words.boundingRect(
                QRect(0, 0, max(width - self._padding(column), 1), 1 << 16),
                Qt.AlignCenter | Qt.TextWordWrap,
                REPLAY_COLUMNS[column],
            ).height()
            for column, width in widths.items()
        ]
        header.setFixedHeight(max(wrapped) + HEADER_MARGIN)

    def _padding(self, column: int) -> int:
        """Pixels of a header section that are not its text: the style's margins, and the
        sort arrow on the column the table is sorted by."""
        style, header = self.table.style(), self.table.horizontalHeader()
        margin = style.pixelMetric(QStyle.PM_HeaderMargin, None, header)
        arrow = style.pixelMetric(QStyle.PM_HeaderMarkSize, None, header) + margin
        return 2 * margin + (arrow if column == header.sortIndicatorSection() else 0) + 2

    def show_failure(self, message_id: int | None, message: str) -> None:
        """The replay did not run: say why, and Replay can be pressed again."""
        if message_id is not None and message_id != self.message_id:
            return
        self.show_results(None, [])
        self.status.setText(message)

    def chosen(self) -> ReplayOutcome | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        index = self.table.item(rows[0].row(), 0).data(Qt.UserRole)
        return self.rows[index][0]

    def _selected(self) -> None:
        has = self.chosen() is not None
        self.highlight_button.setEnabled(has)
        self.apply_button.setEnabled(has)
        self.actual_button.setEnabled(self.message_id is not None)

    def _highlight(self) -> None:
        if self.chosen() is not None and self.message_id is not None:
            self.highlightRequested.emit(self.message_id, self.chosen())


class Inspector(QWidget):
    """Lists the session's answers; the ticked ones are drawn in both charts."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("inspector")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        hint = QLabel("Tick answers to compare their drafters.")
        hint.setObjectName("hint")
        small_print(hint)
        hint.setWordWrap(True)
        layout.addWidget(hint)
        self.list = QListWidget()
        self.list.setMaximumHeight(90)
        self.list.setAccessibleName("Answers to inspect")
        self.list.itemChanged.connect(self._ticked)
        layout.addWidget(self.list)
        self.positions = BarChart("Acceptance by draft position", "position in the draft")
        self.positions.setToolTip(DEFINITIONS["per_position_acceptance"])
        self.lengths = BarChart("Accepted drafts per pass", "drafted tokens accepted in a pass")
        self.lengths.setToolTip(DEFINITIONS["accepted_length_counts"])
        self.summary = QLabel()
        self.summary.setObjectName("hint")
        small_print(self.summary)
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.summary.setToolTip(
            "\n".join(f"{words}: {DEFINITIONS[key]}" for key, words in FIGURE_WORDS)
        )
        layout.addWidget(self.summary)
        self.replay = ReplayPanel()
        layout.addWidget(self.replay, 2)
        layout.addWidget(self.positions, 1)
        layout.addWidget(self.lengths, 1)
        self._stats: dict[int, dict] = {}

    def set_answers(
        self, answers: list[tuple[int, str, dict]], checked: set[int] | None = None
    ) -> None:
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
        self._ticked()

    def checked_ids(self) -> set[int]:
        return {
            self.list.item(i).data(Qt.UserRole)
            for i in range(self.list.count())
            if self.list.item(i).checkState() == Qt.Checked
        }

    def inspect(self, message_id: int, only: bool = True) -> None:
        self.list.blockSignals(True)
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.UserRole) == message_id:
                item.setCheckState(Qt.Checked)
                self.list.scrollToItem(item)
                self.replay.set_message(message_id, item.text())
            elif only:
                item.setCheckState(Qt.Unchecked)
        self.list.blockSignals(False)
        self._ticked()

    def _ticked(self, *_) -> None:
        """The replay follows the ticks: it keeps its answer while that stays ticked, else
        takes the last one ticked (none: it says to tick one)."""
        ticked = [
            self.list.item(i)
            for i in range(self.list.count())
            if self.list.item(i).checkState() == Qt.Checked
        ]
        if self.replay.message_id not in {item.data(Qt.UserRole) for item in ticked}:
            last = ticked[-1] if ticked else None
            self.replay.set_message(
                last.data(Qt.UserRole) if last else None, last.text() if last else ""
            )
        self.refresh()

    def refresh(self) -> None:
        """Draw the ticked answers again (after a theme change, say)."""
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
        self.positions.set_data(
            [str(i + 1) for i in range(longest)],
            [Series(name, position_series(s)) for name, s in chosen],
        )
        longest = max((len(length_series(s)) for _, s in chosen), default=0)
        self.lengths.set_data(
            [str(i) for i in range(longest)], [Series(name, length_series(s)) for name, s in chosen]
        )
        self.summary.setText("<br>".join(figures_in_words(name, stats) for name, stats in chosen))
        self.summary.setVisible(bool(chosen))
