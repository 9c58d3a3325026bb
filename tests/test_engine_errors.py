"""Bad input gets one engine error type with a message a person can act on."""

import json
import shutil

import pytest

from engine import EngineError
from engine.models import load_model
from engine.runtime.session import ChatSession
from engine.settings import DraftSettings, GenerationRequest, SamplingSettings

from .tiny_model import write_tiny


def test_missing_folder(tmp_path):
    with pytest.raises(EngineError, match="No model folder"):
        load_model(str(tmp_path / "nowhere"))


def test_folder_without_config(tmp_path):
    with pytest.raises(EngineError, match="config.json is missing"):
        load_model(str(tmp_path))


def test_unknown_architecture(tiny_model_dir, tmp_path):
    broken = shutil.copytree(tiny_model_dir, tmp_path / "m")
    config = json.loads((broken / "config.json").read_text())
    config["model_type"] = "frobnicator"
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(EngineError, match="'frobnicator' is not supported"):
        load_model(str(broken))


def test_missing_tokenizer(tiny_model_dir, tmp_path):
    broken = shutil.copytree(tiny_model_dir, tmp_path / "m")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (broken / name).unlink()
    with pytest.raises(EngineError, match="no tokenizer"):
        load_model(str(broken))


def test_corrupt_weights(tiny_model_dir, tmp_path):
    broken = shutil.copytree(tiny_model_dir, tmp_path / "m")
    (broken / "model.safetensors").write_bytes(b"\x00not safetensors at all" * 10)
    # found in the weight file's header, before anything is built from it
    with pytest.raises(EngineError, match="model.safetensors is damaged .*Download or convert"):
        load_model(str(broken))


def test_unreachable_hub_id_gives_a_clear_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EngineError, match="Could not download 'nobody/no-such-model'"):
        load_model("nobody/no-such-model")


@pytest.mark.parametrize(
    "settings,message",
    [
        (DraftSettings(draft_count=0), "draft_count must be an integer from 1 to 64"),
        (DraftSettings(draft_count=65), "draft_count"),
        (DraftSettings(ngram_order=33), "ngram_order must be an integer from 1 to 32"),
        (DraftSettings(ngram_order=2, ngram_min=3), "ngram_min"),
        (DraftSettings(drafter="telepathy"), "Unknown drafter 'telepathy'"),
    ],
)
def test_out_of_range_draft_settings_are_rejected(settings, message):
    with pytest.raises(EngineError, match=message):
        GenerationRequest(prompt="hi", raw=True, draft=settings).validated()


def test_bad_sampling_and_empty_prompts_are_rejected():
    with pytest.raises(EngineError, match="temperature"):
        GenerationRequest(
            prompt="hi", raw=True, sampling=SamplingSettings(temperature=-1.0)
        ).validated()
    with pytest.raises(EngineError, match="empty"):
        GenerationRequest(prompt="   ", raw=True).validated()
    with pytest.raises(EngineError, match="empty"):
        GenerationRequest(messages=[{"role": "user", "content": ""}]).validated()


def test_over_long_prompt(tiny_loaded):
    request = GenerationRequest(prompt="x" * 5000, raw=True, max_tokens=10).validated()
    with pytest.raises(EngineError, match="reads at most 4096"):
        list(ChatSession(tiny_loaded).generate(request))


def test_untrimmable_cache_decodes_plainly_and_says_so(tmp_path):
    loaded = load_model(str(write_tiny(tmp_path / "llama4", "llama4")))  # chunked attention
    assert loaded.speculation.startswith("off (") and "cannot be rolled back" in loaded.speculation
    request = GenerationRequest(
        prompt="abcabcabcabc", raw=True, max_tokens=12, draft=DraftSettings(drafter="prompt-lookup")
    ).validated()
    done = list(ChatSession(loaded).generate(request))[-1]
    assert done.stats["speculation"] == loaded.speculation
    assert done.stats["drafted"] == 0 and done.stats["passes"] == 12
