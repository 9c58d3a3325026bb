"""Light and dark themes that follow the system colour scheme.

The style sheets live in resources/styles/{light,dark}.qss; the colours the painted
widgets and the highlighting need are defined here, one set per scheme.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QApplication

from ..storage.paths import resource
from .render import Palette


@dataclass(frozen=True)
class Colors:
    dark: bool
    window: str
    base: str
    text: str
    muted: str
    accent: str
    draft: str  # accepted-draft highlight (background)
    code: str  # code block background
    grid: str
    series: tuple[str, ...]  # chart colours, one per compared message
    mark: str = "#9a6a00"  # underline of accepted drafts: >= 3:1 against every background
    code_header: str = "#e2e7ee"

    def palette(self) -> Palette:
        return Palette(
            QColor(self.draft),
            QColor(self.code),
            mark=QColor(self.mark),
            dark=self.dark,
            header_background=QColor(self.code_header),
            muted=QColor(self.muted),
            link=QColor(self.accent),
        )


LIGHT = Colors(
    False,
    "#f6f7f9",
    "#ffffff",
    "#1d2330",
    "#6b7385",
    "#2f6fde",
    "#ffe08a",
    "#eef1f5",
    "#dde2ea",
    ("#2f6fde", "#e8743b", "#19a979", "#b04bcf", "#d4a106"),
)
DARK = Colors(
    True,
    "#1e2127",
    "#262a31",
    "#e4e7ec",
    "#9aa3b2",
    "#5b9cff",
    "#6b5516",
    "#31363f",
    "#3a404a",
    ("#5b9cff", "#f08a4b", "#35c58f", "#c77be0", "#e2b93b"),
    mark="#ffd24d",
    code_header="#2a2f37",
)


def system_is_dark(app: QGuiApplication | None = None) -> bool:
    app = app or QGuiApplication.instance()
    hints = app.styleHints()
    scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else Qt.ColorScheme.Unknown
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return app.palette().color(QPalette.Window).lightness() < 128


_current = LIGHT


def current() -> Colors:
    return _current


def apply(app: QApplication, dark: bool | None = None) -> Colors:
    """Style the whole application for the light or dark scheme (default: the system's)."""
    global _current
    dark = system_is_dark(app) if dark is None else dark
    _current = colors = DARK if dark else LIGHT
    app.setStyle("Fusion")
    palette = QPalette()
    palette.setColor(QPalette.Window, QColor(colors.window))
    palette.setColor(QPalette.Base, QColor(colors.base))
    palette.setColor(QPalette.AlternateBase, QColor(colors.code))
    palette.setColor(QPalette.WindowText, QColor(colors.text))
    palette.setColor(QPalette.Text, QColor(colors.text))
    palette.setColor(QPalette.ButtonText, QColor(colors.text))
    palette.setColor(QPalette.Button, QColor(colors.base if not dark else "#2d323a"))
    palette.setColor(QPalette.Highlight, QColor(colors.accent))
    palette.setColor(QPalette.HighlightedText, QColor("#ffffff"))
    palette.setColor(QPalette.ToolTipBase, QColor(colors.base))
    palette.setColor(QPalette.ToolTipText, QColor(colors.text))
    palette.setColor(QPalette.PlaceholderText, QColor(colors.muted))
    palette.setColor(QPalette.Link, QColor(colors.accent))
    for group in (QPalette.Disabled,):
        palette.setColor(group, QPalette.WindowText, QColor(colors.muted))
        palette.setColor(group, QPalette.Text, QColor(colors.muted))
        palette.setColor(group, QPalette.ButtonText, QColor(colors.muted))
    app.setPalette(palette)
    sheet = resource("styles", "dark.qss" if dark else "light.qss")
    try:
        icons = resource("icons").as_posix()  # style sheets name shipped images as @icons@/…
        app.setStyleSheet(sheet.read_text(encoding="utf-8").replace("@icons@", icons))
    except OSError:
        app.setStyleSheet("")
    return colors


def app_icon() -> QIcon:
    """The app icon from resources/icons (an empty icon when the icon set is missing)."""
    icon = QIcon()
    folder = resource("icons")
    for path in sorted(folder.glob("draftless-*.png")) if folder.is_dir() else []:
        icon.addFile(str(path))  # one size each, so no SVG plugin is needed
    for name in ("draftless.png", "draftless.svg"):
        if icon.isNull() and (folder / name).exists():
            icon = QIcon(str(folder / name))
    return icon
