"""Hub search without Qt: repos grouped by the model they convert with their quantizations in
order, download sizes from file sizes, a bounded search, and what went wrong in plain words."""

from __future__ import annotations

import httpx2
import pytest
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from huggingface_hub.hf_api import ModelInfo, RepoSibling

from app.storage.hub_client import (
    HubUnavailable,
    _bound_timeout,
    bound_hub_timeouts,
    explain,
    repo_size,
    search_models,
)
from app.storage.hub_models import (
    NOT_STATED,
    base_model,
    count_text,
    download_size,
    group_models,
    parameters_text,
    split_quantization,
)

from .fake_hf_api import FakeHfApi


@pytest.mark.parametrize(
    "name,stem,label,bits",
    [
        ("Qwen2.5-1.5B-Instruct-4bit", "Qwen2.5-1.5B-Instruct", "4-bit", 4.0),
        ("Qwen3-4B-4bit-DWQ", "Qwen3-4B", "4-bit DWQ", 4.0),
        ("Llama-3.2-1B-Instruct-bf16", "Llama-3.2-1B-Instruct", "bf16", 16.0),
        ("gpt-oss-20b-MXFP4-Q8", "gpt-oss-20b", "mxfp4 Q8", 4.0),
        ("Mistral-7B-Instruct-v0.3-8-bit", "Mistral-7B-Instruct-v0.3", "8-bit", 8.0),
        ("SmolLM2-360M-Instruct", "SmolLM2-360M-Instruct", NOT_STATED, None),
        ("Qwen2.5-Coder-0.5B-Instruct-mlx", "Qwen2.5-Coder-0.5B-Instruct", NOT_STATED, None),
        ("4bit", "4bit", NOT_STATED, None),  # a name is never emptied
    ],
)
def test_a_repo_name_splits_into_its_model_and_quantization(name, stem, label, bits):
    assert split_quantization(name) == (stem, label, bits)


def test_the_base_model_is_the_one_quantized_and_parameters_come_from_the_name():
    tags = ["mlx", "base_model:finetune:x/y", "base_model:Qwen/Q", "base_model:quantized:Qwen/Q"]
    assert base_model(tags) == "Qwen/Q"
    assert base_model(["base_model:Qwen/P"]) == "Qwen/P"
    assert base_model(["mlx"]) is None and base_model(None) is None
    assert parameters_text("Qwen/Qwen2.5-1.5B-Instruct") == "1.5B"
    assert parameters_text("SmolLM2-360m-Instruct") == "360M"
    assert parameters_text("Qwen3-30B-A3B") == "30B"
    assert parameters_text("phi-4") == ""
    assert [count_text(n) for n in (950, 12_345, 4_100_000)] == ["950", "12.3k", "4.1M"]


def info(repo, downloads=0, likes=0, base=None):
    tags = ["mlx"] + ([f"base_model:quantized:{base}"] if base else [])
    return ModelInfo(id=repo, downloads=downloads, likes=likes, tags=tags)


def test_repos_group_by_the_model_they_convert_with_quantizations_by_bits():
    models = group_models(
        [
            info("mlx-community/Qwen2.5-7B-Instruct-4bit", 900, 5, "Qwen/Qwen2.5-7B-Instruct"),
            info("mlx-community/Qwen2.5-1.5B-Instruct-bf16", 300, 1, "Qwen/Qwen2.5-1.5B-Instruct"),
            info("other/Qwen2.5-7B-Instruct-8bit", 200, 2),  # no base tag: its name says it
            info("mlx-community/Qwen2.5-7B-Instruct-bf16", 50, 0, "mlx-community/x-bf16"),
            info("mlx-community/Qwen2.5-1.5B-Instruct-4bit", 100, 3, "Qwen/Qwen2.5-1.5B-Instruct"),
            info("mlx-community/Qwen2.5-7B-Instruct-3bit", 10, 0, "Qwen/Qwen2.5-7B-Instruct"),
        ]
    )
    assert [m.name for m in models] == [
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-1.5B-Instruct",
        "mlx-community/x-bf16",  # its base names another model: a group of its own
    ]
    seven = models[0]
    assert [q.label for q in seven.quantizations] == ["3-bit", "4-bit", "8-bit"]
    assert [q.repo for q in seven.quantizations][2] == "other/Qwen2.5-7B-Instruct-8bit"
    assert (seven.downloads, seven.likes, seven.parameters) == (1110, 7, "7B")
    assert [q.label for q in models[1].quantizations] == ["4-bit", "bf16"]


