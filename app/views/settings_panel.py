"""The settings side panel: model, presets, drafting and sampling. Changes apply to the
next message.

Every numeric field is a spin box bounded by the engine's ranges, so out-of-range input
cannot be entered at all. The drafter list comes from the engine.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QInputDialog,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from .flow_layout import FlowLayout
from .keyboard import tab_leaves
from .zoom import keep_lines, small_print
from ..storage.settings import (
    CUSTOM,
    PRESETS,
    REPEAT_PENALTY_RANGE,
    STOP_STRINGS_RULE,
    TEMPERATURE_RANGE,
    TOP_P_RANGE,
    AppSettings,
    all_presets,
    preset_name,
    preset_of,
    reset_to_defaults,
    stop_strings_from_text,
    stop_strings_text,
    user_preset_named,
    with_preset,
    with_saved_preset,
    without_preset,
)
from .system_prompt import EDITOR_LINES, TYPING_PAUSE_MS

STOP_STRING_LINES = 2.5  # two stop strings in sight, and a hint that more scroll


def button(text: str, tip: str, action) -> QPushButton:
    """A push button with its tooltip, calling ``action`` (a slot or a signal) when clicked."""
    pushed = QPushButton(text)
    pushed.setToolTip(tip)
    pushed.clicked.connect(action)
    return pushed


def wrapping_row(*buttons: QPushButton) -> QWidget:
    """``buttons`` in a row that wraps, so the panel fits beside the chat at 600 px."""
    row = QWidget()
    layout = FlowLayout(row, spacing=6, align_right=False)
    for each in buttons:
        layout.addWidget(each)
    return row


class SettingsPanel(QScrollArea):
    settingsEdited = Signal(object)  # AppSettings
    openFolderRequested = Signal()
    hubRequested = Signal()
    embeddedRequested = Signal()

    def __init__(self, drafters: dict[str, str], default_drafter: str, parent=None):
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self.setAccessibleName("Settings")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.default_drafter = default_drafter
        self._settings = AppSettings()
        self._listed: dict[str, dict] = {}  # the user presets the preset list shows
        self._loading = False
        inner = QWidget()
        layout = QVBoxLayout(inner)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(10)
        layout.addWidget(self._model_box())
        layout.addWidget(self._preset_box())
        layout.addWidget(self._drafting_box(drafters))
        layout.addWidget(self._sampling_box())
        layout.addWidget(self._prompt_box())
        note = QLabel("Changes apply to the next message.")
        note.setObjectName("hint")
        small_print(note)
        layout.addWidget(note)
        layout.addStretch(1)
        self.setWidget(inner)

        self._connect_edits()

    def _model_box(self) -> QGroupBox:
        """The loaded model, its speculation and where another comes from."""
        model_box = QGroupBox("Model")
        model_layout = QVBoxLayout(model_box)
        self.model_name = QLabel("Loading…")
        self.model_name.setObjectName("modelName")
        self.model_name.setWordWrap(True)
        self.model_name.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.speculation = QLabel()
        self.speculation.setObjectName("hint")
        small_print(self.speculation)
        self.speculation.setWordWrap(True)
        model_layout.addWidget(self.model_name)
        model_layout.addWidget(self.speculation)
        self.folder_button = button(
            "Folder…", "Use a local mlx-lm model folder", self.openFolderRequested
        )
        self.hub_button = button(
            "Hugging Face…", "Download an mlx-lm model by its Hugging Face id", self.hubRequested
        )
        self.embedded_button = button(
            "Built-in", "Use the embedded SmolLM2-135M-Instruct", self.embeddedRequested
        )
        model_layout.addWidget(
            wrapping_row(self.folder_button, self.hub_button, self.embedded_button)
        )
        return model_box

    def _preset_box(self) -> QGroupBox:
        """Presets (built-in, then the user's own), saving and deleting the user's own, and
        Reset to defaults."""
        preset_box = QGroupBox("Preset")
        column = QVBoxLayout(preset_box)
        self.preset = QComboBox()
        self.preset.setAccessibleName("Preset")
        self.preset.setToolTip(
            "Drafting and sampling values for a kind of work; the model and the system prompt "
            "stay. Any value changed afterwards is kept (the list then says Custom)."
        )
        self._list_presets()
        self.preset.activated.connect(self._preset_chosen)
        column.addWidget(self.preset)
        self.save_preset_button = button(
            "Save as preset…",
            "Keep the drafting and sampling values below as a preset of your own",
            self.save_preset,
        )
        self.delete_preset_button = button(
            "Delete preset",
            "Remove the chosen preset of your own (the values in use stay)",
            self.delete_preset,
        )
        self.reset_button = button(
            "Reset to defaults",
            "Drafting, sampling and the system prompt back to their defaults (the model stays)",
            self.reset_to_defaults,
        )
        column.addWidget(
            wrapping_row(self.save_preset_button, self.delete_preset_button, self.reset_button)
        )
        return preset_box

    def _list_presets(self) -> None:
        """The built-in presets, a line, the user's own, then Custom (not a choice)."""
        self.preset.clear()
        self.preset.addItems(list(PRESETS))
        if self._settings.user_presets:
            self.preset.insertSeparator(self.preset.count())
            self.preset.addItems(list(self._settings.user_presets))
        self.preset.addItem(CUSTOM)
        self.preset.model().item(self.preset.count() - 1).setEnabled(False)
        self._listed = dict(self._settings.user_presets)

    def _drafting_box(self, drafters: dict[str, str]) -> QGroupBox:
        """The drafter and its counts."""
        draft_box = QGroupBox("Drafting")
        form = QFormLayout(draft_box)
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self.drafter = QComboBox()
        for name, summary in drafters.items():
            self.drafter.addItem(name, name)
            self.drafter.setItemData(self.drafter.count() - 1, summary, Qt.ToolTipRole)
        form.addRow("Drafter", self.drafter)
        self.drafter_summary = QLabel()
        self.drafter_summary.setObjectName("hint")
        small_print(self.drafter_summary)
        self.drafter_summary.setWordWrap(True)
        form.addRow(self.drafter_summary)
        low, high = AppSettings.RANGES["draft_count"]
        self.draft_count = self._spin(low, high, "Tokens guessed per pass (at most)")
        form.addRow("Draft count", self.draft_count)
        low, high = AppSettings.RANGES["ngram_order"]
        self.ngram_order = self._spin(low, high, "Longest n-gram the drafter matches")
        form.addRow("N-gram order", self.ngram_order)
        low, high = AppSettings.RANGES["ngram_min"]
        self.ngram_min = self._spin(
            low, high, "Shortest n-gram the drafter falls back to (cannot exceed the order)"
        )
        form.addRow("N-gram min", self.ngram_min)
        self.adaptive = QCheckBox("Adaptive draft length")
        self.adaptive.setToolTip("Let the engine shorten drafts when guesses keep failing")
        form.addRow(self.adaptive)
        return draft_box

    def _sampling_box(self) -> QGroupBox:
        """Temperature and the other samplers, stop strings, max tokens."""
        sample_box = QGroupBox("Sampling")
        form = QFormLayout(sample_box)
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self.temperature = self._double(*TEMPERATURE_RANGE, 0.1, "0 = greedy (deterministic)")
        form.addRow("Temperature", self.temperature)
        self.top_p = self._double(*TOP_P_RANGE, 0.05, "Nucleus sampling threshold")
        form.addRow("Top-p", self.top_p)
        low, high = AppSettings.RANGES["top_k"]
        self.top_k = self._spin(low, high, "Sample from the k most likely tokens only; 0 = off")
        self.top_k.setSpecialValueText("Off")
        form.addRow("Top-k", self.top_k)
        self.min_p = self._double(
            *AppSettings.RANGES["min_p"],
            0.01,
            "Drop tokens less likely than this share of the most likely one; 0 = off",
        )
        self.min_p.setSpecialValueText("Off")
        form.addRow("Min-p", self.min_p)
        self.repetition_penalty = self._double(
            *REPEAT_PENALTY_RANGE,
            0.05,
            "Make tokens already in the chat less likely (1.1 is a light touch); 1 = off",
        )
        self.repetition_penalty.setSpecialValueText("Off")
        form.addRow("Repeat penalty", self.repetition_penalty)
        self.stop_strings = QPlainTextEdit()
        self.stop_strings.setObjectName("stopStrings")
        self.stop_strings.setPlaceholderText("One a line; \\n is a line break")
        self.stop_strings.setToolTip(
            "The answer ends before the first of these it writes; "
            f"{STOP_STRINGS_RULE}. Write a line break as \\n, a tab as \\t, a backslash as \\\\."
        )
        keep_lines(self.stop_strings, STOP_STRING_LINES)
        tab_leaves(self.stop_strings)
        form.addRow("Stop strings", self.stop_strings)
        low, high = AppSettings.RANGES["max_tokens"]
        self.max_tokens = self._spin(low, high, "Longest answer, in tokens")
        self.max_tokens.setSingleStep(64)
        form.addRow("Max tokens", self.max_tokens)
        return sample_box

    def _prompt_box(self) -> QGroupBox:
        """The system prompt new chats start with."""
        prompt_box = QGroupBox("System prompt for new chats")
        prompt_layout = QVBoxLayout(prompt_box)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("Optional instructions sent before the chat")
        self.system_prompt.setToolTip(
            "What a new chat starts with; each chat changes its own in the line above it"
        )
        keep_lines(self.system_prompt, EDITOR_LINES)
        self.system_prompt.setAccessibleName("System prompt for new chats")
        tab_leaves(self.system_prompt)
        prompt_layout.addWidget(self.system_prompt)
        return prompt_box

    def _connect_edits(self) -> None:
        """Every field's change is an edit (typing in a text field: after a pause)."""
        self._prompt_timer = QTimer(self)
        self._prompt_timer.setSingleShot(True)
        self._prompt_timer.setInterval(TYPING_PAUSE_MS)
        self._prompt_timer.timeout.connect(self._emit)
        self.drafter.currentIndexChanged.connect(self._emit)
        for spin in (
            self.draft_count,
            self.ngram_order,
            self.ngram_min,
            self.max_tokens,
            self.temperature,
            self.top_p,
            self.top_k,
            self.min_p,
            self.repetition_penalty,
        ):
            spin.valueChanged.connect(self._emit)
        self.adaptive.toggled.connect(self._emit)
        self.system_prompt.textChanged.connect(self._prompt_timer.start)
        self.stop_strings.textChanged.connect(self._prompt_timer.start)
        self.ngram_order.valueChanged.connect(lambda v: self.ngram_min.setMaximum(v))

    def _spin(self, low: int, high: int, tip: str) -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(low, high)
        spin.setToolTip(f"{tip} ({low}–{high})")
        spin.setKeyboardTracking(False)
        return spin

    def _double(self, low: float, high: float, step: float, tip: str) -> QDoubleSpinBox:
        spin = QDoubleSpinBox()
        spin.setRange(low, high)
        spin.setSingleStep(step)
        spin.setDecimals(2)
        spin.setToolTip(f"{tip} ({low:g}–{high:g})")
        spin.setKeyboardTracking(False)
        return spin

    def set_settings(self, settings: AppSettings) -> None:
        self._loading = True
        self._settings = settings
        name = (
            settings.drafter
            if self.drafter.findData(settings.drafter) >= 0
            else self.default_drafter
        )
        self.drafter.setCurrentIndex(max(self.drafter.findData(name), 0))
        self.draft_count.setValue(settings.draft_count)
        self.ngram_order.setValue(settings.ngram_order)
        self.ngram_min.setMaximum(settings.ngram_order)
        self.ngram_min.setValue(settings.ngram_min)
        self.adaptive.setChecked(settings.adaptive)
        self.temperature.setValue(settings.temperature)
        self.top_p.setValue(settings.top_p)
        self.top_k.setValue(settings.top_k)
        self.min_p.setValue(settings.min_p)
        self.repetition_penalty.setValue(settings.repetition_penalty)
        self.max_tokens.setValue(settings.max_tokens)
        if stop_strings_from_text(self.stop_strings.toPlainText()) != settings.stop_strings:
            self.stop_strings.setPlainText(stop_strings_text(settings.stop_strings))
        if self.system_prompt.toPlainText() != settings.system_prompt:
            self.system_prompt.setPlainText(settings.system_prompt)
        self._prompt_timer.stop()
        self.drafter_summary.setText(self.drafter.currentData(Qt.ToolTipRole) or "")
        self._show_preset()
        self._loading = False

    def _show_preset(self) -> None:
        if self._listed != self._settings.user_presets:
            self._list_presets()
        name = preset_of(self.settings()) or CUSTOM
        self.preset.setCurrentText(name)
        self.delete_preset_button.setEnabled(name in self._settings.user_presets)

    def _apply(self, settings: AppSettings) -> None:
        """Show ``settings`` and hand them on as one edit."""
        self._prompt_timer.stop()  # a prompt typed just before is part of what is replaced
        self.set_settings(settings)
        self._settings = self.settings()
        self.settingsEdited.emit(self._settings)

    def _preset_chosen(self, index: int) -> None:
        name = self.preset.itemText(index)
        if name in all_presets(self._settings):
            self._apply(with_preset(self.settings(), name))

    def save_preset(self) -> None:
        """Ask a name and keep the values in use under it: a built-in name is refused, one
        of the user's own is replaced once the person says so."""
        self.flush()
        typed, ok = QInputDialog.getText(
            self, "Save as preset", "Name for a preset of these drafting and sampling values:"
        )
        if not ok:
            return
        try:
            name = preset_name(typed)
        except ValueError as error:
            QMessageBox.warning(self, "Preset not saved", f"The preset was not saved: {error}.")
            return
        existing = user_preset_named(self._settings, name)
        if existing is not None:
            question = (
                f"You already have a preset called “{existing}”. Replace its values with the "
                "ones in use now?"
            )
            if not self._confirm("Replace preset", question, "Replace"):
                return
        self._apply(with_saved_preset(self.settings(), name))

    def delete_preset(self) -> None:
        """Remove the chosen preset of the user's own, once the person confirms."""
        name = self.preset.currentText()
        if name not in self._settings.user_presets:
            return
        question = f"Delete your preset “{name}”? The values in use now stay as they are."
        if self._confirm("Delete preset", question, "Delete"):
            self._apply(without_preset(self.settings(), name))

    def _confirm(self, title: str, question: str, action: str) -> bool:
        box = QMessageBox(QMessageBox.Question, title, question, QMessageBox.Cancel, self)
        doing = box.addButton(action, QMessageBox.AcceptRole)
        box.setDefaultButton(QMessageBox.Cancel)
        box.exec()
        return box.clickedButton() is doing

    def reset_to_defaults(self) -> None:
        self._apply(reset_to_defaults(self.settings()))

    def settings(self) -> AppSettings:
        return replace(
            self._settings,
            drafter=self.drafter.currentData() or self.default_drafter,
            draft_count=self.draft_count.value(),
            ngram_order=self.ngram_order.value(),
            ngram_min=min(self.ngram_min.value(), self.ngram_order.value()),
            adaptive=self.adaptive.isChecked(),
            temperature=round(self.temperature.value(), 2),
            top_p=round(self.top_p.value(), 2),
            top_k=self.top_k.value(),
            min_p=round(self.min_p.value(), 2),
            repetition_penalty=round(self.repetition_penalty.value(), 2),
            stop_strings=stop_strings_from_text(self.stop_strings.toPlainText()),
            max_tokens=self.max_tokens.value(),
            system_prompt=self.system_prompt.toPlainText(),
        )

    def _emit(self, *_):
        self.drafter_summary.setText(self.drafter.currentData(Qt.ToolTipRole) or "")
        if not self._loading:
            self._settings = self.settings()
            self._show_preset()
            self.settingsEdited.emit(self._settings)

    def flush(self) -> None:
        """Apply a system prompt or stop strings still waiting for their typing pause."""
        if self._prompt_timer.isActive():
            self._prompt_timer.stop()
            self._emit()

    def show_model(self, name: str, path: str, speculation: str, details: str = "") -> None:
        self.model_name.setText(f"<b>{name}</b><br>{details}" if details else f"<b>{name}</b>")
        self.model_name.setToolTip(path)
        self.speculation.setText(
            f"Speculation {speculation}: drafts are verified and rolled back as needed."
            if speculation.startswith("on")
            else f"Speculation {speculation}."
        )

    def set_loading(self, loading: bool, what: str = "") -> None:
        for button in (self.folder_button, self.hub_button, self.embedded_button):
            button.setEnabled(not loading)
        if loading:
            self.model_name.setText(f"Loading {what}…")
            self.speculation.setText("")

    def show_no_model(self, why: str) -> None:
        self.model_name.setText("No model loaded")
        self.speculation.setText(why)
