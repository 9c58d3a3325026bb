"""Where the app keeps its files: platformdirs, overridable for tests.

``DRAFTLESS_DATA_DIR`` (the SQLite database) and ``DRAFTLESS_CONFIG_DIR`` (settings.json)
replace the platform's user directories when set.
"""

from __future__ import annotations

from pathlib import Path

from engine import paths as engine_paths

REPO_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    path = engine_paths.data_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def config_dir() -> Path:
    path = engine_paths.config_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def resource(*parts: str) -> Path:
    """A file under resources/ (next to the package when run from a checkout or a bundle)."""
    return REPO_ROOT.joinpath("resources", *parts)
