"""A PDF's text layer, read within budgets, in a worker process that can be stopped.

A PDF is a program for its reader more than a document: a file of 837 KB can unpack to
850 MB (each page one 71 MB stream of zeros, just under pypdf's own per-stream limit), a
damaged one can make pypdf raise nearly any exception, and one page can keep it busy for
as long as it likes. So:

- ``pdf_pages(data, room)`` reads pages until their text is longer than ``room``, within
  ``MAX_UNPACKED_BYTES`` of decompressed stream data for the whole file, ``MAX_PAGES`` and
  ``TIME_BUDGET_S`` (checked between pages), and turns every exception into a ``PdfProblem``
  whose ``kind`` says what went wrong.
- ``WorkerRead().run(data, room)`` runs it in a fresh process whose memory is capped at
  ``WORKER_MEMORY_BYTES`` (where the system has that limit), killed at ``DEADLINE_S`` or when
  ``cancel()`` is called from another thread (a chip removed while it reads, the window
  closing): nothing a file does can hold the app's own memory or time.

It imports pypdf and the standard library only, so the worker starts in a fraction of a
second.
"""

from __future__ import annotations

import io
import multiprocessing
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass

# The text layer of a 500-page book is a few MB of content streams (operators around each
# run of text: ~10 bytes of stream per character of text, ~3 KB of text a page), so 64 MB of
# unpacked streams is several such books; the reported bomb unpacks 71 MB on its first page.
MAX_UNPACKED_BYTES = 64 << 20
# A 128k-token window holds about 380,000 characters, some 150 pages of a book; past 1,000
# pages no window takes the text, and a file of empty pages is not read for ever.
MAX_PAGES = 1000
# Pages take ~35 ms each here (tests/pdf_bytes.py pages): 30 s is ~850 pages.
TIME_BUDGET_S = 30.0
# The worker's hard stop: the budget, plus starting a fresh interpreter and importing pypdf
# (~0.2 s here) and a page still being read when the budget ran out, with a wide margin.
DEADLINE_S = TIME_BUDGET_S + 15.0
# The worker's address space: Python and pypdf take ~150 MB of it here, the file (at most
# 20 MB, app.storage.attachments.MAX_FILE_BYTES) and its unpacked streams (64 MB) a few times over
# while pages are parsed stay well under 1 GB; the reported bomb reached 946 MB unbounded.
WORKER_MEMORY_BYTES = 1 << 30
POLL_S = 0.05  # how often a waiting read looks for cancel()


@dataclass(frozen=True)
class PdfText:
    text: str  # the pages' text, a blank line between pages
    pages_read: int
    pages: int


class PdfProblem(Exception):
    """Why a PDF gives no text. ``kind``: "password", "damaged", "unpacks", "pages",
    "slow", "memory", "crashed" or "cancelled"; ``detail``: what the parser said."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind, detail)
        self.kind, self.detail = kind, detail


_unpacked_left: ContextVar[list[int] | None] = ContextVar("unpacked_left", default=None)


def pdf_pages(data: bytes, room: int) -> PdfText:
    """The text of the PDF ``data`` until it is longer than ``room`` (see the module
    docstring for the budgets); PdfProblem when it gives none."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    _count_unpacked_bytes()
    token = _unpacked_left.set([MAX_UNPACKED_BYTES])
    started = time.monotonic()
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):  # "" opens owner-only locks
            raise PdfProblem("password")
        pages, length, total = [], 0, len(reader.pages)
        for page in reader.pages:
            if len(pages) >= MAX_PAGES:
                raise PdfProblem("pages", f"{total:,} pages; Draftless reads at most {MAX_PAGES:,}")
            if time.monotonic() - started > TIME_BUDGET_S:
                raise PdfProblem("slow", f"{TIME_BUDGET_S:g} s")
            pages.append((page.extract_text() or "").strip())
            length += len(pages[-1]) + 2
            if length > room:
                break
    except PdfProblem:
        raise
    except (FileNotDecryptedError, DependencyError):
        raise PdfProblem("password") from None
    except MemoryError:
        raise PdfProblem("memory", _memory_cap()) from None
    except Exception as error:  # pypdf raises nearly any kind on a damaged file
        raise PdfProblem("damaged", f"{type(error).__name__}: {error}"[:200]) from None
    finally:
        _unpacked_left.reset(token)
    return PdfText("\n\n".join(pages).strip(), len(pages), total)


