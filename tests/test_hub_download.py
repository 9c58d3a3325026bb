"""Downloads through huggingface_hub from a local server in the Hub's layout (HF_ENDPOINT),
in a child process so the endpoint is read as huggingface_hub reads it: at import."""

import json
import os
import subprocess
import sys

from .fake_hub import COMMIT, FakeHub

REPO = "tiny-org/tiny-llama"
DOWNLOAD = ("import json, sys\nfrom engine.models import download_from_hub\n"
            "from engine.errors import EngineError\n"
            "try:\n    print(json.dumps({'path': str(download_from_hub(sys.argv[1]))}))\n"
            "except EngineError as error:\n    print(json.dumps({'error': str(error)}))\n")


def download(endpoint, home, repo=REPO):
    env = dict(os.environ, HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_XET="1",
               PYTHONPATH=os.getcwd())
    result = subprocess.run([sys.executable, "-c", DOWNLOAD, repo], env=env, capture_output=True,
                            text=True, timeout=240)
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
