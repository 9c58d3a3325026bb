"""Files attached to a message as context: read as untrusted input, limited to what the
model's context window leaves, and put into the message text itself.

A message with files reads, for the model and in the chat database::

    Attached file report.md (2.1 KB):
    ```
    …the file's text…
    ```

    the question

Each file is a fenced block whose fence is longer than any run of backticks in the file
(CommonMark's rule), so nothing in the file can close its block early and pass for the
person's own words; ``split_message`` finds the files again (the card shows them as chips,
Edit puts them back in the composer). Keeping the text in the message means the chat
database needs nothing new, and a regenerated or continued answer reads the same files.

``read_attachment`` reads a file once (``engine.untrusted.read_regular_file``: only a
regular file, at most ``MAX_FILE_BYTES``), takes a PDF's text layer with pypdf (within
budgets of unpacked bytes, pages and time: ``app.storage.pdf_reading``), decodes
anything else as UTF-8 with bad bytes replaced, refuses binary files, drops control
characters, and refuses a file whose block does not fit the room it is given. Every
refusal is an ``AttachmentError`` whose text says what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engine.untrusted import read_regular_file

from .downloads import size_text
from .pdf_reading import PdfProblem, pdf_pages

# A PDF of a few hundred pages with pictures; a text file this size is far past any
# model's context window anyway, so a larger file is refused before it is read.
MAX_FILE_BYTES = 20_000_000
# git's own test for a binary file: a NUL byte in the first 8,000 bytes
BINARY_PROBE_BYTES = 8000
# Characters per token, to judge before sending whether a file fits the context window
# (the app does not tokenize). The built-in SmolLM2 tokenizer gives 3.2 characters a token
# on this project's README and 3.8 on its Python source; 3 keeps the guess on the safe side.
# Chinese or Japanese text runs nearer 1 character a token: there the engine's own check
# (it refuses a prompt that leaves no room for Max tokens) has the last word.
CHARS_PER_TOKEN = 3
# With no window to go by (a server that does not say): 32,768 tokens, a common window
MAX_CHARS_UNKNOWN_WINDOW = 32_768 * CHARS_PER_TOKEN
# Tab, line feed and carriage return stay; every other C0/C1 control character and DEL
# goes (terminal escapes, NULs from a stray binary part, form feeds from PDF pages)
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
HEADER = re.compile(r"Attached file (?P<name>[^\n]+) \((?P<size>[^()\n]*)\):\n(?P<fence>`{3,})\n")


class AttachmentError(ValueError):
    """Why a file cannot be attached, in words a person can act on."""


@dataclass(frozen=True)
class Attachment:
    name: str  # the file's name, shown on its chip and to the model
    size: str  # its size on disk in words ("2.1 KB")
    text: str

    @property
    def label(self) -> str:
        return f"{self.name} · {self.size}"


def read_attachment(path, room: int = MAX_CHARS_UNKNOWN_WINDOW, read_pdf=pdf_pages) -> Attachment:
    """The text of the file at ``path`` if its block fits in ``room`` characters (what the
    context window leaves, ``budget_chars``); AttachmentError when it cannot be used. A PDF
    is read only until it is past ``room`` (a long book is refused in a fraction of the
    time reading it whole takes), within ``app.storage.pdf_reading``'s budgets, by ``read_pdf``: in
    this process by default, ``WorkerRead().run`` in a worker process the app can stop."""
    path = Path(path)
    name = clean_name(path.name)
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
    except ValueError as why:  # a folder, a device, too large
        raise AttachmentError(
            f"{name} cannot be attached: {why}. Attach a smaller file or the part you need."
        ) from None
    except OSError as error:
        raise AttachmentError(f"{name} cannot be read: {error.strerror or error}.") from None
    if data.startswith(b"%PDF-") or path.suffix.lower() == ".pdf":
        text, pages_read, pages = pdf_text(data, name, room, read_pdf)
    elif b"\0" in data[:BINARY_PROBE_BYTES]:
        raise AttachmentError(
            f"{name} is not a text file. Attach text, Markdown or PDF files; for other "
            "documents, save or export them as text first."
        )
    else:
        text, pages_read, pages = data.decode("utf-8", errors="replace"), 1, 1
    attachment = Attachment(name, size_text(len(data)), clean_text(text))
    if not attachment.text.strip():
        raise AttachmentError(f"{name} is empty: there is nothing in it to attach.")
    if len(wrap(attachment)) > room:
        tokens = -(-len(attachment.text) // CHARS_PER_TOKEN)  # rounded up
        how_long = (
            f"about {tokens:,} tokens"
            if pages_read == pages
            else f"over {tokens:,} tokens in its first {pages_read} of {pages} pages"
        )
        raise AttachmentError(
            f"{name} is too long for the model's context window: {how_long}, and about "
            f"{room // CHARS_PER_TOKEN:,} are left for attached files (the chat so far and "
            "Max tokens take the rest). Attach a shorter file or the part you need, start a "
            "new chat, or lower Max tokens."
        )
    return attachment


def pdf_text(data: bytes, name: str, room: int, read_pdf=pdf_pages) -> tuple[str, int, int]:
    """The text layer of a PDF's pages, a blank line between pages, read until it is longer
    than ``room`` (``read_pdf``: ``app.storage.pdf_reading.pdf_pages`` here, or a worker's ``run``);
    the pages read and the pages in all."""
    try:
        pdf = read_pdf(data, room)
    except PdfProblem as problem:
        raise AttachmentError(pdf_refusal(name, problem)) from None
    if not pdf.text:
        raise AttachmentError(
            f"{name} has no text layer (its pages are probably scanned pictures). Run it "
            "through text recognition (OCR) first, or paste the text you need."
        )
    return pdf.text, pdf.pages_read, pdf.pages


def pdf_refusal(name: str, problem: PdfProblem) -> str:
    """Why the PDF ``name`` gives no text, and what to do, in words."""
    part = "Attach a shorter PDF or the pages you need"
    reasons = {
        "password": f"{name} is protected by a password. Open it in a PDF viewer and save a "
        "copy without the password, then attach that.",
        "damaged": f"{name} could not be read as a PDF ({problem.detail}); it may be damaged. "
        "Try saving it again from the program that made it.",
        "unpacks": f"{name} unpacks to more than {problem.detail} of data, more than a text "
        f"PDF needs, so it was not read further. {part}.",
        "pages": f"{name} has {problem.detail} pages of a file. {part}.",
        "slow": f"Reading {name} took longer than {problem.detail}, so it was stopped. {part}, "
        "or save it again from the program that made it.",
        "memory": f"{name} needs more memory to read than Draftless allows a file "
        f"({problem.detail}), so it was stopped. {part}.",
        "crashed": f"Reading {name} stopped unexpectedly ({problem.detail}); it may be damaged. "
        "Try saving it again from the program that made it.",
        "cancelled": f"Reading {name} was cancelled.",
    }
    return reasons.get(problem.kind, f"{name} could not be read ({problem.kind}).")


def clean_name(name: str) -> str:
    """A file name fit for one line of the message and a chip."""
    return " ".join(CONTROL.sub(" ", name).split()) or "file"


def clean_text(text: str) -> str:
    """Line ends made ``\\n``, control characters and trailing blank lines dropped."""
    return CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).rstrip("\n")


def fence_for(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def wrap(attachment: Attachment) -> str:
    fence = fence_for(attachment.text)
    return (
        f"Attached file {attachment.name} ({attachment.size}):\n"
        f"{fence}\n{attachment.text}\n{fence}\n\n"
    )


def compose(text: str, attachments: list[Attachment]) -> str:
    """The message: each file's block, then what the person wrote."""
    if not attachments:
        return text
    return "".join(wrap(a) for a in attachments) + text


def split_message(content: str) -> tuple[str, list[Attachment]]:
    """What the person wrote and the files at the start of ``content``; a message
    without files comes back whole."""
    files = []
    position = 0
    while (header := HEADER.match(content, position)) is not None:
        fence = header["fence"]
        end = content.find(f"\n{fence}\n\n", header.end())
        if end < 0:
            break
        body = content[header.end() : end]
        if re.search(f"`{{{len(fence)},}}", body):  # not a block this app wrote
            break
        files.append(Attachment(header["name"], header["size"], body))
        position = end + len(fence) + 3
    return content[position:], files


def budget_chars(use) -> int:
    """Characters of attached files the next message can hold: what the context window
    leaves after the chat so far and the answer's Max tokens
    (``app.views.context_meter.ContextUse.tokens_left``)."""
    if use.tokens_left is None:
        return MAX_CHARS_UNKNOWN_WINDOW
    return max(0, use.tokens_left) * CHARS_PER_TOKEN
