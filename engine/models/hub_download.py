"""Hub downloads with byte progress, a prompt cancel and resume from the bytes on disk.

Why not ``snapshot_download``/``hf_hub_download``: in huggingface_hub 2.x both write each
file to a process-unique ``<etag>.<random>.incomplete`` file and delete it when the call
fails or is interrupted (``file_download._download_to_tmp_and_move``), in the cache and in
``local_dir`` mode alike, so no later call can resume it; they resume only within one call
(retries after a dropped connection). So this module keeps the partial file itself
(``<folder>/.partial/<file>.<etag>.part``) and hands it to the library's own transfer,
``http_get(..., resume_size=...)``, which sends ``Range: bytes=<size>-`` and appends. The
file list, URLs, sizes, ETags and auth headers also come from huggingface_hub.

Each file is transferred in a worker thread while the caller waits on ``cancel``: the
worker stops at its next chunk (the progress hook raises before the chunk is written, so
the partial file holds only whole chunks) and the caller returns within about a second
even while the connection stalls (a lock keeps a resume from writing the same partial
file until the stalled worker has let go of it). A finished file is checked against its ETag (sha256 for LFS files, the
git blob sha1 otherwise) before it is moved into place, so a resumed file equals the hub's.
A folder whose download finished (``download_complete``: marked ``.complete`` and holding
every weight file) is used as it is when the hub cannot be reached.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from ..errors import EngineError
from ..untrusted import read_regular_file, write_atomic
from .gguf_convert import ProgressCallback

CHUNK_BYTES = 1 << 20  # progress and cancel granularity (the library's default is 10 MiB)
POLL_SECONDS = 0.1
COMPLETE = ".complete"  # written once every file is in place (holds the commit)
INDEX = "model.safetensors.index.json"  # a sharded model's list of its weight files
INDEX_BYTES = 16 << 20  # far above a real index (a 70B model's is about 100 KB)
ETAGS = ".etags.json"  # the hub's ETag of each file in place: a changed file is fetched again
STOP_SECONDS = 1.0  # a stalled connection is left to time out on its own after this
_part_locks: dict[Path, threading.Lock] = {}  # one writer per partial file, also across calls
_locks_guard = threading.Lock()


class DownloadCancelled(EngineError):
    """The person cancelled; the bytes already downloaded stay on disk for a resume."""


def download_model(
    repo_id: str,
    folder: Path,
    progress: ProgressCallback | None = None,
    cancel: Callable[[], bool] | None = None,
    endpoint: str | None = None,
    allow_patterns: list[str] | None = None,
) -> Path:
    """Download ``repo_id``'s model files into ``folder`` (resuming partial files there);
    raise DownloadCancelled once ``cancel()`` says so (``threading.Event().is_set`` or a
    stream's ``should_stop``), EngineError when the hub fails."""
    from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, filter_repo_objects

    cancel = cancel or (lambda: False)
    try:
        info = HfApi(endpoint=endpoint).model_info(repo_id)
        names = sorted(
            filter_repo_objects(
                [s.rfilename for s in info.siblings or []], allow_patterns=allow_patterns
            )
        )
        files = []
        for name in names:
            check_repo_file_name(repo_id, name)
            url = hf_hub_url(repo_id, name, revision=info.sha, endpoint=endpoint)
            meta = get_hf_file_metadata(url)
            files.append((name, meta.location or url, meta.size, meta.etag))
    except EngineError:
        raise
    except Exception as error:  # offline, 404, auth… (huggingface_hub raises many kinds)
        if download_complete(folder):  # downloaded before: works offline
            return folder
        raise _hub_error(repo_id, error) from None
    total = sum(size or 0 for _, _, size, _ in files)
    finished, have = 0, _read_etags(folder)
    for name, url, size, etag in files:
        if cancel():
            raise DownloadCancelled(f"Download of {repo_id} cancelled; choose it again to resume.")
        target = folder / name
        current = target.exists() and (
            have.get(name) == etag if etag else size is None or target.stat().st_size == size
        )
        if not current:
            _download_file(
                repo_id,
                name,
                url,
                size,
                etag,
                target,
                folder,
                cancel,
                _reporter(repo_id, progress, finished, total, cancel),
                build_hf_headers(),
            )
            have[name] = etag
            write_atomic(folder / ETAGS, json.dumps(have, indent=1))
        finished += size or 0
    write_atomic(folder / COMPLETE, info.sha or "")
    if progress:
        progress(total, total, f"Downloaded {repo_id}")
    return folder


def download_complete(folder: Path) -> bool:
    """The download finished (``download_model`` marks the folder once every file is in
    place) and every weight file is here: all those a sharded model's index names, else at
    least one. The one test of a finished download, for the engine and the app alike."""
    if not (folder / COMPLETE).is_file():
        return False
    try:
        index = json.loads(read_regular_file(folder / INDEX, INDEX_BYTES))
        shards = set(index["weight_map"].values())
    except FileNotFoundError:
        return any(folder.glob("*.safetensors"))
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return False  # an index that cannot be read: the model cannot load either
    return bool(shards) and all(
        isinstance(s, str) and "/" not in s and (folder / s).is_file() for s in shards
    )


def _download_file(
    repo_id,
    name,
    url,
    size,
    etag,
    target: Path,
    folder: Path,
    cancel: Callable[[], bool],
    tqdm_class,
    headers,
) -> None:
    from huggingface_hub.file_download import http_get

    part = folder / ".partial" / f"{name}.{(etag or 'unknown')[:16]}.part"
    part.parent.mkdir(parents=True, exist_ok=True)
    for stale in part.parent.glob(f"{glob.escape(Path(name).name)}.*.part"):
        if stale != part and stale.name.count(".") == part.name.count("."):
            stale.unlink(missing_ok=True)  # the hub's file changed since: start afresh
    if size is not None and part.exists() and part.stat().st_size > size:
        part.unlink()  # longer than the file can be: not a prefix of it
    failure: list[BaseException] = []

    def transfer():
        with _lock_for(part):
            try:
                with part.open("ab") as file:
                    http_get(
                        url,
                        file,
                        resume_size=file.tell(),
                        headers=headers,
                        expected_size=size,
                        displayed_filename=name,
                        tqdm_class=tqdm_class,
                    )
            except BaseException as error:  # handed to the waiting caller
                failure.append(error)

    worker = threading.Thread(target=transfer, name=f"download {name}", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(POLL_SECONDS)
        if worker.is_alive() and cancel():
            worker.join(STOP_SECONDS)  # lets it close the partial file at its next chunk
            raise DownloadCancelled(f"Download of {repo_id} cancelled; choose it again to resume.")
    if failure:
        if isinstance(failure[0], DownloadCancelled):
            raise failure[0]
        raise _hub_error(repo_id, failure[0])
    if etag and not _matches(part, etag):
        part.unlink(missing_ok=True)
        raise EngineError(
            f"The downloaded {name} of {repo_id} does not match the hub's file "
            "(damaged on the way); choose the model again to download it afresh."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    part.replace(target)


def _read_etags(folder: Path) -> dict:
    try:
        etags = json.loads(read_regular_file(folder / ETAGS, 1 << 20))
    except (OSError, ValueError, RecursionError):  # none yet, or damaged: all checked again
        return {}
    return {k: v for k, v in etags.items() if isinstance(v, str)} if isinstance(etags, dict) else {}


def check_repo_file_name(repo_id: str, name: str) -> None:
    """A file name from the hub's listing must stay inside the model's folder."""
    parts = PurePosixPath(name).parts
    if (
        not parts
        or name.startswith("/")
        or "\\" in name
        or ".." in parts
        or "\0" in name
        or any(part.startswith("~") for part in parts[:1])
    ):
        raise EngineError(
            f"The hub lists a file named {name!r} for {repo_id}, which would be "
            "written outside the model's folder; the download was refused."
        )


def _lock_for(part: Path) -> threading.Lock:
    with _locks_guard:
        return _part_locks.setdefault(part, threading.Lock())


def _matches(path: Path, etag: str) -> bool:
    """Compare with the hub's ETag: sha256 of LFS files, git blob sha1 of small files."""
    if re.fullmatch(r"[0-9a-f]{64}", etag):
        digest = hashlib.sha256()
    elif re.fullmatch(r"[0-9a-f]{40}", etag):
        digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    else:
        return True  # an ETag that is no content hash: the size check in http_get is all we have
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest() == etag


def _reporter(
    repo_id: str,
    progress: ProgressCallback | None,
    before: int,
    total: int,
    cancel: Callable[[], bool],
):
    """A tqdm class for http_get: overall bytes to ``progress``; stops when cancelled."""
    from huggingface_hub import constants
    from tqdm.auto import tqdm

    constants.DOWNLOAD_CHUNK_SIZE = CHUNK_BYTES  # read by http_get at each call

    class ReportingTqdm(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True  # no console bar; the app shows its own
            super().__init__(*args, **kwargs)
            self.bytes_done = int(kwargs.get("initial") or 0)  # a disabled tqdm counts nothing

        def update(self, n=1):
            if cancel():  # before the chunk is written: the file keeps whole chunks
                raise DownloadCancelled(f"Download of {repo_id} cancelled.")
            result = super().update(n)
            self.bytes_done += n
            if progress:
                done = before + self.bytes_done
                progress(
                    done,
                    max(total, done),
                    f"Downloading {repo_id}: {_amount(done)} of {_amount(total)}",
                )
            return result

    return ReportingTqdm


def _amount(size: int) -> str:
    if size >= 1 << 30:
        return f"{size / (1 << 30):.2f} GB"
    return f"{size / (1 << 20):.0f} MB" if size >= 10 << 20 else f"{size / (1 << 20):.1f} MB"


def _hub_error(repo_id: str, error: BaseException) -> EngineError:
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    return EngineError(
        f"Could not download {repo_id!r} from Hugging Face ({reason}). "
        "Check the id and your internet connection, or pick a local "
        "model folder instead."
    )
