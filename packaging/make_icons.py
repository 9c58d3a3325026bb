"""Render the Draftless app icon set from its master SVG, and build the macOS .icns.

    python packaging/make_icons.py                 # resources/icons/draftless-<size>.png
    python packaging/make_icons.py --icns OUT.icns # also the .icns (iconutil on a Mac, else Pillow)

The PNGs are committed; the .icns is a build product (packaging/draftless.spec calls
make_icns() into the build folder), so the master SVG stays the one source.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ICONS_DIR = ROOT / "resources" / "icons"
MASTER_SVG = ICONS_DIR / "draftless.svg"
SIZES = (16, 32, 48, 64, 128, 256, 512, 1024)

# name inside a macOS .iconset -> pixel size (Apple's required set for an app icon)
ICONSET = {
    "icon_16x16.png": 16,
    "icon_16x16@2x.png": 32,
    "icon_32x32.png": 32,
    "icon_32x32@2x.png": 64,
    "icon_128x128.png": 128,
    "icon_128x128@2x.png": 256,
    "icon_256x256.png": 256,
    "icon_256x256@2x.png": 512,
    "icon_512x512.png": 512,
    "icon_512x512@2x.png": 1024,
}


def png_path(size: int, icons_dir: Path = ICONS_DIR) -> Path:
    return icons_dir / f"draftless-{size}.png"


def render_pngs(svg: Path = MASTER_SVG, icons_dir: Path = ICONS_DIR, sizes=SIZES) -> list[Path]:
    """Draw ``svg`` into square transparent PNGs, one per size, with Qt's SVG renderer."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841  (QPainter needs it)
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg} is not a valid SVG")
    written = []
    for size in sizes:
        # Small sizes are drawn at 4x and scaled down smoothly: crisper than direct rendering.
        scale = 4 if size < 128 else 1
        image = QImage(size * scale, size * scale, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHints(
            QPainter.RenderHint.Antialiasing | QPainter.RenderHint.SmoothPixmapTransform
        )
        renderer.render(painter)
        painter.end()
        if scale != 1:
            image = image.scaled(
                size,
                size,
                Qt.AspectRatioMode.IgnoreAspectRatio,
                Qt.TransformationMode.SmoothTransformation,
            )
        out = png_path(size, icons_dir)
        if not image.save(str(out), "PNG"):
            raise SystemExit(f"could not write {out}")
        written.append(out)
    return written


def make_icns(out: Path, icons_dir: Path = ICONS_DIR) -> Path:
    """Build ``out`` (.icns) from the committed PNGs: iconutil on macOS, Pillow elsewhere."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    missing = [
        png_path(s, icons_dir) for s in set(ICONSET.values()) if not png_path(s, icons_dir).exists()
    ]
    if missing:
        raise SystemExit(f"missing icon PNGs {missing}; run python packaging/make_icons.py")
    if sys.platform == "darwin" and shutil.which("iconutil"):
        with tempfile.TemporaryDirectory() as tmp:
            iconset = Path(tmp) / "Draftless.iconset"
            iconset.mkdir()
            for name, size in ICONSET.items():
                shutil.copyfile(png_path(size, icons_dir), iconset / name)
            subprocess.run(
                ["iconutil", "--convert", "icns", "--output", str(out), str(iconset)], check=True
            )
        return out
    from PIL import Image

    images = {
        size: Image.open(png_path(size, icons_dir)).convert("RGBA")
        for size in set(ICONSET.values())
    }
    largest = images.pop(max(images))
    largest.save(out, format="ICNS", append_images=list(images.values()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--icns", type=Path, help="also write a macOS .icns here")
    parser.add_argument(
        "--skip-png", action="store_true", help="use the committed PNGs as they are"
    )
    args = parser.parse_args(argv)
    if not args.skip_png:
        for path in render_pngs():
            print(path.relative_to(ROOT))
    if args.icns:
        print(make_icns(args.icns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
