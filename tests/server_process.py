"""Start `python -m engine serve` on a free 127.0.0.1 port for a test, and stop it after."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import time

from tests.cli_process import engine_process


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request(port: int, method: str, path: str, body=None, headers=None, timeout=120):
    """(status, parsed JSON or text) of one HTTP request to the local server."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    connection.request(
        method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    response = connection.getresponse()
    raw = response.read().decode()
    connection.close()
    try:
        return response.status, json.loads(raw)
    except ValueError:
        return response.status, raw


class Server:
    def __init__(self, *args: str, launcher: tuple[str, ...] = (), port: int | None = None):
        self.port = port or free_port()
        self.process = engine_process(
            "serve",
            "--port",
            str(self.port),
            *args,
            launcher=launcher,
            stderr=subprocess.STDOUT,
            start_new_session=bool(launcher),
        )  # its own group: the ranks stop with it
        self.launched = bool(launcher)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def wait_ready(self, timeout: float = 240) -> "Server":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.process.stdout.read()}")
            try:
                status, _ = request(self.port, "GET", "/health", timeout=2)
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("server did not start in time")

    def health(self, key: str | None = None) -> dict:
        """/health; with an API key set, its details need ``key``."""
        headers = {"Authorization": f"Bearer {key}"} if key else None
        return request(self.port, "GET", "/health", headers=headers)[1]

    def stop(self) -> str:
        if self.launched:  # as Ctrl-C would: rank 0 shuts down and tells the others to stop
            self._signal_group(signal.SIGINT)
        elif self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.launched:
            self._signal_group(signal.SIGKILL)  # any rank left behind
        return self.process.stdout.read()

    def _signal_group(self, number) -> None:
        try:
            os.killpg(self.process.pid, number)
        except ProcessLookupError:
            pass
