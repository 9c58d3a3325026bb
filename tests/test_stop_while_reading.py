"""A stop while a long prompt is read is honoured between chunks; Ctrl-C ends the command
line at once, with exit code 130 and no traceback."""

import os
import re
import signal
import time

import pytest

from engine.events import DoneEvent, ProgressEvent
from engine.runtime.session import PREFILL_CHUNK_SECONDS, ChatSession, paced_prefill_step
from engine.settings import GenerationRequest
from tests.cli_process import engine_process

PROMPT = "one two three four five six seven eight nine ten " * 60  # ~600 byte tokens


def test_a_stop_while_reading_the_prompt_ends_the_answer_and_keeps_what_was_read(tiny_loaded):
    session = ChatSession(tiny_loaded)
    session.prefill_step = 64
    request = GenerationRequest(prompt=PROMPT, raw=True, max_tokens=8).validated()
    chunks = []

    def stop_after_two_chunks():
        return len(chunks) >= 2

    events = []
    for event in session.generate(request, stop_after_two_chunks):
        events.append(event)
        if isinstance(event, ProgressEvent) and event.done:
            chunks.append(event.done)
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.finish_reason == "cancelled" and not done.tokens
    assert chunks[-1] < done.timing["prompt_tokens"] - 1  # stopped before the whole prompt was read
    assert session.target.offset == len(session.history) - 1 == chunks[-1]
    # the next answer reads only the rest and equals a fresh session's
    again = list(session.generate(request))[-1]
    fresh = list(ChatSession(tiny_loaded).generate(request))[-1]
    assert again.tokens == fresh.tokens and again.finish_reason == "length"
    assert again.timing["prefilled_tokens"] == fresh.timing["prefilled_tokens"] - chunks[-1]


def test_prompt_chunks_are_paced_by_their_time():
    assert paced_prefill_step(128, 4 * PREFILL_CHUNK_SECONDS) == 32
    assert paced_prefill_step(16, 10.0) == 16
    assert paced_prefill_step(128, PREFILL_CHUNK_SECONDS / 10) == 256
    assert paced_prefill_step(512, 0.0) == 512
    assert paced_prefill_step(128, PREFILL_CHUNK_SECONDS) == 128


@pytest.mark.embedded
def test_ctrl_c_while_a_long_prompt_is_read_exits_130_at_once_without_a_traceback(
    tmp_path, embedded_loaded
):
    prompt = tmp_path / "long.txt"
    prompt.write_text(
        " ".join(["the quick brown fox jumps over the lazy dog"] * 700)
    )  # ~6,300 words
    process = engine_process("generate", "--prompt-file", str(prompt), "--max-tokens", "20")
    deadline = time.monotonic() + 120
    seen = ""
    # the model is loaded and a chunk of the prompt was read: the stop lands mid-prompt
    while not re.search(r"Reading the prompt… [1-9]\d*%", seen):
        assert time.monotonic() < deadline and process.poll() is None, seen
        seen += os.read(process.stderr.fileno(), 4096).decode(errors="replace")
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    took = time.monotonic() - sent
    assert process.returncode == 130, err
    assert "Prompt read" not in seen + err  # it stopped before the whole prompt was read
    # a stop waits for the chunk under way (about PREFILL_CHUNK_SECONDS), not for the prompt
    assert took < 3 * PREFILL_CHUNK_SECONDS + 2, f"stopping took {took:.1f} s"
    for sign in ("Traceback", "terminate called", "RuntimeError", "destroyed but it is pending"):
        assert sign not in err, err
