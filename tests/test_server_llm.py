"""Simon Willison's `llm` command line as a client: Draftless configured as an extra
OpenAI-compatible model, the way its users add a local server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .server_process import Server, request

pytest.importorskip("llm")

PROMPT = "abcabcabc"


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    running = Server("--model", str(tiny_model_dir)).wait_ready()
    yield running
    running.stop()


def llm(server, tmp_path, *args: str) -> subprocess.CompletedProcess:
    served = request(server.port, "GET", "/v1/models")[1]["data"][0]["id"]
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: draftless\n  model_name: {served}\n  api_base: {server.url}\n"
    )
    env = dict(
        os.environ,
        LLM_USER_PATH=str(tmp_path),
        LLM_LOAD_PLUGINS="",  # only llm's own plugins: no third-party one is under test
        OPENAI_API_KEY="unused",
    )
    return subprocess.run(
        [sys.executable, "-m", "llm", "-m", "draftless", "-o", "max_tokens", "12", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def server_answer(server) -> str:
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 12}
    status, answer = request(server.port, "POST", "/v1/chat/completions", body)
    assert status == 200, answer
    return answer["choices"][0]["message"]["content"]


@pytest.mark.parametrize("streaming", [False, True])
def test_llm_gets_the_servers_own_answer(server, tmp_path, streaming):
    args = (PROMPT,) if streaming else ("--no-stream", PROMPT)
    result = llm(server, tmp_path, *args)
    assert result.returncode == 0, result.stderr
    expected = server_answer(server)
    assert expected and result.stdout.rstrip("\n") == expected
