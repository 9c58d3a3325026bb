"""The model picker at the top of the chat: the loaded model's name, the installed models
in its menu, loading one the way Installed models → Load does, and no switching while an
answer is written."""

from __future__ import annotations

import asyncio

from app.views.model_picker import short_name

from .scripted_engine import answer_events
from .test_app_downloads import folders  # noqa: F401
from .test_app_views import SIMPLE, app, ask, loop, wait  # noqa: F401


def menu_entries(picker) -> dict:
    """The picker menu's entries as they are now (filled first), by their text."""
    picker.fill_menu()
    return {action.text(): action for action in picker.menu.actions() if action.text()}


def test_the_name_is_the_models_own_and_its_weights():
    facts = {"weights": "4-bit (group 64)"}
    assert short_name("mlx-community/SmolLM2-135M-Instruct", facts) == (
        "SmolLM2-135M-Instruct · 4-bit"
    )
    assert short_name("/models/Qwen3-0.6B/", {"weights": "float32"}) == "Qwen3-0.6B · float32"
    assert short_name("scripted-model", {}) == "scripted-model"


def test_the_picker_lists_installed_models_and_loads_the_one_chosen(app, qtbot, folders):
    models, downloads, _ = folders
    (downloads / "owner--half").mkdir()  # a download that stopped part-way cannot load
    (downloads / "owner--half" / "model.safetensors.part").write_bytes(b"z")
    picker = app.window.model_presenter.picker
    assert picker.button.text().startswith("scripted-model")  # what start() loaded
    loaded = models / "SmolLM2-135M-Instruct-float32-v1"
    app.controller.models.model_path = str(loaded)
    picker.loaded_path = str(loaded)
    entries = menu_entries(picker)
    assert list(entries) == [
        "SmolLM2-135M-Instruct-float32-v1 (converted)",
        "owner/small",
        "Download a model…",
        "Search Hugging Face…",
        "Open a folder…",
        "Connect to server…",
    ]
    assert entries["SmolLM2-135M-Instruct-float32-v1 (converted)"].isChecked()
    assert not entries["owner/small"].isChecked()
    loads = len(app.scripted.loads)
    entries["owner/small"].trigger()  # ModelControl.load_model, as Installed models → Load
    qtbot.waitUntil(lambda: len(app.scripted.loads) > loads)
    assert app.scripted.loads[-1] == "owner/small"
    qtbot.waitUntil(lambda: not app.controller.models.loading)
    assert app.controller.settings.model == "owner/small"  # remembered, as any load
    assert picker.button.isEnabled() and picker.button.text().startswith("scripted-model")


def test_the_picker_offers_the_other_ways_to_get_a_model(app, qtbot, monkeypatch, tmp_path):
    from PySide6.QtWidgets import QFileDialog

    from app.views.model_catalog import ModelCatalogDialog

    window = app.window
    entries = menu_entries(window.model_presenter.picker)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a: str(tmp_path))
    entries["Open a folder…"].trigger()
    qtbot.waitUntil(lambda: app.scripted.loads[-1] == str(tmp_path))
    qtbot.waitUntil(lambda: not app.controller.models.loading)
    asked = []
    monkeypatch.setattr(window, "ask_server", lambda *a: asked.append(a))
    entries["Connect to server…"].trigger()
    assert len(asked) == 1  # the server dialog, with the remembered address and key
    entries["Download a model…"].trigger()
    catalog = window.findChild(ModelCatalogDialog)
    assert catalog is not None and catalog.isVisible()
    catalog.close()


def test_the_picker_is_disabled_while_an_answer_is_written(app, qtbot):
    picker = app.window.model_presenter.picker
    gate = asyncio.Event()
    events = answer_events(SIMPLE)
    app.scripted.queue([events[0], gate, *events[1:]])
    task = app.window.send("a long question")
    qtbot.waitUntil(lambda: app.controller.busy)
    assert not picker.button.isEnabled()
    gate.set()
    wait(qtbot, task)
    assert picker.button.isEnabled()
