"""A hostile or damaged model folder is refused with a message a person can act on, before
anything is built from it."""

import json
import resource
import shutil
import struct

import pytest

from engine.errors import EngineError
from engine.models import load_model
from engine.runtime.session import ChatSession
from engine.settings import GenerationRequest


@pytest.fixture
def folder(tmp_path, tiny_model_dir):
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    return copy


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def test_millions_of_layers_are_refused_before_any_is_built(folder):
    edit_config(folder, num_hidden_layers=3_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(EngineError, match=r"3,000,000 layers, but its weights hold 2"):
        load_model(str(folder))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"vocab_size": 0}, r"vocab_size = 0; it must be a positive whole number"),
        ({"hidden_size": -64}, r"hidden_size = -64"),
        ({"num_attention_heads": "4"}, r"num_attention_heads = '4'"),
        (
            {"vocab_size": 300},
            r"vocab_size = 300, but the token embedding in the weights has 259 rows",
        ),
        ({"model_type": "../../etc"}, r"names no model_type"),
    ],
)
def test_bad_sizes_in_the_config_are_clear_errors(folder, changes, message):
    edit_config(folder, **changes)
    with pytest.raises(EngineError, match=message):
        load_model(str(folder))


def test_a_config_that_is_no_object_is_a_clear_error(folder):
    (folder / "config.json").write_text("[1, 2]")
    with pytest.raises(EngineError, match="not a JSON object"):
        load_model(str(folder))


def test_a_weight_file_with_a_monstrous_header_is_called_damaged(folder):
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(struct.pack("<Q", 1 << 60) + data[8:])
    with pytest.raises(EngineError, match="is damaged .*header claims"):
        load_model(str(folder))


def test_an_error_without_a_message_still_says_something(folder, monkeypatch):
    import mlx_lm

    def fail(*args, **kwargs):
        raise KeyError()

    monkeypatch.setattr(mlx_lm, "load", fail)
    with pytest.raises(
        EngineError, match=r"Could not load the model in .*: KeyError \(no message\)"
    ):
        load_model(str(folder))


def test_a_chat_template_that_raises_is_a_clear_error_not_an_internal_one(folder):
    (folder / "chat_template.jinja").write_text("{{ raise_exception('this template refuses') }}")
    loaded = load_model(str(folder))
    request = GenerationRequest(
        messages=[{"role": "user", "content": "hi"}], max_tokens=4
    ).validated()
    with pytest.raises(
        EngineError, match="chat template of .* failed .*this template refuses.*raw prompt"
    ):
        list(ChatSession(loaded).generate(request))


@pytest.mark.parametrize(
    "name", ["../evil.json", "a/../../evil.json", "/etc/passwd", "..\\evil.json", "~/evil.json", ""]
)
def test_a_hub_file_name_that_leaves_the_model_folder_is_refused(name):
    from engine.models.hub_download import check_repo_file_name

    with pytest.raises(EngineError, match="outside the model's folder"):
        check_repo_file_name("someone/model", name)
    check_repo_file_name("someone/model", "subfolder/model-00001-of-00002.safetensors")
