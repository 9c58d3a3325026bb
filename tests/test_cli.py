"""`python -m engine`: the exact command-line shape other checks depend on."""

import json
import os
import subprocess
import sys

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
