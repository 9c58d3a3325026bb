"""Files attached to a message as context: read as untrusted input, limited in size, and
put into the message text itself.

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
regular file, at most ``MAX_FILE_BYTES``), takes a PDF's text layer with pypdf, decodes
anything else as UTF-8 with bad bytes replaced, refuses binary files, and drops control
characters. Every refusal is an ``AttachmentError`` whose text says what to do.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

from engine.untrusted import read_regular_file

from .downloads import size_text

# A PDF of a few hundred pages with pictures; a text file this size is far past any
# model's context window anyway, so a larger file is refused before it is read.
MAX_FILE_BYTES = 20_000_000
# git's own test for a binary file: a NUL byte in the first 8,000 bytes
BINARY_PROBE_BYTES = 8000
# Characters per token, to judge before sending whether a file fits the context window
# (the app does not tokenize). The built-in SmolLM2 tokenizer gives 3.2 characters a token
# on this project's README and 3.8 on its Python source; 3 keeps the guess on the safe side.
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


def read_attachment(path) -> Attachment:
    """The text of the file at ``path``; AttachmentError when it cannot be used."""
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
        text = pdf_text(data, name)
    elif b"\0" in data[:BINARY_PROBE_BYTES]:
        raise AttachmentError(
            f"{name} is not a text file. Attach text, Markdown or PDF files; for other "
            "documents, save or export them as text first."
        )
    else:
        text = data.decode("utf-8", errors="replace")
    text = clean_text(text)
    if not text.strip():
        raise AttachmentError(f"{name} is empty: there is nothing in it to attach.")
    return Attachment(name, size_text(len(data)), text)


def pdf_text(data: bytes, name: str) -> str:
    """The text layer of a PDF's pages, a blank line between pages."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):  # "" opens owner-only locks
            raise FileNotDecryptedError("password")
        pages = [page.extract_text() or "" for page in reader.pages]
    except (FileNotDecryptedError, DependencyError):
        raise AttachmentError(
            f"{name} is protected by a password. Open it in a PDF viewer and save a copy "
            "without the password, then attach that."
        ) from None
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        # pypdf raises these plain kinds too on a damaged file
        raise AttachmentError(
            f"{name} could not be read as a PDF ({error or type(error).__name__}); it may "
            "be damaged. Try saving it again from the program that made it."
        ) from None
    text = "\n\n".join(page.strip() for page in pages).strip()
    if not text:
        raise AttachmentError(
            f"{name} has no text layer (its pages are probably scanned pictures). Run it "
            "through text recognition (OCR) first, or paste the text you need."
        )
    return text


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


def fits(attachments: list[Attachment], budget_chars: int) -> str | None:
    """None when the files fit in ``budget_chars``; else why not and what to do."""
    total = sum(len(wrap(a)) for a in attachments)
    if total <= budget_chars:
        return None
    newest = attachments[-1]
    tokens = -(-len(newest.text) // CHARS_PER_TOKEN)
    left = max(0, budget_chars - (total - len(wrap(newest)))) // CHARS_PER_TOKEN
    return (
        f"{newest.name} is too long for the model's context window: about {tokens:,} tokens, "
        f"and about {left:,} are left for attached files (the chat so far and Max tokens "
        "take the rest). Attach a shorter file or the part you need, start a new chat, or "
        "lower Max tokens."
    )


def budget_chars(window: int | None, used: int, max_tokens: int) -> int:
    """Characters of attached files the next message can hold: the context window less the
    chat so far and the answer's Max tokens (``app.context_meter.ContextUse``)."""
    if not window:
        return MAX_CHARS_UNKNOWN_WINDOW
    return max(0, window - used - max_tokens) * CHARS_PER_TOKEN
