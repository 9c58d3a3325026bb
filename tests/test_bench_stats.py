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

    assert speedup_cell({"speedup": 1.27, "lo": 0.98, "hi": 1.4, "verdict": "no change"}) \
        == "no change (0.98–1.40)"
    assert speedup_cell({"speedup": 1.5, "lo": 1.4, "hi": 1.6, "verdict": "gain"}) == "1.50x (1.40–1.60)"
    assert speedup_cell(None) == "–"


def test_goals_compare_families_with_the_best_peer():
    from engine.bench.aggregate import goals

    task_of = {"a": "code-edit", "b": "code-edit", "q": "open-question"}
    ours = {"a": 2.0, "b": 2.0, "q": 1.0}
    per_task = {"code-edit": {"speedup": 2.0, "lo": 1.9, "verdict": "gain"},
                "open-question": {"speedup": 0.9, "lo": 0.85, "verdict": "loss"}}
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
    assert oracle.propose([1, 2, 3], 2) == [[7, 8]]
    assert oracle.propose([1, 2, 3, 7, 8, 9], 4) == [[10]]
    assert oracle.propose([1, 2, 3, 7, 5], 4) == []  # off the answer: no guess
    assert oracle.propose([1, 2, 3, 7, 8, 9, 10], 4) == []
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
    fast = done(OracleSession(tiny_loaded, memory, oracle),
                DraftSettings(drafter="none", draft_count=5, adaptive=False))
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

    run = LlamaRun(tokens=list(range(10)), decode_s=1.0, predicted_n=10, draft_n=8,
                   draft_accepted=6)
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
    cfg = BenchConfig(out=out, model=str(tiny_model_dir), tasks=["edit-memory"], per_task=1,
                      max_tokens=6, drafters=["ngram-cache"], hf_peer=False, llama_peer=False,
                      sweep=False, repeats=1, verify_ns=[1, 2, 3], verify_repeats=1,
                      verify_prefix=16, plots=False, command="pytest")
    suite = Suite(cfg)
    taught = []
    real = Suite.teach_cross_chat

    def spy(self, name, earlier, stores):
        real(self, name, earlier, stores)
        taught.append((name, earlier.id, len(stores)))

    monkeypatch.setattr(Suite, "teach_cross_chat", spy)
    assert suite.run() == 0
    assert taught == [("ngram-cache", "point-session", 1)]
    import os

    assert os.environ["DRAFTLESS_DATA_DIR"] == str(data)  # restored after the memory chat
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
    chat = [{"prompt": prompt_tokens(tiny_loaded, request), "answer": done.tokens,
             "stop": done.finish_reason == "stop"}]
    result = simulate(chat, "prompt-lookup", 3, False, AdaptiveMemory(), "tiny",
                      {1: 1.0, 4: 1.5}, eos)
    assert (result["passes"], result["emitted"]) == (done.stats["passes"], done.stats["emitted"])
    assert result["plain_s"] == pytest.approx(done.stats["emitted"])  # one c(1) per plain token
    assert result["passes"] <= result["spec_s"] <= 1.5 * result["passes"]
