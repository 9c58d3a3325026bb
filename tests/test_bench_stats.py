"""The benchmark's statistics and new code paths (no timing thresholds: synthetic times)."""

from __future__ import annotations

import json

import pytest


def test_a_range_that_crosses_the_plain_noise_is_no_change():
    from engine.bench.aggregate import paired_speedups

    plain = {0: 1.00, 1: 1.10, 2: 0.95}  # none against none: up to 1.16x apart
    crossing = paired_speedups(plain, {0: 0.80, 1: 1.05, 2: 0.90})  # 1.25, 1.05, 1.06
    assert crossing["speedup"] == pytest.approx(1.0556, abs=1e-3)
    assert crossing["lo"] < crossing["noise"] and crossing["verdict"] == "no change"
    gain = paired_speedups(plain, {0: 0.5, 1: 0.55, 2: 0.45})
    assert gain["verdict"] == "gain" and gain["lo"] == pytest.approx(2.0)
    loss = paired_speedups(plain, {0: 2.0, 1: 2.1, 2: 1.9})
    assert loss["verdict"] == "loss"


def test_one_round_claims_nothing():
    from engine.bench.aggregate import paired_speedups
    from engine.bench.report import speedup_cell

    one = paired_speedups({0: 1.0}, {0: 0.5})
    assert one["verdict"] == "one round"
    assert "one round" in speedup_cell(one)


def test_rounds_are_paired_and_unpaired_rounds_ignored():
    from engine.bench.aggregate import paired_speedups

    figures = paired_speedups({0: 1.0, 1: 2.0, 2: 9.0}, {0: 0.5, 1: 1.0})
    assert figures["rounds"] == 2 and figures["speedup"] == pytest.approx(2.0)
    assert figures["noise"] == pytest.approx(2.0)  # only the paired plain rounds


def test_report_never_prints_no_change_as_a_gain():
    from engine.bench.report import speedup_cell

    assert (
        speedup_cell({"speedup": 1.27, "lo": 0.98, "hi": 1.4, "verdict": "no change"})
        == "no change (0.98–1.40)"
    )
    assert (
        speedup_cell({"speedup": 1.5, "lo": 1.4, "hi": 1.6, "verdict": "gain"})
        == "1.50x (1.40–1.60)"
    )
    assert speedup_cell(None) == "–"


def test_goals_compare_families_with_the_best_peer():
    from engine.bench.aggregate import goals

    task_of = {"a": "code-edit", "b": "code-edit", "q": "open-question"}
    ours = {"a": 2.0, "b": 2.0, "q": 1.0}
    per_task = {
        "code-edit": {"speedup": 2.0, "lo": 1.9, "verdict": "gain"},
        "open-question": {"speedup": 0.9, "lo": 0.85, "verdict": "loss"},
    }
    peers = {"HF": {"a": 1.5, "b": 1.5}, "llama.cpp x": {"a": 1.8, "b": 1.8}}
    rows = {row["goal"].split(":")[0]: row for row in goals(ours, task_of, per_task, peers)}
    assert rows["code editing"]["best_peer"] == "llama.cpp x"
    assert rows["code editing"]["met"] is False  # 2.0 < 1.2 x 1.8
    assert rows["open-question"]["met"] is False
    assert rows["all tasks"]["ours"] == pytest.approx((2.0 * 0.9) ** 0.5, abs=1e-3)


def test_oracle_drafts_the_known_answer_and_nothing_off_it():
    from engine.bench.oracle import OracleDrafter, best_fixed_count

    oracle = OracleDrafter()
    oracle.reset([1, 2, 3])
    oracle.expect([7, 8, 9, 10])
    assert oracle.propose(2).rows == [[7, 8]]
    oracle.observe([7, 8, 9])
    assert oracle.propose(4).rows == [[10]]
    oracle.observe([10])
    assert oracle.propose(4).rows == []  # the whole answer said
    oracle.reset([1, 2, 3])
    oracle.observe([7, 5])
    assert oracle.propose(4).rows == []  # off the answer: no guess
    # flat cost to n = 9, then steep: sending 8 per pass is best
    assert best_fixed_count({"1": 1.0, "9": 1.2, "17": 4.0}) == 8


def test_oracle_is_not_a_registered_drafter():
    from engine.drafters import DRAFTERS

    assert "oracle" not in DRAFTERS