def sibling(name, size):
    return RepoSibling(rfilename=name, size=size)


def test_a_download_size_counts_the_files_a_download_fetches():
    files = [
        sibling("model-00001-of-00002.safetensors", 2_000),
        sibling("model-00002-of-00002.safetensors", 1_000),
        sibling("config.json", 30),
        sibling("README.md", 5_000),  # not downloaded
        sibling("original/consolidated.pth", 9_000),  # not downloaded
        sibling("tokenizer.json", 70),
    ]
    assert download_size(files) == 3_100
    assert download_size([sibling("model.safetensors", None), sibling("a.json", 3)]) is None
    assert download_size([sibling("config.json", 3)]) is None  # no weights: no model
    assert download_size(None) is None


def test_a_search_asks_for_mlx_models_and_reads_at_most_its_limit():
    api = FakeHfApi()
    models = search_models(api, "qwen instruct", limit=3)
    [asked] = api.searches
    assert asked == {"search": "qwen instruct", "filter": "mlx", "sort": "downloads", "limit": 3}
    assert sum(len(m.quantizations) for m in models) == 3
    assert models[0].name == "Qwen/Qwen2.5-7B-Instruct"
    assert search_models(api, "qwen", cancelled=lambda: True) == []  # stops at once
    assert repo_size(api, "mlx-community/Qwen2.5-1.5B-Instruct-8bit") == 1_640_001_200
    assert api.infos == ["mlx-community/Qwen2.5-1.5B-Instruct-8bit"]


def http_error(status):
    request = httpx2.Request("GET", "https://huggingface.co/api/models")
    return HfHubHTTPError("boom", response=httpx2.Response(status, request=request))


@pytest.mark.parametrize(
    "error,offline,words",
    [
        (OfflineModeIsEnabled("offline mode"), True, "HF_HUB_OFFLINE is set"),
        (httpx2.ConnectError("Name or service not known"), True, "ConnectError"),
        (httpx2.ReadTimeout("timed out"), True, "ReadTimeout"),
        (OSError("Network is unreachable"), True, "unreachable"),
        (http_error(429), False, "HTTP 429 Too Many Requests: too many searches"),
        (http_error(503), False, "HTTP 503 Service Unavailable: the hub has a problem"),
        (http_error(401), False, "HTTP 401 Unauthorized: it refused access"),
        (ValueError("bad page"), False, "The search failed: bad page"),
    ],
)
def test_why_the_hub_gave_no_answer_is_said_plainly(error, offline, words):
    said = explain(error)
    assert said.offline is offline and words in str(said)
    if offline:
        assert str(said).startswith("Offline: Hugging Face cannot be reached")
    assert "installed models and the catalog" in str(said)
    with pytest.raises(HubUnavailable, match="Hugging Face|search failed"):
        search_models(FakeHfApi(error=error), "qwen")


def test_offline_by_setting_asks_nothing(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    api = FakeHfApi()
    with pytest.raises(HubUnavailable, match="Offline: .*HF_HUB_OFFLINE is set") as raised:
        search_models(api, "qwen")
    assert raised.value.offline
    with pytest.raises(HubUnavailable):
        repo_size(api, "mlx-community/Qwen2.5-1.5B-Instruct-8bit")
    assert api.searches == [] and api.infos == []


def test_hub_requests_without_a_timeout_get_one_and_others_keep_theirs():
    from huggingface_hub import get_session

    bound_hub_timeouts()
    bound_hub_timeouts()  # twice: still one hook
    client = get_session()
    hooks = client.event_hooks["request"]
    assert hooks.count(_bound_timeout) == 1 and len(hooks) >= 2  # the library's stays
    unbounded = client.build_request("GET", "https://huggingface.co/api/models", timeout=None)
    for hook in hooks[1:]:
        hook(unbounded)
    assert unbounded.extensions["timeout"]["connect"] == 5.0
    assert unbounded.extensions["timeout"]["read"] == 10.0
    download = client.build_request("GET", "https://huggingface.co/x", timeout=20.0)
    _bound_timeout(download)
    assert download.extensions["timeout"]["read"] == 20.0
