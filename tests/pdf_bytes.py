"""Small PDFs built in the tests: one page of text (Helvetica), several such pages, a page
with no text layer, and a password-protected copy (pypdf writes all but the first); and
hostile ones: a decompression bomb, an unknown encryption handler, and mutated copies of
the others for the fuzz test."""

from __future__ import annotations

import io
import random
import zlib


def text_pdf(line: str, trailer: bytes = b"") -> bytes:
    """A one-page PDF whose text layer is ``line`` (ASCII, no parentheses); ``trailer``:
    more entries for its trailer dictionary."""
    stream = f"BT /F1 12 Tf 20 100 Td ({line}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _assembled(objects, trailer)


def _assembled(objects: list[bytes], trailer: bytes = b"") -> bytes:
    """A PDF of ``objects`` (numbered from 1, the first the catalog) with its xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        trailer,
        xref,
    )
    return bytes(out)


def bomb_pdf(pages: int, stream_bytes: int = 71_000_000) -> bytes:
    """The reported memory bomb: every page's content is one Flate stream of
    ``stream_bytes`` zeros (just under pypdf's 75 MB per-stream limit), ~70 KB packed."""
    packed = zlib.compress(bytes(stream_bytes), 9)
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i in range(pages):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % (5 + 2 * i)
        )
        objects.append(
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(packed), packed)
        )
    return _assembled(objects)


def unknown_encryption_pdf() -> bytes:
    """A PDF whose /Encrypt names a security handler no reader knows."""
    objects_trailer = b"/Encrypt << /Filter /Bogus /V 9 /R 9 >> /ID [<00> <00>] "
    return text_pdf("secret", trailer=objects_trailer)


def mutated(data: bytes, rng: random.Random) -> bytes:
    """``data`` with a few random edits of the kinds that break parsers: bytes flipped,
    cut, repeated or replaced by PDF tokens (numbers, names, brackets)."""
    out = bytearray(data)
    tokens = [b"0", b"-1", b"99999999999", b"/Filter", b"/FlateDecode", b"/Encrypt", b"[", b"]"]
    tokens += [b"<<", b">>", b"R", b"obj", b"endobj", b"stream", b"/Length", b"/Kids", b"null"]
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(out))
        edit = rng.randrange(5)
        if edit == 0:
            out[at] = rng.randrange(256)
        elif edit == 1:
            del out[at : at + rng.randint(1, 64)]
        elif edit == 2:
            out[at:at] = out[at : at + rng.randint(1, 64)]
        elif edit == 3:
            out[at:at] = b" " + rng.choice(tokens) + b" "
        else:
            out = out[: max(at, 16)]  # truncated
    return bytes(out)


def pages_pdf(line: str, count: int) -> bytes:
    """``count`` pages, each with ``line`` as its text."""
    from pypdf import PdfReader, PdfWriter

    page = PdfReader(io.BytesIO(text_pdf(line))).pages[0]
    writer = PdfWriter()
    for _ in range(count):
        writer.add_page(page)
    return _written(writer)


def blank_pdf() -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(300, 144)
    return _written(writer)


def locked_pdf(line: str, password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf(line))))
    writer.encrypt(user_password=password, algorithm="AES-128")
    return _written(writer)


def _written(writer) -> bytes:
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


# Targets for app.storage.pdf_reading.WorkerRead in the tests (run in its worker process)
def never_ends(data: bytes, room: int):
    """A parser stuck inside one page."""
    import time

    while True:
        time.sleep(1)


def eats_memory(data: bytes, room: int):
    """A parser that unpacks without bound (4 GB, past the worker's cap)."""
    return [bytearray(1 << 28) for _ in range(16)]


def dies(data: bytes, room: int):
    """A parser that takes its process down (a crash in native code)."""
    import os

    os._exit(3)
