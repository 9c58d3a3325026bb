"""Screenshots of the person's own presets (saved, listed, the name dialog, a refused and a
replaced name) and of a chat's answer format (JSON object, a refused schema, a schema in
use), in light and dark at 600 and 1280 px, from a scripted engine (no model):

    QT_QPA_PLATFORM=offscreen python -m tests.screenshot_presets --out /tmp/shots
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from .scripted_engine import END, ScriptedService, answer_events
from .screenshot_matrix import main, opened, settle

SIZES = (600, 1280)
JSON_ANSWER = [
    (0, [('{"city": "Paris",', False)]),
    (0, [(' "people": 2}', False)]),
    (0, [(END, False)]),
]
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "people": {"type": "integer"}},
    "required": ["city", "people"],
}


def dialogs(*steps) -> None:
    """For each (path, act) in turn: once a new modal dialog is up, save it over the window
    to ``path``, then ``act`` on it."""
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QPainter
    from PySide6.QtWidgets import QApplication

    if not steps:
        return
    (path, act), rest = steps[0], steps[1:]
    before = QApplication.activeModalWidget()

    def poll():
        box = QApplication.activeModalWidget()
        if box is None or box is before:
            QTimer.singleShot(20, poll)
            return
        QApplication.processEvents()
        window = box.parentWidget().window()
        shot = window.grab()
        painter = QPainter(shot)
        painter.drawPixmap(window.mapFromGlobal(box.mapToGlobal(box.rect().topLeft())), box.grab())
        painter.end()
        shot.save(path)
        dialogs(*rest)
        act(box)

    QTimer.singleShot(50, poll)


async def capture(width: int, theme: str, out: str) -> None:
    from PySide6.QtWidgets import QApplication, QLineEdit

    from app.__main__ import _save

    service = ScriptedService()
    application = await opened(width, theme, "scripted", service)
    window, controller = application.window, application.controller
    name = f"{out}/h61-presets-{width}-{theme}"
    panel = window.settings_panel
    window.show_settings()
    controller.update_settings(replace(controller.settings, temperature=0.3, top_k=40))
    await settle()

    def typed(text):
        def act(box):
            box.findChild(QLineEdit).setText(text)
            box.accept()

        return act

    def pressed(label):
        def act(box):
            [button] = [b for b in box.buttons() if b.text().replace("&", "") == label]
            button.click()

        return act

    dialogs((f"{name}-save-dialog.png", typed("Careful notes")))
    panel.save_preset()
    await settle()
    _save(window, f"{name}-saved.png")
    panel.preset.showPopup()
    await settle()
    popup = QApplication.activePopupWidget()
    if popup is not None:
        popup.grab().save(f"{name}-list.png")
        panel.preset.hidePopup()
    dialogs(
        (f"{name}-name-creative.png", typed("creative")),
        (f"{name}-built-in-refused.png", lambda box: box.accept()),
    )
    panel.save_preset()
    await settle()
    dialogs(
        (f"{name}-name-again.png", typed("careful notes")),
        (f"{name}-replace-asked.png", pressed("Cancel")),
    )
    panel.save_preset()
    await settle()

    bar = window.answer_format_bar
    bar.kind.setCurrentIndex(bar.kind.findText("JSON object"))
    bar.kind.activated.emit(bar.kind.currentIndex())
    await settle()
    _save(window, f"{name}-json-object.png")
    bar.kind.setCurrentIndex(bar.kind.findText("JSON schema…"))
    bar.kind.activated.emit(bar.kind.currentIndex())
    bar.editor.setPlainText('{"type": "object", "properties": {"city": ')
    bar.use_schema()
    await settle()
    _save(window, f"{name}-schema-refused.png")
    bar.editor.setPlainText(json.dumps(SCHEMA, indent=2))
    bar.use_schema()
    service.queue(answer_events(JSON_ANSWER))
    await window.send("Which city, and how many people?")
    await settle()
    _save(window, f"{name}-schema-in-use.png")
    bar.kind.activated.emit(bar.kind.currentIndex())  # chosen again: its editor unfolds
    await settle()
    _save(window, f"{name}-schema-edit.png")
    await application.close()


if __name__ == "__main__":
    sys.exit(main("tests.screenshot_presets", SIZES, capture))
