"""Facts the PyInstaller spec needs, kept here so fast tests can check them without building.

- the version (from pyproject.toml),
- the lowest macOS the bundle can run on (MLX's documented floor, raised to the platform
  tag of the wheels actually installed: pip picks the mlx-metal build for the build Mac's
  macOS, and a bundle cannot run on an older one),
- the Info.plist entries of Draftless.app.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path, PurePath

ROOT = Path(__file__).resolve().parent.parent
APP_NAME = "Draftless"
BUNDLE_ID = "app.draftless.Draftless"
# MLX's install docs: "MLX is only available on devices running macOS >= 14.0" (Apple silicon).
MLX_MIN_MACOS = "14.0"
# Wheels whose macOS platform tag bounds the bundle's minimum macOS.
MACOS_NATIVE_DISTS = ("mlx", "mlx-metal", "PySide6-Essentials", "shiboken6")

_MACOS_TAG = re.compile(r"macosx_(\d+)_(\d+)_")

# Qt plugins the app never needs, and the Qt libraries only they pull in (about 25 MB):
# the PDF image format (QtPdf) and the virtual keyboard (QtQuick, QtQml).
UNUSED_QT = (
    "Pdf",
    "Qml",
    "QmlMeta",
    "QmlModels",
    "QmlWorkerScript",
    "Quick",
    "VirtualKeyboard",
    "VirtualKeyboardQml",
)
UNUSED_QT_FILES = (
    {f"libQt6{name}.so.6" for name in UNUSED_QT}
    | {f"Qt{name}" for name in UNUSED_QT}
    | {
        "libqpdf.so",
        "libqpdf.dylib",  # the PDF image-format plugin
        "libqtvirtualkeyboardplugin.so",
        "libqtvirtualkeyboardplugin.dylib",
    }
)
UNUSED_QT_DIRS = {f"Qt{name}.framework" for name in UNUSED_QT}
# Metadata the transformers hook copies for every installed dependency; torch is never shipped.
UNUSED_METADATA = ("torch-", "torchvision-", "torchaudio-")


# resources/ holds what the app ships (icons, style sheets) and, in this sub-folder, the
# README's images and the committed benchmark report, which stay out of the bundle.
README_RESOURCES = "readme"


def bundled_resources(root: Path = ROOT) -> list[tuple[str, str]]:
    """PyInstaller ``datas`` entries for resources/: every sub-folder but the README's."""
    resources = root / "resources"
    return [
        (str(entry), f"resources/{entry.name}" if entry.is_dir() else "resources")
        for entry in sorted(resources.iterdir())
        if entry.name != README_RESOURCES
    ]


def project_version(pyproject: Path = ROOT / "pyproject.toml") -> str:
    text = pyproject.read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        match = re.search(r'(?m)^version\s*=\s*"([^"]+)"', text)
        if not match:
            raise ValueError(f"no version in {pyproject}") from None
        return match.group(1)
    return tomllib.loads(text)["project"]["version"]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def macos_floor_of_tags(tags: list[str]) -> str | None:
    """The macOS version a wheel's platform tags require, e.g. macosx_14_0_arm64 -> "14.0"."""
    floors = [f"{m.group(1)}.{m.group(2)}" for tag in tags if (m := _MACOS_TAG.search(tag))]
    return min(floors, key=_version_key) if floors else None


def installed_wheel_tags(dist_name: str) -> list[str]:
    try:
        wheel = metadata.distribution(dist_name).read_text("WHEEL") or ""
    except metadata.PackageNotFoundError:
        return []
    return [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]


def minimum_macos(dists: tuple[str, ...] = MACOS_NATIVE_DISTS, tags_of=installed_wheel_tags) -> str:
    floors = [MLX_MIN_MACOS]
    for dist in dists:
        floor = macos_floor_of_tags(tags_of(dist))
        if floor:
            floors.append(floor)
    return max(floors, key=_version_key)


def wanted_in_bundle(entry: tuple[str, str, str]) -> bool:
    """Filter for PyInstaller TOC entries (dest, source, typecode): False drops the entry.

    Drops the unused Qt parts above wherever they land (Linux .so files, macOS frameworks,
    and the top-level symlinks PyInstaller adds for them, which would dangle and break
    codesign) and the metadata of packages that are never shipped.
    """
    dest, source, typecode = entry
    for path in (dest, source) if typecode == "SYMLINK" else (dest,):
        parts = PurePath(path).parts
        if not parts:
            continue
        if parts[-1] in UNUSED_QT_FILES or UNUSED_QT_DIRS & set(parts):
            return False
        if parts[0].startswith(UNUSED_METADATA) and parts[0].endswith(".dist-info"):
            return False
    return True


def info_plist(version: str, min_macos: str) -> dict:
    """Entries merged into the Info.plist PyInstaller writes for Draftless.app."""
    return {
        "CFBundleName": APP_NAME,
        "CFBundleDisplayName": APP_NAME,
        "CFBundleIdentifier": BUNDLE_ID,
        "CFBundleShortVersionString": version,
        "CFBundleVersion": version,
        "CFBundleDevelopmentRegion": "en",
        "LSApplicationCategoryType": "public.app-category.productivity",
        "LSMinimumSystemVersion": min_macos,
        "LSRequiresNativeExecution": True,  # MLX needs Apple silicon; never under Rosetta
        "LSArchitecturePriority": ["arm64"],
        "NSHighResolutionCapable": True,  # Retina
        "NSRequiresAquaSystemAppearance": False,  # follow the system's dark mode
        "NSSupportsAutomaticGraphicsSwitching": True,
        "NSHumanReadableCopyright": "Draftless contributors. Apache-2.0. "
        "Includes SmolLM2-135M-Instruct (Apache-2.0).",
    }


if __name__ == "__main__":  # print what the spec would use on this machine
    import json

    print(
        json.dumps(
            {
                "version": project_version(),
                "minimum_macos": minimum_macos(),
                "platform": sys.platform,
            },
            indent=2,
        )
    )
