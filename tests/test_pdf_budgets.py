"""A PDF is read within budgets (unpacked bytes, pages, time) in a worker process that can be
stopped and whose memory is capped, and whatever the parser raises becomes a message on
the file's chip: the reported memory bomb, an unknown encryption handler, and a fuzz over
mutated PDFs."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.storage import pdf_reading
from app.storage.attachments import AttachmentError, read_attachment
from app.storage.pdf_reading import PdfProblem, WorkerRead

from .pdf_bytes import (
    blank_pdf,
    bomb_pdf,
    dies,
    eats_memory,
    locked_pdf,
    mutated,
    never_ends,
    pages_pdf,
    text_pdf,
    unknown_encryption_pdf,
)
from .scripted_engine import answer_events
from .test_app_views import SIMPLE, app, ask, loop, wait  # noqa: F401

# Generous bounds for a worker to end (a fresh interpreter starts in ~0.2 s here)
WORKER_ENDS_WITHIN_S = 30


def refusal(tmp_path, name: str, data: bytes, read_pdf=None) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(AttachmentError) as refused:
        read_attachment(path, 100_000, *([read_pdf] if read_pdf else []))
    return str(refused.value)


def test_the_reported_memory_bomb_is_refused_after_its_first_page(tmp_path, monkeypatch):
    """Each page one 71 MB stream of zeros: the old reader held ~68 MB a page (946 MB and
    47 s for 12 pages); the budget stops it at the first, here and in the worker."""
    import pypdf.filters

    pdf_reading._count_unpacked_bytes()  # pypdf's unpacking, charged to the file's budget
    charging, unpacked = pypdf.filters.decode_stream_data, []

    def counted(stream):
        unpacked.append(stream)
        return charging(stream)

    counted.charges_budget = True  # already charging: not wrapped again
    monkeypatch.setattr(pypdf.filters, "decode_stream_data", counted)
    bomb = bomb_pdf(3)
    said = refusal(tmp_path, "bomb.pdf", bomb)
    assert said.startswith("bomb.pdf unpacks to more than 64 MB of data")
    assert len(unpacked) == 1  # one page's stream, not three
    said = refusal(tmp_path, "bomb.pdf", bomb, WorkerRead().run)
    assert said.startswith("bomb.pdf unpacks to more than 64 MB of data")


def test_an_unknown_encryption_handler_is_a_message_not_an_escape(tmp_path):
    said = refusal(tmp_path, "locked.pdf", unknown_encryption_pdf())
    assert said.startswith("locked.pdf could not be read as a PDF (NotImplementedError")


def test_the_page_and_time_budgets_end_a_read_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(pdf_reading, "MAX_PAGES", 3)
    said = refusal(tmp_path, "long.pdf", pages_pdf("abc", 5))
    assert said.startswith("long.pdf has 5 pages; Draftless reads at most 3 pages of a file.")
    monkeypatch.setattr(pdf_reading, "TIME_BUDGET_S", -1.0)  # spent before the first page
    said = refusal(tmp_path, "slow.pdf", pages_pdf("abc", 2))
    assert said.startswith("Reading slow.pdf took longer than -1 s, so it was stopped.")


@pytest.mark.parametrize(
    "target, deadline_s, kind",
    [(never_ends, 1.0, "slow"), (eats_memory, 60.0, "memory"), (dies, 60.0, "crashed")],
)
def test_the_worker_is_stopped_at_its_deadline_capped_in_memory_and_may_crash(
    target, deadline_s, kind
):
    if kind == "memory":
        pytest.importorskip("resource")
    with pytest.raises(PdfProblem) as problem:
        WorkerRead(target, deadline_s).run(b"%PDF-", 100)
    assert problem.value.kind == kind


def test_a_worker_read_is_cancelled_from_another_thread():
    worker, outcome = WorkerRead(never_ends), []

    def read():
        try:
            worker.run(b"%PDF-", 100)
        except PdfProblem as problem:
            outcome.append(problem.kind)

    reading = threading.Thread(target=read)
    reading.start()
    while worker._process is None or not worker._process.is_alive():
        reading.join(0.01)
    worker.cancel()
    reading.join(WORKER_ENDS_WITHIN_S)
    assert outcome == ["cancelled"] and not reading.is_alive()


SAMPLES = [
    text_pdf("Quarterly figures rose"),
    pages_pdf("abc def", 3),
    blank_pdf(),
    locked_pdf("hidden", "pw"),
    unknown_encryption_pdf(),
]


@settings(max_examples=600, deadline=None, derandomize=True)
@given(sample=st.sampled_from(SAMPLES), seed=st.integers(0, 2**32 - 1))
@example(sample=unknown_encryption_pdf(), seed=34)  # NotImplementedError escaped the old reader
def test_fuzz_every_mutated_pdf_is_text_or_a_reason(tmp_path_factory, sample, seed):
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.pdf"
    path.write_bytes(mutated(sample, random.Random(seed)))
    try:
        attachment = read_attachment(path, 100_000)
    except AttachmentError as error:
        assert str(error).startswith(("fuzz.pdf ", "Reading fuzz.pdf ")), error
    else:
        assert attachment.text.strip()


def test_a_pdf_the_parser_fails_on_leaves_send_and_later_files_working(app, qtbot, tmp_path):
    """The report: the chip stayed on "reading…", Send did nothing, and later files stuck."""
    (tmp_path / "locked.pdf").write_bytes(unknown_encryption_pdf())
    (tmp_path / "note.txt").write_text("a note")
    composer = app.window.composer
    wait(qtbot, composer.attach_files([tmp_path / "locked.pdf"]), WORKER_ENDS_WITHIN_S)
    assert composer.notice.text().startswith("locked.pdf could not be read as a PDF")
    assert composer.reading == [] and composer.attachments == []
    wait(qtbot, composer.attach_files([tmp_path / "note.txt"]), WORKER_ENDS_WITHIN_S)
    assert [a.name for a in composer.attachments] == ["note.txt"]
    ask(qtbot, app, "read it", answer_events(SIMPLE))
    assert "a note" in app.scripted.requests[-1].messages[-1]["content"]
