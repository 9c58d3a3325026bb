"""Draftless desktop app (PySide6). Draws engine events; never decodes."""
