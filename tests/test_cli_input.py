"""The command line with bad input, and how it exits.

Every run here is a real ``python -m engine`` process on the tiny test model: the exit
status and stderr are what a person sees.
"""

import asyncio
import signal
from pathlib import Path

import pytest

from tests.cli_process import engine_process


def engine_cli(*args, timeout=240):
    process = engine_process(*args)
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


# ---------------------------------------------------------------- input checked first
def test_a_prompt_file_that_is_not_utf8_is_a_clear_message(tiny_model_dir, tmp_path):
    latin1 = tmp_path / "prompt.txt"
    latin1.write_bytes("café au lait".encode("latin-1"))
    code, out, err = engine_cli(
        "generate", "--model", str(tiny_model_dir), "--prompt-file", str(latin1)
    )
    assert code == 2
    assert "is not UTF-8 text" in err and "prompt.txt" in err
    assert "Traceback" not in err and "Loading" not in err  # said before the model loads
    assert out == ""


@pytest.mark.parametrize("seed", ["-1", str(2**64), str(2**70)])
def test_a_seed_outside_64_bits_is_refused_before_the_model_loads(tiny_model_dir, seed):
    code, out, err = engine_cli(
        "generate", "--model", str(tiny_model_dir), "--prompt", "hi", "--seed", seed
    )
    assert code == 2
    assert "seed must be an integer from 0 to 18446744073709551615" in err
    assert "Traceback" not in err and "Loading" not in err and "Internal error" not in err


def test_the_largest_seed_is_accepted(tiny_model_dir):
    code, out, err = engine_cli(
        "generate",
        "--model",
        str(tiny_model_dir),
        "--prompt",
        "hi",
        "--seed",
        str(2**64 - 1),
        "--temperature",
        "0.7",
        "--max-tokens",
        "3",
        "--json",
    )
    assert code == 0, err


# ---------------------------------------------------------------- clean exits
def test_an_engine_error_exits_2_every_time_without_an_abort(tiny_model_dir):
    """After an engine error the process exits cleanly, never aborting at exit (status 134)."""
    for _ in range(15):
        code, out, err = engine_cli(
            "generate", "--model", str(tiny_model_dir), "--prompt", "hi", "--max-tokens", "32768"
        )
        assert "reads at most" in err
        assert "terminate called" not in err and "Task was destroyed" not in err, err
        assert code == 2, err


def test_ctrl_c_while_answering_exits_130_quietly(tiny_model_dir):
    for _ in range(3):
        process = engine_process(
            "generate",
            "--model",
            str(tiny_model_dir),
            "--prompt",
            "hi",
            "--drafter",
            "none",
            "--max-tokens",
            "4000",
        )
        process.stdout.read(16)  # the answer is being printed: the engine is decoding
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
        assert "interrupted" in err
        assert "Task was destroyed" not in err and "terminate called" not in err, err
        assert "Traceback" not in err, err
        assert process.returncode == 130


def test_shutdown_cancels_the_running_job_and_waits_for_the_thread(tiny_model_dir):
    from engine.runtime.service import EngineService
    from engine.settings import GenerationRequest

    service = EngineService()
    thread = service.engine_thread.thread

    async def start_then_leave():
        stream = service.generate(
            GenerationRequest(prompt="hi", raw=True, model=str(tiny_model_dir), max_tokens=4000)
        )
        async for event in stream:
            if type(event).__name__ == "TokenEvent":
                return

    asyncio.run(start_then_leave())
    service.shutdown()
    assert not thread.is_alive()
    assert not Path(f"/proc/self/task/{thread.native_id}").exists()
    assert service.engine_thread.loop.is_closed()
    service.shutdown()  # a second call (as at exit) does nothing
