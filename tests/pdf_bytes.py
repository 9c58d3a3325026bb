"""Small PDFs built in the tests: one page of text (Helvetica), several such pages, a page
with no text layer, and a password-protected copy (pypdf writes all but the first)."""

from __future__ import annotations

import io


def text_pdf(line: str) -> bytes:
    """A one-page PDF whose text layer is ``line`` (ASCII, no parentheses)."""
    stream = f"BT /F1 12 Tf 20 100 Td ({line}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
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