def test_oracle_session_is_lossless_and_reaches_the_limit(tiny_loaded):
    from engine.bench.oracle import OracleDrafter, OracleSession
    from engine.events import DoneEvent
    from engine.memory import EngineMemory
    from engine.session import ChatSession
    from engine.settings import DraftSettings, GenerationRequest

    messages = [{"role": "user", "content": "abcabcabc"}]

    def done(session, draft):
        request = GenerationRequest(messages=messages, max_tokens=24, draft=draft).validated()
        return next(e for e in session.generate(request) if isinstance(e, DoneEvent))

    memory = EngineMemory()
    plain = done(ChatSession(tiny_loaded, memory), DraftSettings(drafter="none"))
    oracle = OracleDrafter()
    oracle.expect(plain.tokens)
    fast = done(
        OracleSession(tiny_loaded, memory, oracle),
        DraftSettings(drafter="none", draft_count=5, adaptive=False),
    )
    assert fast.tokens == plain.tokens
    assert fast.stats["acceptance_rate"] == 1.0
    assert fast.stats["passes"] == -(-fast.stats["emitted"] // 6)  # 5 drafted + 1 per pass


def test_llama_cpp_not_built_gives_a_skip_line(tmp_path, monkeypatch):
    from engine.bench import llamacpp

    monkeypatch.setenv("DRAFTLESS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DRAFTLESS_LLAMA_SERVER", raising=False)
    line = llamacpp.status()
    assert line.startswith("skipped: llama.cpp is not built") and llamacpp.BUILD_COMMAND in line
    monkeypatch.setenv("DRAFTLESS_LLAMA_SERVER", str(tmp_path / "nope"))
    assert "is not a file" in llamacpp.status()
    binary = tmp_path / "llama.cpp" / "llama_cpp_python-0.0.1" / "build" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    monkeypatch.delenv("DRAFTLESS_LLAMA_SERVER")
    assert llamacpp.status() is None and llamacpp.server_binary() == binary


def test_llama_run_counts_passes_from_accepted_drafts():
    from engine.bench.llamacpp import LlamaRun

    run = LlamaRun(
        tokens=list(range(10)), decode_s=1.0, predicted_n=10, draft_n=8, draft_accepted=6
    )
    assert run.passes == 4 and run.tokens_per_pass == 2.5


def test_check_and_tuning_sets_do_not_share_prompts():
    from engine.bench.workloads import TASK_ORDER, select_workloads

    check, _ = select_workloads(list(TASK_ORDER), 2, split="check")
    tuning, _ = select_workloads(list(TASK_ORDER), 2, split="tuning")
    texts = lambda ws: {w.messages[0]["content"] for w in ws}  # noqa: E731
    assert check and tuning and not texts(check) & texts(tuning)
    sessions = [w for w in check + tuning if w.task in ("edit-session", "edit-memory")]
    assert sessions and all(4 <= len(w.turn_ids()) <= 6 for w in sessions)


def test_editing_sessions_run_as_one_chat_each(tiny_model_dir, tmp_path, monkeypatch):
    """Each config runs a chat's turns in one session (the cache is reused across turns) and
    the memory chat's drafter was taught the chat before it."""
    from engine.bench.suite import BenchConfig, Suite

    monkeypatch.setenv("DRAFTLESS_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "data"
    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(data))
    out = tmp_path / "report"
    cfg = BenchConfig(
        out=out,
        model=str(tiny_model_dir),
        tasks=["edit-memory"],
        per_task=1,
        max_tokens=6,
        drafters=["ngram-cache"],
        hf_peer=False,
        llama_peer=False,
        sweep=False,
        repeats=1,
        verify_ns=[1, 2, 3],
        verify_repeats=1,
        verify_prefix=16,
        plots=False,
        command="pytest",
    )
    suite = Suite(cfg)
    taught, folders = [], []
    real = Suite.teach_cross_chat

    def spy(self, name, earlier, stores):
        real(self, name, earlier, stores)
        taught.append((name, earlier.id, len(stores)))
        folders.append(stores.folder)
        assert any(stores.folder.iterdir())  # the taught memory was written to its own folder

    monkeypatch.setattr(Suite, "teach_cross_chat", spy)
    assert suite.run() == 0
    assert taught == [("ngram-cache", "point-session", 1)]
    import os

    assert os.environ["DRAFTLESS_DATA_DIR"] == str(data)  # restored after the run
    assert not data.exists() or not any(data.iterdir())  # the user's data folder untouched
    assert folders and not any(folder.exists() for folder in folders)  # cleaned up
    results = json.loads((out / "results.json").read_text())
    runs = [r for r in results["runs"] if r["config"] == "ngram-cache"]
    assert [r["workload"] for r in runs] == [f"account-memory-t{n}" for n in range(1, 5)]
    assert all(r["identical"] for r in results["runs"])
    later = [r["timing"] for r in runs[1:]]
    assert all(s["prefilled_tokens"] < s["prompt_tokens"] for s in later)  # cache kept


def test_replay_matches_the_real_loop_with_a_fixed_draft_count(tiny_loaded):
    """The tuning replay (no model) drafts, accepts and counts passes as the engine did."""
    from engine.adaptive import AdaptiveMemory
    from engine.bench.tune import simulate
    from engine.events import DoneEvent
    from engine.session import ChatSession, prompt_tokens
    from engine.settings import DraftSettings, GenerationRequest

    messages = [{"role": "user", "content": "abcabcabcabc abcabc"}]
    draft = DraftSettings(drafter="prompt-lookup", draft_count=3, adaptive=False)
    request = GenerationRequest(messages=messages, max_tokens=40, draft=draft).validated()
    done = next(e for e in ChatSession(tiny_loaded).generate(request) if isinstance(e, DoneEvent))
    eos = sorted(tiny_loaded.tokenizer.eos_token_ids)[0]
    chat = [
        {
            "prompt": prompt_tokens(tiny_loaded, request),
            "answer": done.tokens,
            "stop": done.finish_reason == "stop",
        }
    ]
    result = simulate(
        chat, "prompt-lookup", 3, False, AdaptiveMemory(), "tiny", {1: 1.0, 4: 1.5}, eos
    )
    assert (result["passes"], result["emitted"]) == (done.stats["passes"], done.stats["emitted"])
    assert result["plain_s"] == pytest.approx(done.stats["emitted"])  # one c(1) per plain token
    assert result["passes"] <= result["spec_s"] <= 1.5 * result["passes"]


FAKE_SERVER = r'''#!/usr/bin/env python3
"""A stand-in llama-server: greedy 'decoding' that repeats the prompt's last tokens;
the ngram-map-k mode hangs once on a repeated request (as the real one was seen to)."""
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
mode = args[args.index("--spec-type") + 1] if "--spec-type" in args else "none"
marker = args[args.index("-m") + 1] + ".hung"  # hang once, not again after the restart
state = {"requests": 0}

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        state["requests"] += 1
        n = body["n_predict"]
        if mode == "ngram-map-k" and n > 1 and state["requests"] == 4 and not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(30)
        tokens = (body["prompt"] * n)[-n:]
        drafted = 0 if mode == "none" else n
        reply = {"tokens": tokens, "timings": {"predicted_ms": 10.0 * n / (2 if drafted else 1),
                 "predicted_n": n, "draft_n": drafted, "draft_n_accepted": drafted // 2}}
        data = json.dumps(reply).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(data))); self.end_headers()
        self.wfile.write(data)

HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def test_llama_cpp_modes_run_and_a_hung_request_is_noted(tmp_path):
    import stat

    from engine.bench import llamacpp
    from engine.bench.aggregate import peer_rows, summarise_peer

    binary = tmp_path / "llama-server"
    binary.write_text(FAKE_SERVER)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    jobs = [{"id": "a", "tokens": [1, 2, 3]}, {"id": "b", "tokens": [4, 5]}]
    result = llamacpp.run_modes(
        binary,
        tmp_path / "model.gguf",
        jobs,
        max_tokens=4,
        repeats=2,
        modes=("none", "ngram-simple", "ngram-map-k"),
        threads=1,
        request_timeout=3,
    )
    errors = [r for r in result["rows"] if "error" in r]
    assert [(r["mode"]) for r in errors] == ["ngram-map-k"] and "restarted" in errors[0]["error"]
    rows = [r for r in result["rows"] if "error" not in r]
    assert len(rows) == 2 * 2 * 3 - 1
    for row in rows:
        row["task"], row["identical_to_own_plain"] = "code-edit", True
    peers = peer_rows({}, {"status": "ran", "rows": rows})
    simple = summarise_peer(peers["llama.cpp ngram-simple"])
    assert simple["speedup"] == pytest.approx(2.0) and simple["tokens_per_pass"] == pytest.approx(
        2.0
    )
    assert all("loadavg_1min" in r for r in rows)


def test_a_peer_that_cannot_run_or_fails_is_a_skip_line_and_differences_are_kept():
    from engine.bench.peers import run_peer

    class FakePeer:
        key = "fake"

        def __init__(self, status=None, error=None):
            self._status, self._error = status, error

        def status(self, loaded):
            return self._status

        def describe(self, answers, repeats):
            return "a fake peer"

        def run(self, loaded, jobs, max_tokens, repeats, log):
            if self._error:
                raise self._error
            return {"rows": [{"id": j["id"], "tokens": j["tokens"][::-1]} for j in jobs]}

        def collect(self, result, task_of, reference):
            differences = [
                f"fake {r['id']}" for r in result["rows"] if r["tokens"] != reference[r["id"]]
            ]
            return {"status": "ran", "rows": result["rows"]}, differences, []

    jobs = [{"id": "a", "task": "rag", "tokens": [1, 2]}, {"id": "b", "task": "rag", "tokens": [3]}]
    reference = {"a": [1, 2], "b": [3]}
    lines = []
    assert run_peer(FakePeer("skipped: not here"), None, jobs, 4, 1, reference, lines.append) == (
        {"status": "skipped: not here"},
        [],
        [],
    )
    entry, differences, skipped = run_peer(
        FakePeer(error=OSError("boom")), None, jobs, 4, 1, reference, lines.append
    )
    assert entry["status"].startswith("skipped: a fake peer failed (OSError: boom)")
    assert differences == [] and skipped == []
    entry, differences, skipped = run_peer(FakePeer(), None, jobs, 4, 1, reference, lines.append)
    assert entry["status"] == "ran" and differences == ["fake a"]
