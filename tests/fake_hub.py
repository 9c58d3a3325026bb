"""A local HTTP server that serves model folders in the Hugging Face Hub's file layout,
so downloads go through huggingface_hub itself (pointed here with ``HF_ENDPOINT``).

It answers what ``snapshot_download`` asks: the repo's file list, a HEAD per file (commit,
ETag, size) and the file itself, honouring ``Range`` (resumed downloads). Every request
is recorded; ``slow`` files are sent in 4 KB pieces, ``pause`` seconds apart (to cancel mid-way).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def etag_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeHub:
    def __init__(self, repos: dict[str, Path], slow: set[str] = frozenset(), pause: float = 0.02):
        self.repos = repos
        self.slow = set(slow)
        self.pause = pause
        self.requests: list[tuple[str, str, str | None]] = []  # method, path, Range header
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                hub.answer(self, body=True)

            def do_HEAD(self):
                hub.answer(self, body=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler, body: bool) -> None:
        path = handler.path.split("?")[0]
        self.requests.append((handler.command, path, handler.headers.get("Range")))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"]:  # /api/models/{org}/{name}[/revision/{rev}]
            repo = "/".join(parts[2:4])
            folder = self.repos.get(repo)
            if folder is None:
                return self._send(
                    handler,
                    404,
                    b'{"error": "Repository not found"}',
                    body,
                    {"X-Error-Code": "RepoNotFound"},
                )
            files = [p for p in sorted(folder.iterdir()) if p.is_file()]
            if len(parts) > 4 and parts[4] == "tree":  # /api/models/{repo}/tree/{rev}
                data = json.dumps(
                    [
                        {
                            "type": "file",
                            "path": p.name,
                            "size": p.stat().st_size,
                            "oid": etag_of(p.read_bytes())[:40],
                        }
                        for p in files
                    ]
                ).encode()
            else:
                data = json.dumps(
                    {
                        "id": repo,
                        "modelId": repo,
                        "sha": COMMIT,
                        "siblings": [{"rfilename": p.name} for p in files],
                    }
                ).encode()
            return self._send(handler, 200, data, body, {"Content-Type": "application/json"})
        if len(parts) >= 5 and parts[2] == "resolve":  # /{org}/{name}/resolve/{rev}/{file}
            repo, name = "/".join(parts[:2]), "/".join(parts[4:])
            folder = self.repos.get(repo)
            file = folder / name if folder else None
            if file is None or not file.is_file():
                return self._send(
                    handler, 404, b"not found", body, {"X-Error-Code": "EntryNotFound"}
                )
            data = file.read_bytes()
            headers = {
                "X-Repo-Commit": COMMIT,
                "ETag": f'"{etag_of(data)}"',
                "Accept-Ranges": "bytes",
            }
            start = 0
            wanted = handler.headers.get("Range")
            if wanted and wanted.startswith("bytes=") and body:
                start = int(wanted[6:].split("-")[0] or 0)
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
                return self._send(handler, 206, data[start:], body, headers, self._pause(name))
            return self._send(handler, 200, data, body, headers, self._pause(name))
        self._send(handler, 404, b"not found", body)

    def _pause(self, name: str) -> float:
        return self.pause if name in self.slow else 0.0

    @staticmethod
    def _send(handler, status, data, body, headers=None, pause=0.0):
        handler.send_response(status)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if not body:
            return
        try:
            if pause:
                for i in range(0, len(data), 4096):
                    handler.wfile.write(data[i : i + 4096])
                    handler.wfile.flush()
                    time.sleep(pause)
            else:
                handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
