"""Hostile load on a local server: does ``/health`` stay quick, and do legitimate requests
get through?

``python -m tests.hostile_load [--stalled 2000] [--slow-bodies 1000] [--health-flood 1100]
[--schema-bomb] [--regex-bomb] [--clients 16] [--seconds 20]`` starts ``python -m engine
serve`` on 127.0.0.1 (a tiny random-weight model unless ``--model``) and, all at once: opens
``--stalled`` connections that send their headers a byte a second, opens ``--slow-bodies``
connections that send full headers with ``Content-Length: 1000000`` and then the body a
byte a second, opens ``--health-flood`` connections that send ``GET /health`` headers
promising such a body and then trickle it, runs ``--clients`` streaming clients (the
legitimate requests), sends one request with a 900,000-character stop string and, with
``--schema-bomb``, the schema bombs of issue 58 (2,000 ``allOf`` patterns; ``required``
names repeated 17 times at each of 21 levels, through Ollama's ``format``; the longest
``$ref`` chain that fits). With ``--regex-bomb`` it sends the 128-regex schema every 3 s,
each followed at once by a plain request, whose seconds say how soon the engine is free.
Meanwhile it asks ``/health`` every 0.1 s, samples the server's memory (its own and with
its children's, from /proc on Linux) and prints the figures as JSON. Every loop is bounded
by ``--seconds``; only 127.0.0.1 is contacted. A measurement tool (one test runs a small
version).
"""

from __future__ import annotations

import argparse
import bisect
import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .schema_bombs import deep_required, reference_chain, regex_bomb, response_format, widest_within
from .server_process import free_port, request


def raise_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(
            resource.RLIMIT_NOFILE,
            (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard),
        )


def start_server(model: str, log_path: Path, *args: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    with open(log_path, "wb") as log:  # a file, not a pipe: a full pipe would block the server
        process = subprocess.Popen(
            [sys.executable, "-m", "engine", "serve", "--model", model, "--port", str(port), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent)),
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text()[-2000:]}")
        try:
            if request(port, "GET", "/health", timeout=2)[0] == 200:
                return process, port
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("server did not start in time")


