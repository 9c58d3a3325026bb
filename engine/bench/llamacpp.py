"""llama.cpp's n-gram speculative modes as a benchmark peer: build, find, run.

``python -m engine.bench.llamacpp build`` builds ``llama-server`` from the llama.cpp
sources that the llama-cpp-python sdist on PyPI vendors (``vendor/llama.cpp``), into the
user cache (``<cache>/llama.cpp/``, never the repository), with CMake:
``GGML_NATIVE=OFF`` (portable x86-64: AVX2/FMA/F16C), AMX off (some CPUs report AMX but
fault on it), no web UI download, no CURL/OpenSSL, under ``nice -n 19`` with 2 jobs.
The sdist is fetched with ``pip download --no-deps --no-binary llama-cpp-python``
(``--no-binary :all:`` would build its build tools from source too).

The suite runs one ``llama-server`` per mode (``--spec-type none`` and each of
``SPEC_TYPES``) on the embedded model's GGUF, all started at once, and sends each prompt
as token ids to ``/completion`` (greedy, ``cache_prompt``), rotating the modes per
prompt and repeat. Each mode is compared with llama.cpp's own plain decoding
(speed-up and identical tokens): the GGUF is Q4_1, so its tokens are not ours.
Figures come from the server's ``timings``: ``predicted_ms`` (decode time after the
prompt), ``predicted_n``, ``draft_n``, ``draft_n_accepted``. A request that gets no answer
in time (seen: ``ngram-map-k`` spinning in ``common_ngram_map_begin`` when a prompt is sent
again) is recorded as an error row and its server restarted.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..paths import cache_dir

SPEC_TYPES = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-cache")
SDIST = "llama-cpp-python"
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AMX_TILE=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DGGML_AMX_BF16=OFF",
    "-DGGML_AVX512=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
]
BUILD_COMMAND = "python -m engine.bench.llamacpp build"


def home() -> Path:
    return cache_dir() / "llama.cpp"


def server_binary() -> Path | None:
    """The built ``llama-server``: $DRAFTLESS_LLAMA_SERVER, else the cache build, else None."""
    override = os.environ.get("DRAFTLESS_LLAMA_SERVER")
    if override:
        return Path(override) if Path(override).is_file() else None
    found = sorted(home().glob("*/build/bin/llama-server"))
    return found[-1] if found else None


def status() -> str | None:
    """None when llama-server is built, else the line the benchmark prints instead."""
    binary = os.environ.get("DRAFTLESS_LLAMA_SERVER")
    if binary and not Path(binary).is_file():
        return f"skipped: DRAFTLESS_LLAMA_SERVER={binary} is not a file"
    if server_binary() is None:
        return (
            f"skipped: llama.cpp is not built (no llama-server under {home()}); build it "
            f"with `{BUILD_COMMAND}` (downloads the {SDIST} sdist, compiles for ~30-60 min "
            "on 2 cores)"
        )
    return None


def _run(command: list[str], cwd: Path | None = None, log=None) -> None:
    print("+ " + " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(
        command, cwd=cwd, check=True, stdout=log, stderr=subprocess.STDOUT if log else None
    )


def build(jobs: int = 2, sdist: Path | None = None) -> Path:
    """Download the sdist (unless given), extract it and build llama-server; return its path."""
    root = home()
    root.mkdir(parents=True, exist_ok=True)
    if sdist is None:
        download = root / "sdist"
        download.mkdir(exist_ok=True)
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                SDIST,
                SDIST,
                "-d",
                str(download),
            ]
        )
        sdist = max(download.glob("llama_cpp_python-*.tar.gz"), key=lambda p: p.stat().st_mtime)
    name = Path(sdist).name.removesuffix(".tar.gz")
    source = root / name
    if not (source / "vendor" / "llama.cpp" / "CMakeLists.txt").exists():
        with tarfile.open(sdist) as archive:
            archive.extractall(root, filter="data")
    vendored = source / "vendor" / "llama.cpp"
    build_dir = source / "build"
    nice = ["nice", "-n", "19"] if shutil.which("nice") else []
    _run(
        nice
        + ["cmake", "-S", str(vendored), "-B", str(build_dir)]
        + CMAKE_FLAGS
        + (["-G", "Ninja"] if shutil.which("ninja") else [])
    )
    _run(nice + ["cmake", "--build", str(build_dir), "--target", "llama-server", "-j", str(jobs)])
    binary = build_dir / "bin" / "llama-server"
    if not binary.exists():
        raise RuntimeError(f"the build finished but {binary} is missing")
    return binary


# ---------------------------------------------------------------- running the servers


@dataclass
class LlamaRun:
    tokens: list[int]
    decode_s: float  # predicted_ms / 1000: after the prompt
    predicted_n: int
    draft_n: int
    draft_accepted: int

    @property
    def passes(self) -> int:
        """Each pass emits its accepted drafts and one token of the model's own."""
        return max(self.predicted_n - self.draft_accepted, 1)

    @property
    def tokens_per_pass(self) -> float:
        return self.predicted_n / self.passes


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """One llama-server process in one speculative mode ("none" = plain decoding)."""

    def __init__(self, binary: Path, gguf: Path, mode: str, threads: int, context: int = 4096):
        self.mode = mode
        self.start(binary, gguf, threads, context)

    def start(self, binary: Path, gguf: Path, threads: int, context: int) -> None:
        self.launch = (binary, gguf, threads, context)
        mode = self.mode
        self.port = _free_port()
        command = [
            str(binary),
            "-m",
            str(gguf),
            "--port",
            str(self.port),
            "--host",
            "127.0.0.1",
            "-t",
            str(threads),
            "-c",
            str(context),
            "-np",
            "1",
            "--no-warmup",
        ]
        if mode != "none":  # each mode with llama.cpp's own defaults, as its users get it
            command += ["--spec-type", mode]
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)

    def _post(self, path: str, body: dict, timeout: float = 600) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                tail = self.log.read()[-2000:].decode(errors="replace")
                raise RuntimeError(f"llama-server ({self.mode}) exited: {tail}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"llama-server ({self.mode}) did not start in {timeout:.0f} s")

    def restart(self) -> None:
        self.stop()
        self.start(*self.launch)
        self.wait_ready()

    def complete(self, prompt_tokens: list[int], max_tokens: int, timeout: float = 600) -> LlamaRun:
        reply = self._post(
            "/completion",
            {
                "prompt": prompt_tokens,
                "n_predict": max_tokens,
                "temperature": 0.0,
                "top_k": 1,
                "cache_prompt": True,
                "return_tokens": True,
                "stream": False,
                "seed": 0,
            },
            timeout=timeout,
        )
        timings = reply.get("timings", {})
        tokens = [int(t) for t in reply.get("tokens", [])]
        return LlamaRun(
            tokens,
            float(timings.get("predicted_ms", 0.0)) / 1000.0,
            int(timings.get("predicted_n", len(tokens))),
            int(timings.get("draft_n", 0) or 0),
            int(timings.get("draft_n_accepted", 0) or 0),
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


def run_modes(
    binary: Path,
    gguf: Path,
    jobs: list[dict],
    max_tokens: int,
    repeats: int,
    modes=("none",) + SPEC_TYPES,
    threads: int | None = None,
    log=None,
    request_timeout: float | None = None,
) -> dict:
    """Every job (``{"id", "tokens"}``) in every mode, ``repeats`` times, modes rotated per
    prompt and repeat. Returns ``{"rows": [{"id", "mode", "repeat", ...LlamaRun}]}``."""
    threads = threads or os.cpu_count() or 1
    # generous (a loaded 2-core machine decodes ~1 token/s); llama.cpp's ngram-map modes
    # were seen to hang on a repeated prompt, and a hung request must not stop the suite
    request_timeout = request_timeout or 120 + 4 * max_tokens
    servers = {mode: LlamaServer(binary, gguf, mode, threads) for mode in modes}
    rows = []
    try:
        for server in servers.values():
            server.wait_ready()
        warm = jobs[0]["tokens"][:16] if jobs else [1, 2, 3]
        for server in servers.values():
            server.complete(warm, 4)
        order = list(modes)
        for index, job in enumerate(jobs):
            for server in servers.values():  # the prompt into each server's cache, untimed
                server.complete(job["tokens"], 1)
            for repeat in range(repeats):
                shift = (index + repeat) % len(order)
                for mode in order[shift:] + order[:shift]:
                    server = servers[mode]
                    try:
                        run = server.complete(job["tokens"], max_tokens, timeout=request_timeout)
                    except OSError as error:  # a hung or dead server: noted, restarted
                        rows.append(
                            {
                                "id": job["id"],
                                "mode": mode,
                                "repeat": repeat,
                                "error": f"no answer in {request_timeout:.0f} s "
                                f"({type(error).__name__}); server restarted",
                            }
                        )
                        server.restart()
                        server.complete(job["tokens"], 1, timeout=request_timeout)
                        continue
                    rows.append(
                        {
                            "id": job["id"],
                            "mode": mode,
                            "repeat": repeat,
                            "tokens": run.tokens,
                            "decode_s": run.decode_s,
                            "predicted_n": run.predicted_n,
                            "draft_n": run.draft_n,
                            "draft_accepted": run.draft_accepted,
                            "passes": run.passes,
                            "loadavg_1min": os.getloadavg()[0],
                        }
                    )
            if log:
                log(f"  llama.cpp {job['id']} done")
    finally:
        for server in servers.values():
            server.stop()
    return {
        "threads": threads,
        "modes": list(modes),
        "rows": rows,
        "binary": str(binary),
        "gguf": str(gguf),
    }


class LlamaCppPeer:
    """llama.cpp's n-gram modes on the embedded model's GGUF, a ``peers.Peer``."""

    key = "llama_cpp"

    def status(self, loaded) -> str | None:
        found = status()
        if found is None and loaded.name != "SmolLM2-135M-Instruct":
            return "skipped: llama.cpp runs the embedded model's GGUF only"
        return found

    def describe(self, answers: int, repeats: int) -> str:
        return f"llama.cpp llama-server ({', '.join(SPEC_TYPES)} vs none, Q4_1 GGUF)"

    def run(self, loaded, jobs, max_tokens, repeats, log) -> dict:
        from ..models.embedded import find_embedded_gguf

        return run_modes(server_binary(), find_embedded_gguf(), jobs, max_tokens, repeats, log=log)

    def collect(self, result, task_of, reference):
        errors = [r for r in result["rows"] if "error" in r]
        skipped = [
            f"llama.cpp {row['mode']} {row['id']} (round {row['repeat'] + 1}): {row['error']}"
            for row in errors
        ]
        result["rows"] = [r for r in result["rows"] if "error" not in r]
        result["errors"] = errors
        plain: dict[str, list[int]] = {}
        for row in sorted(result["rows"], key=lambda r: r["repeat"]):
            if row["mode"] == "none":
                plain.setdefault(row["id"], row["tokens"])
        differences = []
        for row in result["rows"]:
            row["task"] = task_of[row["id"]]
            row["identical_to_own_plain"] = row["tokens"] == plain.get(row["id"])
            if not row["identical_to_own_plain"]:
                differences.append(
                    f"llama.cpp {row['mode']} {row['id']} (round "
                    f"{row['repeat'] + 1}): output differs from llama.cpp's own "
                    "plain greedy output"
                )
            row["tokens"] = len(row["tokens"])
        return {"status": "ran", **result}, differences, skipped


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m engine.bench.llamacpp",
        description="Build llama.cpp's llama-server for the benchmark.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser(
        "build",
        help="download the llama-cpp-python sdist and build llama-server into the user cache",
    )
    build_parser.add_argument(
        "--jobs", type=int, default=2, help="parallel compile jobs (default 2)"
    )
    build_parser.add_argument("--sdist", help="a llama_cpp_python-*.tar.gz already downloaded")
    commands.add_parser("status", help="say whether llama-server is built and where")
    args = parser.parse_args(argv)
    if args.command == "status":
        print(status() or f"built: {server_binary()}")
        return 0
    print(f"built: {build(args.jobs, Path(args.sdist) if args.sdist else None)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
