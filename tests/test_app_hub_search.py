"""Search Hugging Face as a person uses it, against a fake HfApi (no network): type a query,
press Enter, open a model, pick a quantization, Download; a newer query drops an older
answer; offline, an HTTP error or no answer is said, and the window never waits on the hub."""

from __future__ import annotations

import asyncio
import threading

import httpx2
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.storage.downloads import installed_models
from app.storage.hub_client import no_answer_message
from app.views.hub_search_view import HubSearchDialog
from engine.events import DoneEvent, ProgressEvent

from .fake_hf_api import FakeHfApi
from .test_app_downloads import folders  # noqa: F401
from .test_app_views import app, loop  # noqa: F401

REPO = "mlx-community/Qwen2.5-1.5B-Instruct-4bit"
MB = 1_000_000


def open_search(app, qtbot, api) -> HubSearchDialog:
    app.window.model_presenter.hub_api = lambda: api
    [entry] = [a for a in app.window.model_menu.actions() if a.text() == "Search Hugging Face…"]
    entry.trigger()
    dialog = app.window.findChild(HubSearchDialog)
    qtbot.waitUntil(dialog.isVisible)
    return dialog


def search(qtbot, dialog, query: str) -> None:
    dialog.query.clear()
    qtbot.keyClicks(dialog.query, query)
    qtbot.keyClick(dialog.query, Qt.Key_Return)


def click_row(qtbot, table, row: int) -> None:
    rect = table.visualItemRect(table.item(row, 0))
    qtbot.mouseClick(table.viewport(), Qt.LeftButton, pos=rect.center())


def column(table, index: int) -> list[str]:
    return [table.item(row, index).text() for row in range(table.rowCount())]


def test_a_model_found_shows_its_quantizations_and_the_one_chosen_downloads(
    app,
    qtbot,
    folders,  # noqa: F811
):
    _, downloads, _ = folders
    api = FakeHfApi()
    dialog = open_search(app, qtbot, api)
    search(qtbot, dialog, "qwen instruct")
    qtbot.waitUntil(lambda: dialog.results.rowCount() == 3)
    results = dialog.results
    assert column(results, 0) == [
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-1.5B-Instruct",
        "Qwen2.5-Coder-0.5B-Instruct",
    ]
    assert column(results, 1) == ["7B", "1.5B", "0.5B"]
    assert column(results, 2) == ["3-bit, 4-bit", "4-bit, 8-bit, bf16", "not stated"]
    assert column(results, 3) == ["259.1k", "106.7k", "540"]
    assert "3 models (6 downloads to choose from)" in dialog.status.text()
    assert api.infos == []  # no sizes asked before a model is opened

    click_row(qtbot, results, 1)
    quantizations = dialog.quantizations
    qtbot.waitUntil(lambda: "asking…" not in column(quantizations, 1))
    assert column(quantizations, 0) == ["4-bit", "8-bit", "bf16"]
    assert column(quantizations, 1) == ["875.0 MB", "1.6 GB", "3.1 GB"]
    assert sorted(api.infos) == sorted(column(quantizations, 3))  # only the opened model's
    assert not dialog.download_button.isEnabled()

    app.scripted.download_script = [
        ProgressEvent("download", 0, 875 * MB, f"Downloading {REPO}"),
        ProgressEvent("download", 219 * MB, 875 * MB, f"Downloading {REPO}"),
        gate := asyncio.Event(),
        DoneEvent("downloaded", str(downloads / REPO.replace("/", "--")), [], []),
    ]
    click_row(qtbot, quantizations, 0)
    assert dialog.download_button.isEnabled()
    qtbot.mouseClick(dialog.download_button, Qt.LeftButton)
    assert not dialog.isVisible()
    bar = app.window.download_bar
    qtbot.waitUntil(lambda: f"Downloading {REPO}: 25% of 875.0 MB" in bar.label.text())
    folder = downloads / REPO.replace("/", "--")  # what the engine writes as it downloads
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"w" * 64)
    (folder / ".complete").write_text("")
    gate.set()
    qtbot.waitUntil(lambda: not bar.isVisible())
    qtbot.waitUntil(lambda: app.scripted.loads[-1] == REPO)  # loaded once it is here
    assert REPO in [m.name for m in installed_models() if m.complete]
    qtbot.waitUntil(lambda: not app.controller.models.loading)


def test_a_new_query_drops_the_answer_to_the_old_one(app, qtbot):
    api = FakeHfApi()
    api.gate = threading.Event()
    dialog = open_search(app, qtbot, api)
    search(qtbot, dialog, "7b")
    qtbot.waitUntil(lambda: len(api.searches) == 1)  # the hub holds it
    assert dialog.message.text() == "Searching Hugging Face for “7b”…"
    search(qtbot, dialog, "coder")  # typing goes on while the hub holds the first
    qtbot.waitUntil(lambda: len(api.searches) == 2)
    api.gate.set()
    qtbot.waitUntil(lambda: dialog.results.rowCount() == 1)
    qtbot.waitUntil(lambda: not any(t.name == "hub-search" for t in threading.enumerate()))
    assert column(dialog.results, 0) == ["Qwen2.5-Coder-0.5B-Instruct"]
    assert "1 model (1 download to choose from)" in dialog.status.text()
    dialog.close()


def test_offline_is_said_with_what_still_works(app, qtbot, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    api = FakeHfApi()
    dialog = open_search(app, qtbot, api)
    search(qtbot, dialog, "qwen")
    qtbot.waitUntil(lambda: dialog.message.text().startswith("Offline"))
    assert dialog.message.isVisible() and not dialog.results.isVisible()
    assert dialog.message.text() == (
        "Offline: Hugging Face cannot be reached (HF_HUB_OFFLINE is set). Your installed "
        "models and the catalog (Model ▸ Download a model…) still work."
    )
    assert api.searches == [] and dialog.results.rowCount() == 0
    monkeypatch.delenv("HF_HUB_OFFLINE")
    api.error = httpx2.ConnectError("[Errno -3] Temporary failure in name resolution")
    search(qtbot, dialog, "qwen")
    qtbot.waitUntil(lambda: "name resolution" in dialog.message.text())
    assert dialog.message.text().startswith("Offline: Hugging Face cannot be reached")
    dialog.close()


def test_an_http_error_or_no_answer_is_said_and_a_late_answer_dropped(app, qtbot):
    from .test_hub_models import http_error

    api = FakeHfApi(error=http_error(503))
    dialog = open_search(app, qtbot, api)
    search(qtbot, dialog, "qwen")
    qtbot.waitUntil(lambda: "HTTP 503" in dialog.message.text())
    assert dialog.message.text().startswith(
        "Hugging Face answered HTTP 503 Service Unavailable: the hub has a problem of its own"
    )
    api.error, api.gate = None, threading.Event()
    dialog.deadline.setInterval(1)  # the hub holds the search past the limit
    search(qtbot, dialog, "qwen")
    qtbot.waitUntil(lambda: dialog.message.text() == no_answer_message())
    api.gate.set()  # its answer comes late
    qtbot.waitUntil(lambda: not any(t.name == "hub-search" for t in threading.enumerate()))
    QApplication.processEvents()  # its answer, sent before the thread ended, is dropped
    assert dialog.message.text() == no_answer_message() and dialog.results.rowCount() == 0
    dialog.close()
