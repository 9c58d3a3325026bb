"""Downloads run beside the chat with speed and time left; installed models list their sizes
and can be deleted (never the loaded one, never outside the app's folders)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from PySide6.QtWidgets import QMessageBox

from app.storage.downloads import DownloadMeter, delete_installed, installed_models
from engine.events import DoneEvent, ErrorEvent, ProgressEvent
from engine.models.hub_download import INDEX, download_complete

from .test_app_views import app, ask, loop, plain  # noqa: F401

MB = 1_000_000


def test_speed_and_time_left_follow_the_last_seconds():
    meter = DownloadMeter()
    assert meter.describe("o/m") == "Downloading o/m: starting…"
    meter.update(0, 100 * MB, 0.0)
    meter.update(10 * MB, 100 * MB, 1.0)
    assert meter.speed == pytest.approx(10 * MB)
    assert meter.seconds_left == pytest.approx(9.0)
    assert meter.describe("o/m") == "Downloading o/m: 10% of 100.0 MB · 10.0 MB/s · about 9 s left"
    for second in range(2, 12):  # it slows down: the old fast second leaves the window
        meter.update(10 * MB + (second - 1) * MB, 100 * MB, float(second))
    assert meter.speed == pytest.approx(1 * MB)
    assert "about 1 min left" in meter.describe("o/m")


@pytest.fixture
def folders(tmp_path, monkeypatch):
    models, downloads = tmp_path / "models", tmp_path / "downloads"
    monkeypatch.setenv("DRAFTLESS_MODELS_DIR", str(models))
    monkeypatch.setenv("DRAFTLESS_DOWNLOADS_DIR", str(downloads))
    (models / "SmolLM2-135M-Instruct-float32-v1").mkdir(parents=True)
    (models / "SmolLM2-135M-Instruct-float32-v1" / "model.safetensors").write_bytes(b"x" * 3000)
    (downloads / "owner--small").mkdir(parents=True)
    (downloads / "owner--small" / "model.safetensors").write_bytes(b"y" * 2000)
    (downloads / "owner--small" / ".complete").write_text("")  # the engine marks a finished one
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "thesis.txt").write_text("years of work")
    os.symlink(outside, downloads / "owner--link")  # a link planted in the folder
    return models, downloads, outside


def test_installed_models_have_sizes_and_only_the_apps_folders_are_deleted(folders):
    models, downloads, outside = folders
    found = {m.label: m for m in installed_models()}
    assert set(found) == {"SmolLM2-135M-Instruct-float32-v1 (converted)", "owner/small"}
    assert found["owner/small"].size == 2000 and found["owner/small"].name == "owner/small"
    builtin = found["SmolLM2-135M-Instruct-float32-v1 (converted)"]
    assert builtin.name == "" and builtin.size == 3000
    with pytest.raises(ValueError, match="is loaded"):
        delete_installed(builtin, builtin.path)
    assert builtin.path.exists()
    from app.storage.downloads import InstalledModel

    with pytest.raises(ValueError, match="left alone"):
        delete_installed(InstalledModel("x", "x", downloads / "owner--link", 0), None)
    with pytest.raises(ValueError, match="left alone"):
        delete_installed(InstalledModel("x", "x", outside, 0), None)
    assert (outside / "thesis.txt").exists()
    delete_installed(found["owner/small"], builtin.path)
    assert not (downloads / "owner--small").exists()


def test_the_installed_models_dialog_deletes_after_asking(app, qtbot, folders, monkeypatch):
    models, downloads, _ = folders
    loaded = models / "SmolLM2-135M-Instruct-float32-v1"
    app.controller.models.model_path = str(loaded)
    dialog = app.window.model_presenter.show_installed_models()
    assert dialog.table.rowCount() == 2
    assert dialog.table.item(0, 0).text().endswith("— loaded")
    assert dialog.table.item(1, 1).text() == "2.0 KB" and "5.0 KB in all" in dialog.total.text()
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.No)
    dialog.table.selectRow(1)
    dialog.delete_button.click()
    assert (downloads / "owner--small").exists()  # said no
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.Yes)
    dialog.delete_button.click()
    assert not (downloads / "owner--small").exists() and dialog.table.rowCount() == 1
    dialog.table.selectRow(0)
    dialog.delete_button.click()
    assert loaded.exists() and "load another model first" in dialog.message.text()
    dialog.load_button.click()
    qtbot.waitUntil(lambda: app.scripted.loads and app.scripted.loads[-1] is None)


def test_a_download_runs_in_the_status_bar_while_the_chat_answers(app, qtbot):
    window = app.window
    gate = asyncio.Event()
    app.scripted.download_script = [
        ProgressEvent("download", 0, 4 * MB, "Downloading owner/model"),
        ProgressEvent("download", 1 * MB, 4 * MB, "Downloading owner/model"),
        gate,
        DoneEvent("downloaded", "/downloads/owner--model", [], []),
    ]
    app.controller.models.choose("owner/model")
    qtbot.waitUntil(lambda: window.download_bar.isVisible())
    qtbot.waitUntil(lambda: "25% of 4.0 MB" in window.download_bar.label.text())
    ask(qtbot, app, "still there?", plain("yes"))  # chatting goes on
    assert window.transcript.views[-1].text == "yes"
    assert app.scripted.loads == [] or app.scripted.loads[-1] != "owner/model"
    gate.set()
    qtbot.waitUntil(lambda: not window.download_bar.isVisible())
    qtbot.waitUntil(lambda: app.scripted.loads[-1] == "owner/model")  # loaded once here
    qtbot.waitUntil(lambda: not app.controller.models.loading)


def test_a_cancelled_download_says_so_and_loads_nothing(app, qtbot):
    window = app.window
    gate = asyncio.Event()
    app.scripted.download_script = [
        ProgressEvent("download", 1 * MB, 4 * MB, "Downloading owner/model"),
        gate,
        ErrorEvent("Download of owner/model cancelled; choose it again to resume."),
    ]
    loads = len(app.scripted.loads)
    app.controller.models.choose("owner/model")
    qtbot.waitUntil(lambda: window.download_bar.isVisible())
    window.download_bar.cancel_button.click()
    assert app.controller.models.download_stream.cancelled
    gate.set()
    qtbot.waitUntil(lambda: not window.download_bar.isVisible())
    qtbot.waitUntil(lambda: "cancelled" in window.banner.label.text())
    assert len(app.scripted.loads) == loads


@pytest.mark.parametrize(
    "index,complete",
    [
        ({"weight_map": {"a": "model-1.safetensors"}}, True),
        (None, True),  # no index: one weights file is enough
        ({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}, False),
        ({"weight_map": {"a": "../outside.safetensors"}}, False),  # names a file elsewhere
        ({"weight_map": {"a": 7}}, False),
        ({"weight_map": {}}, False),
        ({"weight_map": ["model-1.safetensors"]}, False),
        ([], False),
        ("{not json", False),
        ("fifo", False),  # not a regular file: refused, never waited on
    ],
)
def test_a_marked_download_is_complete_only_when_its_index_names_files_it_holds(
    tmp_path, index, complete
):
    """The index is read from the download folder: whatever it holds gives a yes or no."""
    folder = tmp_path / "owner--model"
    folder.mkdir()
    (folder / ".complete").write_text("")
    (folder / "model-1.safetensors").write_bytes(b"w")
    (tmp_path / "outside.safetensors").write_bytes(b"w")
    path = folder / INDEX
    if index == "fifo":
        os.mkfifo(path)
    elif isinstance(index, str):
        path.write_text(index)
    elif index is not None:
        path.write_text(json.dumps(index))
    assert download_complete(folder) is complete
    (folder / ".complete").unlink()  # huggingface_hub did not finish: never complete
    assert download_complete(folder) is False
