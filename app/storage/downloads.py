"""Model downloads and installed models, without Qt: a download's speed and time left from
its byte progress, and the model folders on this machine with their sizes, each complete
or not (and a delete that never leaves the app's own folders)."""

from __future__ import annotations

import shutil
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from engine import paths as engine_paths
from engine.models.embedded import EMBEDDED_NAME
from engine.models.hub_download import download_complete

SPEED_WINDOW_S = 5.0  # speed over the last seconds: steady, yet quick to follow a change
# no bytes for this long: the time left is not worth a figure (it grew without bound while
# the bar sat still: "about 476.3 h left", unchanged for 9 s)
STALLED_S = SPEED_WINDOW_S


def size_text(size: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    return ""


def duration_text(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


@dataclass
class DownloadMeter:
    """Bytes done over time → speed (bytes/s over the last ``SPEED_WINDOW_S``) and time left."""

    samples: deque = field(default_factory=deque)  # (seconds, bytes done)
    done: int = 0
    total: int = 0
    grew_at: float | None = None  # when the count last grew (the first report counts)

    def update(self, done: int, total: int, now: float) -> None:
        if self.grew_at is None or done > self.done:
            self.grew_at = now
        self.done, self.total = done, total
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[1][0] >= SPEED_WINDOW_S:
            self.samples.popleft()

    def speed_at(self, now: float | None = None) -> float | None:
        """Bytes a second over the window, up to ``now`` (default: the last report): time
        without reports slows it, as it slows the download."""
        if len(self.samples) < 2:
            return None
        (began, first), (last_at, last) = self.samples[0], self.samples[-1]
        end = last_at if now is None else max(now, last_at)
        return (last - first) / (end - began) if end > began else None

    @property
    def speed(self) -> float | None:
        return self.speed_at()

    def seconds_left_at(self, now: float | None = None) -> float | None:
        speed = self.speed_at(now)
        if not speed or self.total <= 0:
            return None
        return max(self.total - self.done, 0) / speed

    @property
    def seconds_left(self) -> float | None:
        return self.seconds_left_at()

    def stalled_for(self, now: float | None) -> float:
        """Seconds since the count last grew (0 without ``now``)."""
        if now is None or self.grew_at is None:
            return 0.0
        return max(now - self.grew_at, 0.0)

    def describe(self, name: str, now: float | None = None) -> str:
        """'Downloading owner/model: 45% of 540.0 MB · 12.3 MB/s · about 1 min left' (as of
        ``now``: asked again while no bytes come, the speed falls and the time left grows,
        and past ``STALLED_S`` it says so); 'Downloading owner/model: starting…' while its
        size is not known (total 0)."""
        if self.total <= 0:
            return f"Downloading {name}: starting…"
        parts = [f"Downloading {name}: {self.done / self.total:.0%} of {size_text(self.total)}"]
        stalled = self.stalled_for(now)
        if stalled >= STALLED_S:
            parts.append(f"no data for {duration_text(stalled)}, waiting for the hub")
            return " · ".join(parts)
        speed, left = self.speed_at(now), self.seconds_left_at(now)
        if speed is not None:
            parts.append(f"{size_text(speed)}/s")
        if left is not None:
            parts.append(f"about {duration_text(left)} left")
        return " · ".join(parts)


@dataclass(frozen=True)
class InstalledModel:
    name: str  # what loads it: a hub id, or "" for the built-in model's folder
    label: str
    path: Path
    size: int  # bytes on disk
    complete: bool = True  # False: a download that stopped part-way (resume or delete it)


def folder_size(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (links are not followed)."""
    total = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def installed_models() -> list[InstalledModel]:
    """The models in the app's folders: converted ones (the built-in model) and downloads.
    A folder this user may not read holds none it could load."""
    found = []
    for root, kind in (
        (engine_paths.models_dir(), "converted"),
        (engine_paths.downloads_dir(), ""),
    ):
        try:
            folders = sorted(root.iterdir()) if root.is_dir() else []
        except OSError:
            continue
        for folder in folders:
            if folder.is_symlink() or not folder.is_dir() or folder.name.startswith("."):
                continue
            if kind:  # the built-in model loads by no name, other conversions by folder
                name = "" if folder.name.startswith(EMBEDDED_NAME) else str(folder)
                label = f"{folder.name} (converted)"
            else:
                name = label = folder.name.replace("--", "/", 1)
            complete = bool(kind) or download_complete(folder)
            found.append(InstalledModel(name, label, folder, folder_size(folder), complete))
    return found


def is_loaded(model: InstalledModel, loaded_path: str | Path | None) -> bool:
    return bool(loaded_path) and Path(loaded_path).resolve() == model.path.resolve()


def delete_installed(model: InstalledModel, loaded_path: str | Path | None) -> None:
    """Delete a model folder the app made; ValueError (a reason to show) for the loaded
    model or for any folder that is not directly inside the app's model folders."""
    roots = (engine_paths.models_dir(), engine_paths.downloads_dir())
    folder = model.path
    if folder.is_symlink() or folder.parent.resolve() not in [r.resolve() for r in roots]:
        raise ValueError(f"{folder} is not a model folder of Draftless; it was left alone.")
    if is_loaded(model, loaded_path):
        raise ValueError(f"{model.label} is loaded: load another model first, then delete it.")
    shutil.rmtree(folder)
