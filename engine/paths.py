"""Where the engine writes: platformdirs folders, each overridable by an environment variable."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "Draftless"


def data_dir() -> Path:
    """User data (n-gram memory across chats): $DRAFTLESS_DATA_DIR or the user data dir."""
    return Path(os.environ.get("DRAFTLESS_DATA_DIR") or platformdirs.user_data_dir(APP_NAME))


def cache_dir() -> Path:
    """Recomputable caches (cost curves, bigram tables): $DRAFTLESS_CACHE_DIR or the user cache dir."""
    return Path(os.environ.get("DRAFTLESS_CACHE_DIR") or platformdirs.user_cache_dir(APP_NAME))


def models_dir() -> Path:
    """Converted models: $DRAFTLESS_MODELS_DIR or ``models`` in the cache dir."""
    override = os.environ.get("DRAFTLESS_MODELS_DIR")
    return Path(override) if override else cache_dir() / "models"


def downloads_dir() -> Path:
    """Models downloaded from the hub (partial files resume): $DRAFTLESS_DOWNLOADS_DIR or
    ``downloads`` in the cache dir."""
    override = os.environ.get("DRAFTLESS_DOWNLOADS_DIR")
    return Path(override) if override else cache_dir() / "downloads"


def config_dir() -> Path:
    """User settings: $DRAFTLESS_CONFIG_DIR or the user config dir."""
    return Path(os.environ.get("DRAFTLESS_CONFIG_DIR") or platformdirs.user_config_dir(APP_NAME))
