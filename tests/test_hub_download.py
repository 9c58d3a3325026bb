"""Downloads through huggingface_hub from a local server in the Hub's layout (HF_ENDPOINT),
in a child process so the endpoint is read as huggingface_hub reads it: at import."""

import json
import os
import subprocess
import sys

from .fake_hub import COMMIT, FakeHub

REPO = "tiny-org/tiny-llama"
DOWNLOAD = (
    "import json, sys\nfrom engine.models import download_from_hub\n"
    "from engine.errors import EngineError\n"
    "try:\n    print(json.dumps({'path': str(download_from_hub(sys.argv[1]))}))\n"
    "except EngineError as error:\n    print(json.dumps({'error': str(error)}))\n"
)


def download(endpoint, home, repo=REPO):
    env = dict(
        os.environ,
        HF_ENDPOINT=endpoint,
        HF_HOME=str(home),
        HF_HUB_DISABLE_XET="1",
        DRAFTLESS_DOWNLOADS_DIR=str(home / "downloads"),
        PYTHONPATH=os.getcwd(),
    )
    result = subprocess.run(
        [sys.executable, "-c", DOWNLOAD, repo], env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_model_downloads_through_huggingface_hub_and_loads(tiny_model_dir, tmp_path):
    from engine.models import load_model

    with FakeHub({REPO: tiny_model_dir}) as hub:
        out = download(hub.url, tmp_path / "hf")
    assert "error" not in out, out
    folder = out["path"]
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert open(os.path.join(folder, name), "rb").read() == (tiny_model_dir / name).read_bytes()
    assert ("GET", f"/{REPO}/resolve/{COMMIT}/model.safetensors", None) in hub.requests
    loaded = load_model(folder)
    assert loaded.speculation == "on (tree)"


def test_no_hub_gives_a_message_a_person_can_act_on(tmp_path):
    with FakeHub({}) as hub:
        missing = download(hub.url, tmp_path / "hf", "tiny-org/not-there")
    offline = download("http://127.0.0.1:9", tmp_path / "hf2")  # nothing listens there
    for out in (missing, offline):
        assert "Could not download" in out["error"] and "internet connection" in out["error"]


def hub_folder(tmp_path):
    """A repo whose weights are big enough (served slowly) to cancel mid-way."""
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(os.urandom(200 * 1024))
    (folder / "tokenizer.json").write_text('{"version": "1.0"}')
    return folder


def test_a_cancelled_download_keeps_its_bytes_and_the_next_one_resumes_them(tmp_path, monkeypatch):
    import threading

    import pytest
    from huggingface_hub import constants

    from engine.models import hub_download

    monkeypatch.setattr(hub_download, "CHUNK_BYTES", 16 * 1024)
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", constants.DOWNLOAD_CHUNK_SIZE)
    source, target = hub_folder(tmp_path), tmp_path / "downloads" / "tiny"
    weights = (source / "model.safetensors").read_bytes()
    before = (source / "config.json").stat().st_size  # files come in name order
    cancel, reports = threading.Event(), []

    def progress(done, total, message):
        reports.append(done)
        if before < done < before + len(weights):  # mid-way through the weights
            cancel.set()

    with FakeHub({REPO: source}, slow={"model.safetensors"}) as hub:
        with pytest.raises(hub_download.DownloadCancelled, match="cancelled"):
            hub_download.download_model(REPO, target, progress, cancel.is_set, endpoint=hub.url)
        partial = next((target / ".partial").glob("model.safetensors.*.part"))
        kept = partial.stat().st_size
        assert 0 < kept < len(weights) and partial.read_bytes() == weights[:kept]
        assert not (target / "model.safetensors").exists()

        reports.clear()
        folder = hub_download.download_model(
            REPO, target, lambda d, t, m: reports.append(d), endpoint=hub.url
        )
    url = f"/{REPO}/resolve/{COMMIT}/model.safetensors"
    assert ("GET", url, f"bytes={kept}-") in hub.requests
    assert [r for r in hub.requests if r[:2] == ("GET", url)][-1][2] == f"bytes={kept}-"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (folder / name).read_bytes() == (source / name).read_bytes()
    mid_file = [d for d in reports if before + kept < d < before + len(weights)]
    assert len(set(mid_file)) >= 2  # progress grows by bytes within the one file
    assert reports == sorted(reports)


def test_a_resumed_file_that_does_not_match_the_hub_is_refused_and_a_finished_one_works_offline(
    tmp_path,
):
    import pytest

    from engine.errors import EngineError
    from engine.models import hub_download
    from .fake_hub import etag_of

    source, target = hub_folder(tmp_path), tmp_path / "downloads" / "tiny"
    weights = (source / "model.safetensors").read_bytes()
    partial = target / ".partial" / f"model.safetensors.{etag_of(weights)[:16]}.part"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"x" * 1000)  # not the hub's first 1000 bytes
    with FakeHub({REPO: source}) as hub:
        with pytest.raises(EngineError, match="does not match the hub's file"):
            hub_download.download_model(REPO, target, endpoint=hub.url)
        assert not partial.exists()  # the next try starts afresh
        folder = hub_download.download_model(REPO, target, endpoint=hub.url)
    assert (folder / "model.safetensors").read_bytes() == weights
    # once complete, the model is used without the hub (offline)
    assert hub_download.download_model(REPO, target, endpoint="http://127.0.0.1:9") == folder
    with pytest.raises(EngineError, match="internet connection"):
        hub_download.download_model(REPO, tmp_path / "other", endpoint="http://127.0.0.1:9")


