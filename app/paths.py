"""Where the app keeps its files: platformdirs, overridable for tests.

``DRAFTLESS_DATA_DIR`` (the SQLite database) and ``DRAFTLESS_CONFIG_DIR`` (settings.json)
replace the platform's user directories when set.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_config_dir, user_data_dir

APP_NAME = "Draftless"
REPO_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    path = Path(os.environ.get("DRAFTLESS_DATA_DIR") or user_data_dir(APP_NAME, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def config_dir() -> Path:
    path = Path(os.environ.get("DRAFTLESS_CONFIG_DIR") or user_config_dir(APP_NAME, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def resource(*parts: str) -> Path:
    """A file under resources/ (next to the package when run from a checkout or a bundle)."""
    return REPO_ROOT.joinpath("resources", *parts)
