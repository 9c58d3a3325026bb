"""Files attached to a message: read as untrusted input, limited by the model's context
window, sent inside the message and shown as chips."""

from __future__ import annotations

import os
import threading

from PySide6.QtCore import QMimeData, QTimer, QUrl

from app.storage import attachments
from app.storage.attachments import read_attachment, split_message
from app.views import chat_widgets

from .pdf_bytes import blank_pdf, locked_pdf, pages_pdf, text_pdf
from .scripted_engine import answer_events
from .test_app_views import SIMPLE, app, ask, loop, wait  # noqa: F401

REPORT = "# Report\n\nSales rose in ```March``` and \x1b[31mfell\x1b[0m in April.\n"


def test_an_attached_markdown_file_reaches_the_engine_and_shows_as_a_chip(app, qtbot, tmp_path):
    path = tmp_path / "report.md"
    path.write_text(REPORT)
    window = app.window
    composer = window.composer
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    composer.input.insertFromMimeData(mime)  # a drop on the message box attaches the file
    wait(qtbot, composer.read_task)
    # what it costs the context window: estimated, the scripted engine has no tokenizer
    assert [chip.label.text() for chip in composer.chips.chips] == [
        "report.md · 64 bytes · ≈37 tokens"
    ]
    assert composer.input.toPlainText() == ""  # not pasted as a path
    assert composer.chips.chips[0].toolTip().startswith("report.md (")  # its first lines
    assert "\n\n# Report\n\nSales rose" in composer.chips.chips[0].toolTip()
    ask(qtbot, app, "What fell?", answer_events(SIMPLE))
    sent = app.scripted.requests[-1].messages[-1]["content"]
    # the file's own ``` cannot close its block: the fence is longer; the escape is gone
    assert sent == (
        "Attached file report.md (64 bytes):\n````\n# Report\n\nSales rose in ```March``` "
        "and [31mfell[0m in April.\n````\n\nWhat fell?"
    )
    assert composer.attachments == [] and not composer.chips.isVisible()  # sent: cleared
    assert app.controller.session.title == "What fell?"  # named by the words, not the file
    question = window.transcript.views[-2]
    assert [c.label.text() for c in question.files.chips] == ["report.md · 64 bytes"]
    shown = question.body.toPlainText()
    assert shown.strip() == "What fell?" and "Sales" not in shown  # folded, not dumped
    window.show_session(app.controller.session)  # the chat drawn again from the store
    question = window.transcript.views[-2]
    assert [c.label.text() for c in question.files.chips] == ["report.md · 64 bytes"]
    question.edit_button.click()  # Edit puts the file back as a chip
    assert composer.input.toPlainText() == "What fell?" and len(composer.attachments) == 1
    ask(qtbot, app, "What rose?", answer_events(SIMPLE))
    assert "Sales rose" in app.scripted.requests[-1].messages[-1]["content"]


def test_a_file_only_message_is_sent_and_a_chip_removes_its_file(app, qtbot, tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("beta")
    (tmp_path / "wide.txt").write_text("w" * 50_000)  # one huge line
    composer = app.window.composer
    composer.attach_files([tmp_path / "a.txt", tmp_path / "b.txt"])
    wait(qtbot, composer.attach_files([tmp_path / "wide.txt"]))
    assert max(map(len, composer.chips.chips[2].toolTip().splitlines())) <= 101  # cut, with …
    composer.chips.chips[2].remove_button.click()
    composer.chips.chips[0].remove_button.click()
    assert [a.name for a in composer.attachments] == ["b.txt"]
    ask(qtbot, app, "", answer_events(SIMPLE))
    assert app.scripted.requests[-1].messages[-1]["content"] == (
        "Attached file b.txt (4 bytes):\n```\nbeta\n```\n\n"
    )
    assert app.controller.session.title == "b.txt"


def test_binary_and_oversized_files_are_refused_with_a_reason(app, qtbot, tmp_path, monkeypatch):
    composer = app.window.composer
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" * 50)
    wait(qtbot, composer.attach_files([tmp_path / "photo.jpg"]))
    assert composer.attachments == []
    assert composer.notice.text().startswith("photo.jpg is not a text file.")
    assert not composer.notice.isHidden()

    app.controller.models.facts = {"context_length": 2048}  # the loaded model's window
    (tmp_path / "book.txt").write_text("word " * 4000)  # 20,000 characters: ~6,700 tokens
    wait(qtbot, composer.attach_files([tmp_path / "book.txt"]))
    assert composer.attachments == []
    assert composer.notice.text().startswith(
        "book.txt is too long for the model's context window: about 6,667 tokens"
    )
    assert "lower Max tokens" in composer.notice.text()
    (tmp_path / "note.txt").write_text("short note")
    wait(qtbot, composer.attach_files([tmp_path / "note.txt"]))  # a file that fits is taken
    assert [a.name for a in composer.attachments] == ["note.txt"]
    assert composer.notice.isHidden()

    monkeypatch.setattr(attachments, "MAX_FILE_BYTES", 100)  # a file past the read limit
    (tmp_path / "big.md").write_text("x" * 101)
    wait(qtbot, composer.attach_files([tmp_path / "big.md"]))
    assert "big.md cannot be attached: it is larger than 100 bytes" in composer.notice.text()


class SlowReader:
    """``read_attachment`` that holds on until the test lets it go; says whether a read is
    under way."""

    def __init__(self):
        self.release = threading.Event()
        self.inside = threading.Event()

    def __call__(self, path, room, read_pdf):
        self.inside.set()
        self.release.wait(5)  # on the UI thread (the old way) this blocks the window
        try:
            return attachments.read_attachment(path, room, read_pdf)
        finally:
            self.inside.clear()


def test_a_slow_file_is_read_while_the_window_answers_and_send_waits_for_it(
    app, qtbot, tmp_path, monkeypatch
):
    reader = SlowReader()
    monkeypatch.setattr(chat_widgets, "read_attachment", reader)
    (tmp_path / "report.pdf").write_bytes(text_pdf("Quarterly figures rose"))
    composer = app.window.composer
    ticks_while_reading = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks_while_reading.append(reader.inside.is_set()))
    timer.start(10)
    task = composer.attach_files([tmp_path / "report.pdf"])
    qtbot.waitUntil(lambda: True in ticks_while_reading, timeout=3000)  # the loop runs
    timer.stop()
    assert [chip.label.text() for chip in composer.chips.chips] == ["reading report.pdf…"]
    composer.input.setPlainText("What rose?")
    app.scripted.queue(answer_events(SIMPLE))
    composer.send_button.click()  # waits for the file
    assert app.scripted.requests == [] and composer.input.toPlainText() == "What rose?"
    reader.release.set()
    wait(qtbot, task)
    qtbot.waitUntil(lambda: len(app.scripted.requests) == 1 and not app.controller.busy)
    assert app.scripted.requests[0].messages[-1]["content"] == (
        "Attached file report.pdf (597 bytes):\n```\nQuarterly figures rose\n```\n\nWhat rose?"
    )
    assert composer.attachments == [] and composer.input.toPlainText() == ""