def test_a_marked_folder_missing_a_shard_is_incomplete_for_the_app_and_the_engine(
    tmp_path, monkeypatch
):
    """One test of a finished download: the app lists the folder as an incomplete download,
    and the engine does not load it offline as if it were whole."""
    import pytest

    from app.storage.downloads import installed_models
    from engine.errors import EngineError
    from engine.models import hub_download

    monkeypatch.setenv("DRAFTLESS_DOWNLOADS_DIR", str(tmp_path / "downloads"))
    folder = tmp_path / "downloads" / "tiny-org--tiny-llama"
    folder.mkdir(parents=True)
    (folder / hub_download.COMPLETE).write_text(COMMIT)
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"w")
    shards = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (folder / hub_download.INDEX).write_text(json.dumps({"weight_map": shards}))
    [listed] = [model for model in installed_models() if model.path == folder]
    assert not listed.complete
    with pytest.raises(EngineError, match="internet connection"):
        hub_download.download_model(REPO, folder, endpoint="http://127.0.0.1:9")


def test_a_file_changed_on_the_hub_is_fetched_again_and_stale_partials_go(tmp_path):
    from engine.models import hub_download
    from .fake_hub import etag_of

    source, target = hub_folder(tmp_path), tmp_path / "downloads" / "tiny"
    with FakeHub({REPO: source}) as hub:
        hub_download.download_model(REPO, target, endpoint=hub.url)
        (source / "config.json").write_text('{"model_type": "qwen2"}')  # same size, new content
        weights = (source / "model.safetensors").read_bytes()
        stale = target / ".partial" / "model.safetensors.0000000000000000.part"
        stale.write_bytes(b"old")
        too_long = target / ".partial" / f"model.safetensors.{etag_of(weights)[:16]}.part"
        too_long.write_bytes(weights + b"extra")
        (target / "model.safetensors").unlink()
        hub.requests.clear()
        folder = hub_download.download_model(REPO, target, endpoint=hub.url)
    for name in ("config.json", "model.safetensors"):
        assert (folder / name).read_bytes() == (source / name).read_bytes()
    assert not stale.exists() and not too_long.exists()
    gets = [path for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path]
    assert sorted(p.rsplit("/", 1)[1] for p in gets) == ["config.json", "model.safetensors"]


def test_a_download_runs_beside_answers_and_stops_when_cancelled(
    tiny_model_dir, tmp_path, monkeypatch
):
    import asyncio

    from engine.events import DoneEvent, ErrorEvent, ProgressEvent
    from engine.models import hub_download
    from engine.runtime.service import EngineService
    from engine.settings import GenerationRequest

    monkeypatch.setattr(hub_download, "CHUNK_BYTES", 16 * 1024)
    monkeypatch.setenv("DRAFTLESS_DOWNLOADS_DIR", str(tmp_path / "downloads"))
    source = hub_folder(tmp_path)
    (source / "model.safetensors").write_bytes(os.urandom(2 << 20))  # ~10 s, served slowly
    service = EngineService()
    question = GenerationRequest(
        messages=[{"role": "user", "content": "hi"}], model=str(tiny_model_dir), max_tokens=8
    )

    async def run():
        [e async for e in service.load(str(tiny_model_dir))]
        download, events = service.download(REPO), []

        async def follow():
            async for event in download:
                events.append(event)

        following = asyncio.ensure_future(follow())
        while not any(isinstance(e, ProgressEvent) and e.done > 0 for e in events):
            await asyncio.sleep(0.01)
        answer = [e async for e in service.generate(question)]
        downloading = not following.done()
        download.cancel()
        await asyncio.wait_for(following, 30)
        return answer, downloading, events

    try:
        with FakeHub({REPO: source}, slow={"model.safetensors"}) as hub:
            monkeypatch.setenv("HF_ENDPOINT", hub.url)
            answer, downloading, events = asyncio.run(run())
    finally:
        service.shutdown()
    assert isinstance(answer[-1], DoneEvent) and answer[-1].tokens  # answered meanwhile
    assert downloading  # the answer did not wait for the download
    assert isinstance(events[-1], ErrorEvent) and "cancelled" in events[-1].message
    assert not (tmp_path / "downloads" / "tiny-org--tiny-llama" / "model.safetensors").exists()


def test_a_download_needs_a_hub_id(tmp_path):
    import asyncio

    from engine.events import ErrorEvent
    from engine.runtime.service import EngineService

    service = EngineService()
    try:
        events = asyncio.run(_collect(service.download("../../etc")))
    finally:
        service.shutdown()
    assert (
        isinstance(events[-1], ErrorEvent) and "not a Hugging Face model id" in events[-1].message
    )


async def _collect(stream):
    return [event async for event in stream]