def stream_once(
    port: int, max_tokens: int, timeout: float, arrivals: list[float] | None = None
) -> int:
    """One streaming chat answer, read to the end; its number of SSE events (0 if refused:
    ``RefusedStream`` says how), each one's ``time.monotonic()`` appended to ``arrivals``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(
            "POST",
            "/v1/chat/completions",
            body=json.dumps(
                {
                    "messages": [{"role": "user", "content": "abcabcabc"}],
                    "max_tokens": max_tokens,
                    "stream": True,
                    "temperature": 0,
                }
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        if response.status != 200:
            raise RefusedStream(response.status)
        events = 0
        for line in response:
            if line.startswith(b"data: "):
                events += 1
                if arrivals is not None:
                    arrivals.append(time.monotonic())
        return events
    finally:
        connection.close()


class RefusedStream(Exception):
    """A streaming request answered with this HTTP status instead of its stream."""


def count_open(sockets: list[socket.socket]) -> int:
    """How many of these non-blocking sockets the server has not closed (an answer it sent
    before closing, such as a 408, is read and skipped)."""
    still_open = 0
    for s in list(sockets):
        try:
            while s.recv(65536):  # b"": the server closed it
                pass
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
    return still_open


def schema_bomb_bodies() -> dict[str, tuple[str, dict]]:
    """The schema bombs of issue 58: name -> (path, body)."""
    messages = [{"role": "user", "content": "abcabcabc"}]

    def chat(schema: dict) -> tuple[str, dict]:
        body = {"messages": messages, "max_tokens": 4, "response_format": response_format(schema)}
        return "/v1/chat/completions", body

    return {
        "schema_bomb": chat({"type": "string", "allOf": [{"pattern": "^.*0.*$"}] * 2000}),
        "required_bomb": (
            "/api/chat",
            {
                "model": "default",
                "messages": messages,
                "stream": False,
                "format": deep_required(21, 17),
                "options": {"num_predict": 4},
            },
        ),
        "ref_chain": chat(widest_within(reference_chain, 1, 10_000)),
    }


def memory_mb(pid: int) -> tuple[float, float] | None:
    """The resident memory of ``pid`` and of it with its descendants, in MB (Linux)."""
    proc = Path("/proc")
    if not (proc / str(pid)).exists():
        return None
    children: dict[int, list[int]] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))

    def resident(process: int) -> float:
        try:
            for line in (proc / str(process) / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    tree, pending = [], [pid]
    while pending:
        process = pending.pop()
        tree.append(process)
        pending += children.get(process, [])
    return resident(pid), sum(map(resident, tree))


def next_event_max(moments: list[float], arrivals: list[float]) -> float | None:
    """The longest wait from one of ``moments`` to the first of ``arrivals`` after it (None
    where none came after any)."""
    arrivals = sorted(arrivals)
    waits = [
        arrivals[after] - moment
        for moment in moments
        if (after := bisect.bisect_right(arrivals, moment)) < len(arrivals)
    ]
    return round(max(waits), 3) if waits else None


def longest_gaps(arrivals: list[float], began: float, count: int = 3) -> list[list[float]]:
    """The ``count`` longest waits between consecutive ``arrivals`` (sorted), longest last,
    each as [seconds, seconds into the run it began]."""
    gaps = sorted(zip(map(float.__sub__, arrivals[1:], arrivals), arrivals))[-count:]
    return [[round(gap, 3), round(at - began, 1)] for gap, at in gaps]


def error_message(answer) -> str:
    """The message of an OpenAI-shaped error (``{"error": {"message"}}``), of an Ollama-shaped
    one (``{"error": str}``), else the answer as text."""
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        return str(error.get("message"))
    return str(error if error is not None else answer)


def timed_request(port: int, path: str, body: dict, timeout: float) -> dict:
    """Status, seconds and the start of the error message of one POST."""
    began = time.perf_counter()
    try:
        status, answer = request(port, "POST", path, body, timeout=timeout)
    except OSError as error:
        return {
            "status": None,
            "seconds": round(time.perf_counter() - began, 3),
            "error": str(error),
        }
    return {
        "status": status,
        "seconds": round(time.perf_counter() - began, 3),
        "message": error_message(answer)[:80],
    }


def run(
    port: int,
    stalled: int,
    clients: int,
    seconds: float,
    stop_chars: int,
    slow_bodies: int = 0,
    schema_bomb: bool = False,
    max_tokens: int = 64,
    health_flood: int = 0,
    regex_bomb_every: bool = False,
    server_pid: int | None = None,
) -> dict:
    deadline = time.monotonic() + seconds
    results: dict = {
        "stalled_opened": 0,
        "stalled_refused": 0,
        "slow_bodies_opened": 0,
        "slow_bodies_refused": 0,
        "streams_done": 0,
        "streams_failed": 0,
        "streams_refused_by": {},  # HTTP status or error -> count
        "stream_events": 0,
        "health_flood_opened": 0,
        "health_flood_refused": 0,
    }
    lock = threading.Lock()
    arrivals: list[float] = []  # when each streamed event came, every client's

    def streamer():
        while time.monotonic() < deadline - 5:  # one answer after another while the load lasts
            try:
                events = stream_once(
                    port, max_tokens, max(1.0, deadline - time.monotonic()), arrivals
                )
                why = None
            except (OSError, RefusedStream) as error:
                events = 0
                why = (
                    str(error.args[0]) if isinstance(error, RefusedStream) else type(error).__name__
                )
            with lock:
                results["streams_done"] += events > 0
                results["streams_failed"] += events == 0
                results["stream_events"] += events
                if why is not None:
                    refused = results["streams_refused_by"]
                    refused[why] = refused.get(why, 0) + 1
            if events == 0:
                time.sleep(0.1)  # refused: try again, without spinning

    def huge_stop():
        body = {"prompt": "y", "max_tokens": 4, "stop": ["y" * stop_chars]}
        results["huge_stop"] = timed_request(port, "/v1/completions", body, seconds)

    def bomb():
        for name, (path, body) in schema_bomb_bodies().items():
            results[name] = timed_request(port, path, body, seconds)

    def regexes():
        bomb = {
            "messages": [{"role": "user", "content": "abcabcabc"}],
            "max_tokens": 4,
            "response_format": response_format(regex_bomb()),
        }
        plain = {"messages": [{"role": "user", "content": "abcabcabc"}], "max_tokens": 4}
        refusals, next_seconds, refused_at = [], [], []
        while time.monotonic() < deadline - 5:
            refusals.append(timed_request(port, "/v1/chat/completions", bomb, seconds))
            refused_at.append(time.monotonic())
            next_seconds.append(timed_request(port, "/v1/chat/completions", plain, seconds))
            time.sleep(3)
        results["regex_bomb"] = {
            "sent": len(refusals),
            "statuses": sorted({r["status"] for r in refusals}, key=str),
            "max_s": max((r["seconds"] for r in refusals), default=None),
            "next_request_max_s": max((r["seconds"] for r in next_seconds), default=None),
            "next_request_statuses": sorted({r["status"] for r in next_seconds}, key=str),
            # the engine at work again: the first streamed event after each refusal came
            "next_event_max_s": next_event_max(refused_at, arrivals),
            "refused_at_s": [round(t - (deadline - seconds), 1) for t in refused_at],
            "message": refusals[0].get("message") if refusals else None,
        }

    host = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    floods = {  # name: (connections, what each sends first, what it trickles a second)
        "stalled": (stalled, host + b"X-Slow: ", b"x"),
        "slow_bodies": (
            slow_bodies,
            host + b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n",
            b" ",
        ),
        "health_flood": (
            health_flood,
            f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
            + b"Content-Length: 1000000\r\n\r\n",
            b" ",
        ),
    }
    sockets: dict[str, list[socket.socket]] = {name: [] for name in floods}

    def opener():
        time.sleep(0.2)  # the clients' first requests are under way when the flood begins
        for name, (count, head, _) in floods.items():
            began = time.perf_counter()
            for _ in range(count):
                if time.monotonic() > deadline:
                    break
                s = socket.socket()
                s.settimeout(2)
                try:
                    s.connect(("127.0.0.1", port))
                    s.sendall(head)
                    s.setblocking(False)
                    sockets[name].append(s)
                except OSError:
                    s.close()
                    results[f"{name}_refused"] += 1
            results[f"{name}_opened"] = len(sockets[name])
            results[f"{name}_open_seconds"] = round(time.perf_counter() - began, 2)
        time.sleep(0.5)
        for name in floods:
            results[f"{name}_still_open_after_opening"] = count_open(sockets[name])

    threads = [threading.Thread(target=streamer, daemon=True) for _ in range(clients)]
    threads += [
        threading.Thread(target=huge_stop, daemon=True),
        threading.Thread(target=opener, daemon=True),
    ]
    if schema_bomb:
        threads.append(threading.Thread(target=bomb, daemon=True))
    if regex_bomb_every:
        threads.append(threading.Thread(target=regexes, daemon=True))
    for thread in threads:
        thread.start()
    latencies, failures, next_trickle = [], [], time.monotonic() + 1
    start = time.perf_counter()
    slowest: list[tuple[float, float]] = []  # (latency, seconds into the run)
    memory = [(0.0, 0.0)]
    while time.monotonic() < deadline:
        sample = memory_mb(server_pid) if server_pid else None
        if sample:
            memory.append(sample)
        began = time.perf_counter()
        try:
            status = request(port, "GET", "/health", timeout=5)[0]
            latencies.append(time.perf_counter() - began)
            slowest = sorted([*slowest, (round(latencies[-1], 3), round(began - start, 1))])[-3:]
            if status != 200:
                failures.append((status, round(began - start, 1)))
        except OSError as error:
            failures.append((str(error)[:60], round(began - start, 1)))
        if time.monotonic() > next_trickle:  # a byte a second on each flood connection
            for name, (_, _, byte) in floods.items():
                for s in list(sockets[name]):
                    try:
                        s.send(byte)
                    except OSError:
                        pass
            next_trickle += 1
        time.sleep(0.1)
    for thread in threads:
        thread.join(timeout=10)
    arrivals.sort()
    for name, flood in sockets.items():
        results[f"{name}_still_open_at_end"] = count_open(flood)
        for s in flood:
            s.close()
    ordered = sorted(latencies)
    results.update(
        {
            "health_probes": len(latencies) + len(failures),
            "health_failures": len(failures),
            "health_failures_first": failures[:5],  # (status or error, seconds into the run)
            "health_median_s": round(statistics.median(latencies), 4) if latencies else None,
            "health_max_s": round(max(latencies), 4) if latencies else None,
            "health_p95_s": round(ordered[int(0.95 * len(ordered))], 4) if ordered else None,
            "health_slowest_at_s": slowest,
            # the engine's longest pauses in streaming, all clients together
            "stream_gaps_longest": longest_gaps(arrivals, deadline - seconds),
            "server_rss_max_mb": round(max(m[0] for m in memory)),
            "server_with_children_rss_max_mb": round(max(m[1] for m in memory)),
        }
    )
    return results


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m tests.hostile_load", description=__doc__)
    parser.add_argument("--model", help="model folder (default: a tiny random-weight Llama)")
    parser.add_argument("--stalled", type=int, default=2000)
    parser.add_argument("--slow-bodies", type=int, default=0)
    parser.add_argument("--health-flood", type=int, default=0)
    parser.add_argument(
        "--schema-bomb", action="store_true", help="also send issue 58's schema bombs"
    )
    parser.add_argument(
        "--regex-bomb", action="store_true", help="send the 128-regex schema every 3 s"
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--stop-chars", type=int, default=900_000)
    parser.add_argument("--server-args", default="", help="more `engine serve` arguments")
    args = parser.parse_args(argv)
    # the clients' sockets; mlx_lm's import would lower the hard limit to 4096 for good, so
    # this process never imports it (the tiny model is written by a child)
    raise_fd_limit(args.stalled + args.slow_bodies + args.health_flood + 512)
    with tempfile.TemporaryDirectory(prefix="hostile-load-") as folder:
        model = args.model
        if model is None:
            model = str(Path(folder) / "tiny-llama")
            write = f"from tests.tiny_model import write_tiny_llama; write_tiny_llama({model!r})"
            root = Path(__file__).resolve().parent.parent
            subprocess.run([sys.executable, "-c", write], cwd=root, check=True)
        log_path = Path(folder) / "server.log"
        process, port = start_server(model, log_path, *args.server_args.split())
        try:
            results = run(
                port,
                args.stalled,
                args.clients,
                args.seconds,
                args.stop_chars,
                args.slow_bodies,
                args.schema_bomb,
                health_flood=args.health_flood,
                regex_bomb_every=args.regex_bomb,
                server_pid=process.pid,
            )
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        results["server_log_bytes"] = log_path.stat().st_size
        results["server_log_tail"] = log_path.read_text(errors="replace")[-600:]
    print(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
