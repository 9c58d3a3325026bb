"""`mlx.launch -n N --backend ring … python -m engine serve --shard tensor` on local ranks:
rank 0 serves HTTP, every rank runs each pass in lockstep on its shard of the model."""

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from engine.drafters import DRAFTERS

from .server_process import Server, request

LAUNCH = os.path.join(os.path.dirname(sys.executable), "mlx.launch")
pytestmark = pytest.mark.skipif(
    not (os.path.exists(LAUNCH) or shutil.which("mlx.launch")), reason="mlx.launch is not installed"
)


def launched(ranks: int, *args: str) -> Server:
    launcher = (
        LAUNCH if os.path.exists(LAUNCH) else "mlx.launch",
        "-n",
        str(ranks),
        "--backend",
        "ring",
    )
    return Server(*args, "--shard", "tensor", launcher=launcher)


def answer(server, prompt, drafter, adaptive, max_tokens):
    status, body = request(
        server.port,
        "POST",
        "/v1/chat/completions",
        timeout=900,
        body={
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "draftless": {"drafter": drafter, "adaptive": adaptive},
        },
    )
    assert status == 200, body
    return body["draftless"]["tokens"], body["usage"]["draftless"]


def build_tables(server, prompt, seconds=900) -> None:
    """Have ``server`` build its model's tables (the N-Grammys bigram table; it does so
    between requests after the first ngrammys request) into the cache folder every server
    here shares, and wait for the file: each server then reads it at its first ngrammys
    request, and the split one never builds it through slow collectives."""
    folder = Path(os.environ["DRAFTLESS_CACHE_DIR"]) / "bigram"
    name = server.health()["model"]
    answer(server, prompt, "ngrammys", False, 1)
    deadline = time.monotonic() + seconds
    while not any(name in path.name for path in folder.glob("*.npy")):
        assert time.monotonic() < deadline, "the bigram table was never built"
        time.sleep(0.1)


def compare(model_args, ranks, drafters, prompt, max_tokens, adaptive_too=True):
    single = Server(*model_args)
    split = launched(ranks, *model_args)
    try:
        single.wait_ready()
        split.wait_ready()
        plain, _ = answer(single, prompt, "none", False, max_tokens)
        if "ngrammys" in drafters:  # both with the table, not one with and one without
            build_tables(single, prompt)
        for drafter in drafters:
            # fixed draft length: tokens per pass must match too (adaptive length reads the clock)
            ref_tokens, ref_stats = answer(single, prompt, drafter, False, max_tokens)
            tokens, stats = answer(split, prompt, drafter, False, max_tokens)
            assert tokens == ref_tokens == plain, drafter
            assert stats["passes"] == ref_stats["passes"], drafter
            assert stats["tokens_per_pass"] == ref_stats["tokens_per_pass"], drafter
            assert stats["accepted"] == ref_stats["accepted"], drafter
            if adaptive_too:
                tokens, _ = answer(split, prompt, drafter, True, max_tokens)
                assert tokens == plain, drafter
        assert "split over" in split.stop()
    finally:
        single.stop()
        split.stop()


# Every collective waits for every rank to be scheduled: on a loaded 2-core machine one
# all-reduce took 50 ms (2 ranks) to 110 ms (3 ranks), so these runs are kept short.
def test_two_local_ranks_match_one_process(tiny_model_dir):
    compare(("--model", str(tiny_model_dir)), 2, ["prompt-lookup", "ngrammys"], "abcabcabc", 16)


@pytest.mark.slow
def test_two_local_ranks_match_one_process_for_every_drafter(tiny_model_dir):
    compare(("--model", str(tiny_model_dir)), 2, list(DRAFTERS), "abcabcabc", 16)


@pytest.mark.slow
@pytest.mark.embedded
def test_embedded_model_on_three_ranks_matches_one_process_for_every_drafter():
    """SmolLM2-135M: 9 attention heads / 3 KV heads, split over 3 ranks."""
    compare(
        (), 3, list(DRAFTERS), "List the days of the week: Monday, Tuesday,", 10, adaptive_too=False
    )


def test_shard_without_mlx_launch_is_a_clear_error(tiny_model_dir):
    from .test_cli import engine_cli

    result = engine_cli("serve", "--model", str(tiny_model_dir), "--shard", "tensor", timeout=60)
    assert result.returncode == 2
    assert "mlx.launch -n N" in result.stderr and "Traceback" not in result.stderr