def _count_unpacked_bytes() -> None:
    """Make pypdf's one place that unpacks stream data charge this file's budget
    (``pypdf.filters.decode_stream_data``, which its streams look up at each call)."""
    import pypdf.filters as filters

    decode = filters.decode_stream_data
    if getattr(decode, "charges_budget", False):
        return

    def charged(stream):
        unpacked = decode(stream)
        left = _unpacked_left.get()
        if left is not None:
            left[0] -= len(unpacked)
            if left[0] < 0:
                raise PdfProblem("unpacks", f"{MAX_UNPACKED_BYTES >> 20} MB")
        return unpacked

    charged.charges_budget = True
    filters.decode_stream_data = charged


class WorkerRead:
    """One PDF read in a worker process (``run``), which ``cancel()`` ends from any thread.
    ``target(data, room)`` is what the worker runs (``pdf_pages``; tests give others)."""

    def __init__(self, target=pdf_pages, deadline_s: float = DEADLINE_S):
        self.target = target
        self.deadline_s = deadline_s
        self._cancelled = threading.Event()
        self._process = None

    def cancel(self) -> None:
        self._cancelled.set()
        process = self._process
        if process is not None and process.is_alive():
            process.kill()

    def run(self, data: bytes, room: int) -> PdfText:
        """``target(data, room)`` in the worker; its PdfProblem is raised here, and so are
        "slow" at the deadline, "memory" or "crashed" when the worker dies, "cancelled"."""
        context = multiprocessing.get_context("spawn")  # never fork a process with threads
        receive, send = context.Pipe(duplex=False)
        process = context.Process(
            target=_work, args=(self.target, data, room, send), name="draftless-pdf", daemon=True
        )
        self._process = process
        if self._cancelled.is_set():
            raise PdfProblem("cancelled")
        process.start()
        send.close()
        try:
            return self._result(process, receive)
        finally:
            if process.is_alive():
                process.kill()
            process.join()
            receive.close()
            process.close()
            self._process = None

    def _result(self, process, receive) -> PdfText:
        deadline = time.monotonic() + self.deadline_s
        while not receive.poll(POLL_S):
            if self._cancelled.is_set():
                raise PdfProblem("cancelled")
            if time.monotonic() > deadline:
                raise PdfProblem("slow", f"{self.deadline_s:g} s")
            if not process.is_alive() and not receive.poll():
                raise PdfProblem("crashed", f"exit code {process.exitcode}")
        if self._cancelled.is_set():  # killed by cancel(): its pipe reads as ended
            raise PdfProblem("cancelled")
        try:
            kind, value = receive.recv()
        except (EOFError, OSError):  # it died while sending
            raise PdfProblem("crashed", f"exit code {process.exitcode}") from None
        if kind == "problem":
            raise PdfProblem(*value)
        return PdfText(*value)


def _work(target, data: bytes, room: int, send) -> None:
    """The worker process: cap its memory, read, send ("text", fields) or ("problem", …)."""
    _cap_memory(WORKER_MEMORY_BYTES)
    try:
        result = target(data, room)
        message = ("text", (result.text, result.pages_read, result.pages))
    except PdfProblem as problem:
        message = ("problem", (problem.kind, problem.detail))
    except MemoryError:
        message = ("problem", ("memory", _memory_cap()))
    except Exception as error:  # a target other than pdf_pages
        message = ("problem", ("damaged", f"{type(error).__name__}: {error}"[:200]))
    send.send(message)
    send.close()


def _memory_cap() -> str:
    return f"{WORKER_MEMORY_BYTES >> 20:,} MB"


def _cap_memory(limit: int) -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # no such limit here (macOS ignores it)
        pass
