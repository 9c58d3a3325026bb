"""The person's own presets: saved from the settings panel under a name they type, listed
after the built-in ones, chosen, replaced and deleted through the panel's buttons and its
dialogs, kept in the settings file; a damaged one in the file is left out and kept aside."""

from __future__ import annotations

import json
from dataclasses import replace

from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QInputDialog, QLineEdit, QMessageBox

from app.storage.settings import PRESET_FIELDS, PRESETS, AppSettings, SettingsStore, preset_of

from .scripted_engine import END, answer_events
from .test_app_views import app, ask, loop  # noqa: F401

HI = [(0, [("Hi", False)]), (0, [(END, False)])]


def when_modal(kind, act, seen=None):
    """Run ``act(box)`` on the next modal dialog of ``kind`` once it is up."""

    def poll():
        box = QApplication.activeModalWidget()
        if not isinstance(box, kind):
            QTimer.singleShot(20, poll)
            return
        if seen is not None:
            seen.append(box.labelText() if isinstance(box, QInputDialog) else box.text())
        act(box)

    QTimer.singleShot(0, poll)


def type_name(name):
    def act(box):
        field = box.findChild(QLineEdit)
        QTest.keyClicks(field, name)
        QTest.keyClick(field, Qt.Key_Return)

    return act


def press(text):
    def act(box):
        [button] = [b for b in box.buttons() if b.text().replace("&", "") == text]
        QTest.mouseClick(button, Qt.LeftButton)

    return act


def click(button):
    QTest.mouseClick(button, Qt.LeftButton)


def save_as(panel, name, then=None, seen=None):
    when_modal(QInputDialog, type_name(name), seen)
    if then is not None:
        when_modal(QMessageBox, then, seen)
    click(panel.save_preset_button)


def listed(panel):
    return [panel.preset.itemText(i) for i in range(panel.preset.count())]


def pick(qtbot, panel, name):
    """Choose ``name`` in the preset list with the keyboard, as a person can."""
    panel.preset.setFocus()
    key = Qt.Key_Down if panel.preset.findText(name) > panel.preset.currentIndex() else Qt.Key_Up
    for _ in range(panel.preset.count()):
        if panel.preset.currentText() == name:
            return
        QTest.keyClick(panel.preset, key)
    raise AssertionError(f"{name} is not in the list: {listed(panel)}")


def test_a_saved_preset_is_listed_after_the_built_in_ones_and_applies_its_values(app, qtbot):
    panel, controller = app.window.settings_panel, app.controller
    panel.temperature.setValue(0.3)
    panel.draft_count.setValue(12)
    assert panel.preset.currentText() == "Custom"
    seen = []
    save_as(panel, "  My   notes ", seen=seen)
    assert "Name" in seen[0]
    assert panel.preset.currentText() == "My notes"  # blanks collapsed
    assert listed(panel) == [*PRESETS, "", "My notes", "Custom"]  # "": the separator
    assert panel.delete_preset_button.isEnabled()
    saved = json.loads(SettingsStore().path.read_text(encoding="utf-8"))
    assert saved["user_presets"]["My notes"]["temperature"] == 0.3
    assert set(saved["user_presets"]["My notes"]) == set(PRESET_FIELDS)

    pick(qtbot, panel, "Creative")
    assert panel.temperature.value() == 0.8 and not panel.delete_preset_button.isEnabled()
    panel.system_prompt.setPlainText("Answer in French.")
    panel.flush()
    pick(qtbot, panel, "My notes")
    assert (panel.temperature.value(), panel.draft_count.value()) == (0.3, 12)
    settings = controller.settings
    assert settings.system_prompt == "Answer in French."  # a preset sets its fields only
    assert preset_of(settings) == "My notes"
    ask(qtbot, app, "a question", answer_events(HI))
    request = app.scripted.requests[-1]
    assert request.sampling.temperature == 0.3 and request.draft.draft_count == 12
    assert SettingsStore().load() == settings  # as the next start reads it


def test_a_built_in_name_is_refused_and_the_same_name_asks_to_replace(app, qtbot):
    panel, controller = app.window.settings_panel, app.controller
    seen = []
    save_as(panel, "creative", press("OK"), seen)
    assert "built-in" in seen[-1] and "Creative" in seen[-1]
    assert controller.settings.user_presets == {}
    assert listed(panel) == [*PRESETS, "Custom"]

    panel.temperature.setValue(0.4)
    save_as(panel, "Mine")
    panel.temperature.setValue(0.6)
    save_as(panel, "mine", press("Cancel"), seen)
    assert "already have a preset called “Mine”" in seen[-1]
    assert controller.settings.user_presets["Mine"]["temperature"] == 0.4
    assert panel.preset.currentText() == "Custom"

    save_as(panel, "mine", press("Replace"))
    assert list(controller.settings.user_presets) == ["mine"]
    assert controller.settings.user_presets["mine"]["temperature"] == 0.6
    assert panel.preset.currentText() == "mine"


def test_deleting_a_preset_asks_keeps_the_values_and_is_saved(app, qtbot):
    panel, controller = app.window.settings_panel, app.controller
    panel.top_k.setValue(40)
    save_as(panel, "Top forty")
    when_modal(QMessageBox, press("Cancel"))
    click(panel.delete_preset_button)
    assert "Top forty" in controller.settings.user_presets

    seen = []
    when_modal(QMessageBox, press("Delete"), seen)
    click(panel.delete_preset_button)
    assert "Top forty" in seen[0]
    assert controller.settings.user_presets == {}
    assert controller.settings.top_k == 40  # the values in use stay
    assert listed(panel) == [*PRESETS, "Custom"] and panel.preset.currentText() == "Custom"
    assert not panel.delete_preset_button.isEnabled()
    saved = json.loads(SettingsStore().path.read_text(encoding="utf-8"))
    assert saved["user_presets"] == {}


def test_a_damaged_preset_in_the_file_is_left_out_and_kept_aside(tmp_path):
    good = {name: PRESETS["Creative"][name] for name in PRESET_FIELDS}
    presets = {
        "Good": dict(good, temperature=0.5),
        "Too hot": dict(good, temperature=99.0),
        "Half": {"temperature": 0.2},
        "Balanced": good,  # a built-in name
        "Listed": [1, 2],
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"zoom": 1.25, "user_presets": presets}), encoding="utf-8")
    store = SettingsStore(tmp_path)
    settings = store.load()
    assert settings.zoom == 1.25
    assert settings.user_presets == {"Good": dict(good, temperature=0.5)}
    for name in ("Too hot", "Half", "Balanced", "Listed"):
        assert f"preset '{name}' left out" in store.message
    [aside] = [p for p in tmp_path.iterdir() if p.name != "settings.json"]
    assert json.loads(aside.read_text(encoding="utf-8"))["user_presets"] == presets
    assert SettingsStore(tmp_path).load() == settings and SettingsStore(tmp_path).message is None

    path.write_text(json.dumps({"user_presets": "not presets"}), encoding="utf-8")
    assert SettingsStore(tmp_path).load() == replace(AppSettings(), user_presets={})
