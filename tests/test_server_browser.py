"""A real web page in headless Chromium calls `python -m engine serve` with fetch.

With ``--cors-origin`` naming the page's origin, the page gets the answer both whole and
streamed (read from the response body as server-sent events), and the two are the same
text. Without it the browser's preflight is refused, the page's fetch fails and the server
generates nothing. A page on the official openai JS SDK (installed with npm by the test
set-up; skipped without it) streams a chat with an API key, both by iterating the
stream and with the SDK's stream helper. Needs Debian's ``chromium`` (``packaging/dev.sh
test`` installs it when ``DRAFTLESS_SYSTEM_PACKAGES=1``); skipped without it.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from .server_process import Server, free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")

PAGE = """<!doctype html><meta charset="utf-8"><title>Draftless from a page</title>
<script>
const API = "%(api)s/v1/chat/completions";
const body = (stream) => JSON.stringify({
  messages: [{role: "user", content: "abcabcabc"}], max_tokens: 12, stream: stream});
const post = (url, text) => fetch(url, {
  method: "POST", headers: {"Content-Type": "application/json"}, body: text});

async function whole() {
  const response = await post(API, body(false));
  return (await response.json()).choices[0].message.content;
}

async function streamed() {
  const response = await post(API, body(true));
  const reader = response.body.getReader(), decoder = new TextDecoder();
  let buffer = "", text = "", chunks = 0;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let end;
    while ((end = buffer.indexOf("\\n\\n")) >= 0) {
      const event = buffer.slice(0, end); buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const delta = JSON.parse(event.slice(6)).choices[0]?.delta ?? {};
      text += delta.content ?? ""; chunks += 1;
    }
  }
  return {text, chunks};
}

(async () => {
  const result = {};
  try {
    result.whole = await whole();
    result.streamed = await streamed();
  } catch (error) {
    result.error = String(error);
  }
  await post("/result", JSON.stringify(result));
})();
</script>
"""


class Page:
    """Serves the page on its own origin and receives what the page reports; with
    ``modules``, also serves that folder's files under ``/node_modules/``."""

    def __init__(self, api_port: int, page: str = PAGE, modules: Path | None = None, **fields):
        self.port = free_port()
        self.results: queue.Queue = queue.Queue()
        html = (page % {"api": f"http://127.0.0.1:{api_port}", **fields}).encode()
        results = self.results

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body, kind = html, "text/html; charset=utf-8"
                if modules is not None and self.path.startswith("/node_modules/"):
                    file = (modules / self.path.removeprefix("/node_modules/")).resolve()
                    if not file.is_relative_to(modules) or not file.is_file():
                        self.send_error(404)
                        return
                    body, kind = file.read_bytes(), "text/javascript; charset=utf-8"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                results.put(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.origin = f"http://127.0.0.1:{self.port}"

    def open_in_chromium(self, tmp_path, timeout: float = 180) -> dict:
        browser = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'profile'}",
                f"{self.origin}/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            return self.results.get(timeout=timeout)
        finally:
            browser.kill()
            browser.wait()
            self.server.shutdown()


def test_a_page_on_a_named_origin_gets_the_same_answer_whole_and_streamed(tiny_model_dir, tmp_path):
    api_port = free_port()
    page = Page(api_port)
    server = Server("--model", str(tiny_model_dir), "--cors-origin", page.origin, port=api_port)
    try:
        server.wait_ready()
        result = page.open_in_chromium(tmp_path)
    finally:
        server.stop()
    assert "error" not in result, result
    assert result["whole"], result
    assert result["streamed"]["text"] == result["whole"]
    assert result["streamed"]["chunks"] > 1  # it came in pieces, not as one body


def test_without_cors_the_page_cannot_call_and_nothing_is_generated(tiny_model_dir, tmp_path):
    api_port = free_port()
    page = Page(api_port)
    server = Server("--model", str(tiny_model_dir), port=api_port)
    try:
        server.wait_ready()
        result = page.open_in_chromium(tmp_path)
        health = server.health()
    finally:
        server.stop()
    assert result == {"error": "TypeError: Failed to fetch"}
    assert not health.get("finished"), health


# The official openai JS SDK, major version 6: since v5 it has no dependencies and ships
# ES modules whose imports are all relative, so a page can import it straight from
# node_modules with no bundler.
OPENAI_SDK = "openai@6"
# where `packaging/dev.sh test` installs it (npm, at set-up: the tests themselves run offline)
SDK_FOLDER = Path(sys.prefix) / "npm" / "openai-6"


@pytest.fixture(scope="session")
def openai_sdk_modules() -> Path:
    """The node_modules folder holding the openai JS SDK, as the test set-up installed it."""
    modules = SDK_FOLDER / "node_modules"
    if not (modules / "openai" / "index.mjs").is_file():
        pytest.skip(
            f"the openai JS SDK is not in {SDK_FOLDER}: `bash packaging/dev.sh test` installs it "
            f"where npm is found (npm install --prefix {SDK_FOLDER} {OPENAI_SDK})"
        )
    return modules.resolve()


SDK_PAGE = """<!doctype html><meta charset="utf-8"><title>Draftless from the openai SDK</title>
<script type="module">
import OpenAI from "/node_modules/openai/index.mjs";
const KEY = "%(key)s";
const client = new OpenAI({
  baseURL: "%(api)s/v1", apiKey: KEY, dangerouslyAllowBrowser: true, maxRetries: 0});
const chat = {messages: [{role: "user", content: "abcabcabc"}], max_tokens: 12};
const report = (result) => fetch("/result", {method: "POST", body: JSON.stringify(result)});

(async () => {
  const result = {};
  try {
    const plain = await fetch("%(api)s/v1/chat/completions", {
      method: "POST", body: JSON.stringify(chat),
      headers: {"Content-Type": "application/json", "Authorization": `Bearer ${KEY}`}});
    result.fetched = (await plain.json()).choices[0].message.content;
    let text = "", chunks = 0;
    for await (const chunk of await client.chat.completions.create({...chat, stream: true})) {
      text += chunk.choices[0]?.delta?.content ?? ""; chunks += 1;
    }
    result.streamed = {text, chunks};
    const helper = client.chat.completions.stream(chat);
    let pieces = "";
    helper.on("content", (delta) => { pieces += delta; });
    const final = await helper.finalChatCompletion();
    result.helper = {pieces, final: final.choices[0].message.content};
  } catch (error) {
    result.error = String(error);
  }
  await report(result);
})();
</script>
"""


def test_a_page_on_the_official_openai_js_sdk_streams_a_chat(
    tiny_model_dir, tmp_path, openai_sdk_modules
):
    api_port, key = free_port(), "page-key"
    page = Page(api_port, SDK_PAGE, modules=openai_sdk_modules, key=key)
    server = Server(
        "--model",
        str(tiny_model_dir),
        "--cors-origin",
        page.origin,
        "--api-key",
        key,
        port=api_port,
    )
    try:
        server.wait_ready()
        result = page.open_in_chromium(tmp_path)
    finally:
        server.stop()
    assert "error" not in result, result  # e.g. "Error: Connection error." from the SDK
    assert result["fetched"], result
    assert result["streamed"]["text"] == result["fetched"]
    assert result["streamed"]["chunks"] > 1
    assert result["helper"] == {"pieces": result["fetched"], "final": result["fetched"]}
