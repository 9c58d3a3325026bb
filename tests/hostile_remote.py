"""A hostile "Draftless server" on loopback, for the app's remote engine: it serves a model
card, then answers each chat request as its ``scenario`` says (bad token ids, silence, an
endless stream, one enormous chunk). It records what it saw: requests arriving and clients
hanging up."""

from __future__ import annotations

import json
import select
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def pass_chunk(index: int, tokens: list, texts: list | None = None, **fields) -> bytes:
    """One SSE line of a chunk carrying pass ``index`` with ``tokens``."""
    texts = texts if texts is not None else ["a"] * len(tokens)
    provenance = {
        "tokens": tokens,
        "texts": texts,
        "from_draft": [False] * len(tokens),
        "pass_index": [index] * len(tokens),
        "draft_position": [None] * len(tokens),
        "drafter": "suffix",
        "pass": index,
        "drafted": 0,
        "accepted": 0,
        "seconds": 0.01,
        "tokens_per_pass": 1.0,
        **fields,
    }
    chunk = {"object": "chat.completion.chunk", "choices": [], "draftless": provenance}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def final_chunk(reason: str = "stop") -> bytes:
    usage = {"completion_tokens": 1, "draftless": {"finish_reason": reason, "passes": 1}}
    chunk = {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}], "usage": usage}
    return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        card = {"id": "hostile", "object": "model", "draftless": {"speculation": "on"}}
        self._send(200, json.dumps({"object": "list", "data": [card]}).encode())

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        server: HostileServer = self.server.owner
        server.arrived.set()
        scenario = server.scenario
        if scenario == "silent":
            self._wait_for_hang_up()
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        try:
            if scenario == "endless":
                index = 0
                while True:
                    self.wfile.write(pass_chunk(index, [7]))
                    self.wfile.flush()
                    index += 1
                    server.chunks_sent = index
            else:
                self.wfile.write(scenario)  # bytes: the whole reply as given
                self.wfile.flush()
        except OSError:  # the client hung up
            server.hung_up.set()

    def _wait_for_hang_up(self) -> None:
        """Say nothing; notice when the client closes the connection."""
        connection = self.connection
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            readable, _, _ = select.select([connection], [], [], 0.05)
            if readable and not connection.recv(1024):
                self.server.owner.hung_up.set()
                return

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HostileServer:
    def __init__(self):
        self.scenario: str | bytes = "silent"
        self.arrived = threading.Event()
        self.hung_up = threading.Event()
        self.chunks_sent = 0
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.http.owner = self
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def answer(self, scenario: str | bytes) -> HostileServer:
        self.scenario = scenario
        self.arrived.clear()
        self.hung_up.clear()
        self.chunks_sent = 0
        return self

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
