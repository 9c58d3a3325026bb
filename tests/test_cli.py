"""`python -m engine`: the exact command-line shape other checks depend on."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.drafters import DRAFTERS


def engine_cli(*args, timeout=240):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_drafters_lists_every_drafter():
    result = engine_cli("drafters")
    assert result.returncode == 0
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names == list(DRAFTERS)
    assert "(default)" in result.stdout


def test_generate_json_prints_one_object(tiny_model_dir):
    result = engine_cli(
        "generate",
        "--model",
        str(tiny_model_dir),
        "--prompt",
        "abcabcabc",
        "--drafter",
        "prompt-lookup",
        "--draft-count",
        "3",
        "--max-tokens",
        "16",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert set(out) == {"text", "tokens", "from_draft", "finish_reason", "stats", "timing"}
    assert {
        "passes",
        "drafted",
        "accepted",
        "tokens_per_pass",
        "acceptance_rate",
        "per_position_acceptance",
        "speculation",
    } <= set(out["stats"])
    assert {"prefill_s", "decode_s", "tokens_per_s"} <= set(out["timing"])
    assert len(out["tokens"]) == len(out["from_draft"]) == 16
    assert out["finish_reason"] == "length"


def test_plain_and_speculative_cli_outputs_match(tiny_model_dir):
    def tokens(*extra):
        result = engine_cli(
            "generate",
            "--model",
            str(tiny_model_dir),
            "--prompt",
            "xyzxyzxyz",
            "--raw",
            "--max-tokens",
            "20",
            "--json",
            *extra,
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["tokens"]

    assert tokens("--drafter", "none") == tokens("--drafter", "frequency", "--draft-count", "5")


@pytest.mark.parametrize(
    "args,message",
    [
        (["--model", "/no/such/folder"], "No model folder"),
        (["--draft-count", "0"], "draft_count must be"),
        (["--drafter", "telepathy"], "Unknown drafter"),
        (["--prompt-file", "/no/such/file"], "Cannot read the prompt file"),
    ],
)
def test_errors_are_a_message_and_a_non_zero_exit(args, message):
    prompt = [] if "--prompt-file" in args else ["--prompt", "hi"]
    result = engine_cli("generate", *prompt, *args)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_replay_answers_once_and_replays_each_drafter_on_its_tokens(tiny_model_dir):
    result = engine_cli(
        "replay",
        "--model",
        str(tiny_model_dir),
        "--prompt",
        "abcabcabc",
        "--max-tokens",
        "40",
        "--drafters",
        "prompt-lookup,suffix,none",
        "--draft-counts",
        "2,5",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [(r["drafter"], r["draft_count"]) for r in out["results"]] != []
    assert sorted((r["drafter"], r["draft_count"]) for r in out["results"]) == [
        ("prompt-lookup", 2),
        ("prompt-lookup", 5),
        ("suffix", 2),
        ("suffix", 5),
    ]
    for r in out["results"]:
        assert r["stats"]["emitted"] == out["tokens"] == len(r["from_draft"])
        assert sum(r["from_draft"]) == r["stats"]["accepted"] and r["exact"]


def test_generate_measures_the_curve_after_its_answer_at_that_answers_context(
    tiny_model_dir, private_dirs, monkeypatch, capsys
):
    """After its one answer, generate measures the model's verify cost on that answer's cache:
    no context of MEASURE_CONTEXT tokens is read for it (on a 4-bit model on this CPU, that
    reading took 51 of the measurement's 68 seconds)."""
    from engine.__main__ import main
    from engine.policy import adaptive

    contexts = []
    measurement_steps = adaptive.measurement_steps

    def recorded(target, context, **options):
        contexts.append(context)
        return measurement_steps(target, context, **options)

    monkeypatch.setattr(adaptive, "measurement_steps", recorded)
    args = ["--model", str(tiny_model_dir), "--prompt", "abcabcabc", "--max-tokens", "8"]
    assert main(["generate", *args, "--json"]) == 0
    assert contexts == [0]  # measured once, on the answer's cache as it was
    assert "Measuring how fast" in capsys.readouterr().err
    assert list((Path(os.environ["DRAFTLESS_CACHE_DIR"]) / "verify-cost").glob("*.json"))
