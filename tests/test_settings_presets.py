"""Settings presets and "Reset to defaults": what the engine then receives, and a change
made after a preset is kept and saved."""

from __future__ import annotations

import json
from dataclasses import replace

from app.storage.settings import (
    PRESETS,
    AppSettings,
    SettingsStore,
    preset_of,
    reset_to_defaults,
    with_preset,
)

from engine.drafters import DEFAULT_DRAFTER

from .scripted_engine import END, answer_events
from .test_app_views import app, ask, loop  # noqa: F401

HI = [(0, [("Hi", False)]), (0, [(END, False)])]


def test_presets_are_valid_and_balanced_is_the_defaults():
    assert preset_of(AppSettings()) == "Balanced"
    for name in PRESETS:
        settings = with_preset(AppSettings(), name)
        assert settings.problems() == [] and preset_of(settings) == name
    mine = AppSettings(system_prompt="Be terse.", model="/models/m", zoom=1.5, highlight=False)
    creative = with_preset(mine, "Creative")
    assert (creative.system_prompt, creative.model, creative.zoom, creative.highlight) == (
        "Be terse.",
        "/models/m",
        1.5,
        False,
    )  # a preset sets drafting and sampling only
    assert preset_of(replace(creative, temperature=0.5)) is None
    back = reset_to_defaults(replace(creative, temperature=0.5))
    assert back == replace(AppSettings(), model="/models/m", zoom=1.5, highlight=False)


def choose_preset(panel, name):
    index = panel.preset.findText(name)
    panel.preset.setCurrentIndex(index)
    panel.preset.activated.emit(index)  # as when the person picks it from the list


def test_a_preset_reaches_the_engine_and_reset_restores_the_defaults(app, qtbot):
    window, controller = app.window, app.controller
    panel = window.settings_panel
    assert panel.preset.currentText() == "Balanced"

    choose_preset(panel, "Creative")
    assert panel.temperature.value() == 0.8 and panel.draft_count.value() == 8
    ask(qtbot, app, "a poem", answer_events(HI))
    request = app.scripted.requests[-1]
    assert request.sampling.temperature == 0.8 and request.sampling.top_p == 0.95
    assert request.draft.draft_count == 8 and request.max_tokens == 1024

    choose_preset(panel, "Code editing")
    ask(qtbot, app, "edit this", answer_events(HI))
    request = app.scripted.requests[-1]
    assert request.sampling.temperature == 0.0 and request.draft.draft_count == 64
    assert request.draft.ngram_order == 8 and request.max_tokens == 2048

    panel.system_prompt.setPlainText("Answer in French.")
    panel.flush()
    panel.reset_button.click()
    assert panel.preset.currentText() == "Balanced"
    assert panel.system_prompt.toPlainText() == AppSettings().system_prompt
    ask(qtbot, app, "hello", answer_events(HI))
    request = app.scripted.requests[-1]
    assert request.draft == replace(AppSettings().request([]).draft, drafter=DEFAULT_DRAFTER)
    assert request.sampling == AppSettings().request([]).sampling
    assert request.max_tokens == AppSettings().max_tokens
    assert request.messages[0] == {"role": "system", "content": AppSettings().system_prompt}
    assert controller.settings == AppSettings(drafter=DEFAULT_DRAFTER, model="scripted")


def test_a_change_after_a_preset_is_kept_and_saved(app, qtbot):
    panel, controller = app.window.settings_panel, app.controller
    choose_preset(panel, "Creative")
    panel.temperature.setValue(1.1)
    assert panel.preset.currentText() == "Custom"
    assert controller.settings.temperature == 1.1 and controller.settings.draft_count == 8
    saved = json.loads(SettingsStore().path.read_text(encoding="utf-8"))
    assert saved["temperature"] == 1.1 and saved["draft_count"] == 8 and saved["top_p"] == 0.95
    ask(qtbot, app, "a poem", answer_events(HI))
    assert app.scripted.requests[-1].sampling.temperature == 1.1
    assert SettingsStore().load() == controller.settings  # as the next start reads it
