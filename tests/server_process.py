"""Start `python -m engine serve` on a free 127.0.0.1 port for a test, and stop it after."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request(port: int, method: str, path: str, body=None, headers=None, timeout=120):
    """(status, parsed JSON or text) of one HTTP request to the local server."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    connection.request(method, path, body=data, headers={"Content-Type": "application/json",
                                                         **(headers or {})})
    response = connection.getresponse()
    raw = response.read().decode()
    connection.close()
    try:
        return response.status, json.loads(raw)
    except ValueError:
        return response.status, raw


class Server:
    def __init__(self, *args: str, launcher: tuple[str, ...] = ()):
        self.port = free_port()
        env = dict(os.environ, PYTHONPATH=os.getcwd())
        self.process = subprocess.Popen(
            [*launcher, sys.executable, "-m", "engine", "serve", "--port", str(self.port), *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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

    def health(self) -> dict:
        return request(self.port, "GET", "/health")[1]

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.stdout.read()
