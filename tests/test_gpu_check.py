"""The accelerator check runs here, on the tiny model: plain and the default on a
conversations file, every answer identical, measured beside predicted in its closing lines."""

import json

from engine.bench import gpu_check
from engine.drafters import DEFAULT_DRAFTER


def test_the_gpu_check_runs_on_this_cpu(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRAFTLESS_CACHE_DIR", str(tmp_path / "cache"))
    chats = tmp_path / "chats.jsonl"
    lines = [
        {
            "id": "a",
            "category": "prose",
            "messages": [
                {"role": "user", "content": "Say a b c a b c."},
                {"role": "assistant", "content": "a b c"},
            ],
        },
        {
            "id": "b",
            "category": "code",
            "messages": [
                {"role": "user", "content": "def f(): return f"},
                {"role": "assistant", "content": "x"},
            ],
        },
    ]
    chats.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "check"
    argv = ["--model", str(tiny_model_dir), "--conversations", str(chats)]
    argv += ["--max-tokens", "6", "--repeats", "1", "--out", str(out)]
    assert gpu_check.main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert {run["config"] for run in results["runs"]} == {"none", DEFAULT_DRAFTER}
    assert all(run["identical"] for run in results["runs"])
    assert set(results["verify_cost"]["median_s"]) >= {str(n) for n in gpu_check.WARM_LENGTHS}
    assert results["verify_cost"]["pipelined_share"] > 0
    said = capsys.readouterr().err
    assert "load average at start" in said and "measured (this machine's clock)" in said
    assert f"{DEFAULT_DRAFTER}" in said.split("measured (this machine's clock)")[1]