def test_a_file_removed_while_it_reads_is_discarded(app, qtbot, tmp_path, monkeypatch):
    reader = SlowReader()
    monkeypatch.setattr(chat_widgets, "read_attachment", reader)
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("beta")
    composer = app.window.composer
    reader.release.set()
    wait(qtbot, composer.attach_files([tmp_path / "a.txt"]))
    reader.release.clear()
    task = composer.attach_files([tmp_path / "b.txt"])
    qtbot.waitUntil(reader.inside.is_set, timeout=3000)
    labels = [chip.label.text() for chip in composer.chips.chips]
    assert labels == ["a.txt · 5 bytes · ≈16 tokens", "reading b.txt…"]
    composer.chips.chips[1].remove_button.click()
    assert [chip.label.text() for chip in composer.chips.chips] == ["a.txt · 5 bytes · ≈16 tokens"]
    reader.release.set()
    wait(qtbot, task)
    assert [a.name for a in composer.attachments] == ["a.txt"]
    assert [chip.label.text() for chip in composer.chips.chips] == ["a.txt · 5 bytes · ≈16 tokens"]


def test_a_pdf_gives_its_text_and_bad_pdfs_say_what_is_wrong(tmp_path):
    (tmp_path / "figures.pdf").write_bytes(text_pdf("Quarterly figures rose by 12 percent"))
    attachment = read_attachment(tmp_path / "figures.pdf")
    assert attachment.text == "Quarterly figures rose by 12 percent"
    assert split_message(attachments.compose("?", [attachment])) == ("?", [attachment])
    refusals = {
        "scan.pdf": (blank_pdf(), "scan.pdf has no text layer"),
        "locked.pdf": (locked_pdf("hidden", "pw"), "locked.pdf is protected by a password"),
        "broken.pdf": (b"%PDF-1.4\nnot really", "broken.pdf could not be read as a PDF"),
    }
    line = "x" * 90  # 90 characters a page: a 200-character room is passed on page 3 of 50
    (tmp_path / "book.pdf").write_bytes(pages_pdf(line, 50))
    refusals["book.pdf"] = (
        pages_pdf(line, 50),
        "book.pdf is too long for the model's context window: over 92 tokens in its first 3 "
        "of 50 pages, and about 66 are left",
    )
    for name, (data, reason) in refusals.items():
        (tmp_path / name).write_bytes(data)
        try:
            read_attachment(tmp_path / name, room=200)
        except attachments.AttachmentError as error:
            assert str(error).startswith(reason), error
        else:
            raise AssertionError(f"{name} was attached")


def test_a_fifo_a_folder_a_missing_or_empty_file_is_refused_with_a_reason(tmp_path):
    """A path from a drop or the file dialog may name anything: nothing but a regular file
    with text is read, and a FIFO is refused at once rather than waiting for a writer."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty.txt").write_text("\n\n")
    (tmp_path / "to-pipe.txt").symlink_to(tmp_path / "pipe")  # a link is judged by its target
    refusals = {
        "pipe": "pipe cannot be attached: it is not a regular file.",
        "to-pipe.txt": "to-pipe.txt cannot be attached: it is not a regular file.",
        "folder": "folder cannot be read: Is a directory.",
        "gone.md": "gone.md cannot be read: No such file or directory.",
        "empty.txt": "empty.txt is empty: there is nothing in it to attach.",
    }
    for name, reason in refusals.items():
        try:
            read_attachment(tmp_path / name)
        except attachments.AttachmentError as error:
            assert str(error).startswith(reason), error
        else:
            raise AssertionError(f"{name} was attached")
