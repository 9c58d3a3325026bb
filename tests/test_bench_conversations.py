"""Real conversations as the yardstick: the replay's input file, the public sources' loaders and
splits, the hindsight bound, and ``python -m engine.bench.devices --conversations``."""

from __future__ import annotations

import io
import json
from collections import Counter

import pytest

from engine.bench import conversations as conv
from engine.bench.conversations import ConversationError, read_conversations

CURVE = "h100-7b-bf16"


def _write(tmp_path, lines) -> str:
    path = tmp_path / "chats.jsonl"
    path.write_text(
        "".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines)
    )
    return str(path)


def _chat(name="a", category="prose", messages=None) -> dict:
    messages = messages or [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
    ]
    return {"id": name, "category": category, "messages": messages}


def test_a_json_array_cut_short_yields_its_complete_elements():
    items = [{"id": n, "text": "x\u2028y" * n, "list": [1, {"a": "]"}]} for n in range(40)]
    whole = json.dumps(items, indent=1)
    cut = whole[: whole.index('"id": 31') + 3]  # inside element 31
    assert list(conv.complete_items(io.StringIO(cut), chunk=37)) == items[:31]
    assert list(conv.complete_items(io.StringIO(whole), chunk=37)) == items
    assert list(conv.complete_items(io.StringIO("[]"))) == []


@pytest.mark.parametrize(
    "lines, message",
    [
        ([_chat(), "{not json\n"], "line 2: not JSON"),
        (["[" * 100_000 + "\n"], "line 1: not JSON"),  # nested past Python's recursion limit
        (["[1, 2]\n"], "line 1: not a JSON object"),
        ([{"id": "a", "messages": []}], "line 1: needs a string id and category"),
        ([_chat(messages=[{"role": "tool", "content": "x"}])], "line 1: message 1 has role 'tool'"),
        ([_chat(messages=[{"role": "user", "content": ["x"]}])], "line 1: message 1 needs text"),
        ([_chat(messages=[{"role": "user", "content": "Hi"}])], "line 1: no assistant message"),
        ([_chat(), "\n", _chat()], "line 3: id 'a' is already on line 1"),
        ([_chat(category="")], "line 1: id must not be empty, category 1 to 40"),
        (["\n"], "holds no conversation"),
    ],
)
def test_a_bad_conversations_file_is_refused_naming_the_line(tmp_path, lines, message):
    with pytest.raises(ConversationError, match=message):
        read_conversations(_write(tmp_path, lines))


def test_the_benchmark_runs_each_categorys_first_chats_as_the_app_would(tmp_path):
    system = {"role": "system", "content": "Be brief."}
    turns = [
        {"role": "user", "content": "One"},
        {"role": "assistant", "content": "The file's answer, never used"},
        {"role": "user", "content": "Two"},
        {"role": "assistant", "content": "Another"},
    ]
    chats = [_chat("a", "prose", [system, *turns]), _chat("b"), _chat("c", "code")]
    workloads, provenance = conv.conversation_workloads(_write(tmp_path, chats), 1)
    assert [(w.id, w.task) for w in workloads] == [("a", "prose"), ("c", "code")]
    assert workloads[0].messages == [system, turns[0]]  # the chat up to its first answer
    assert workloads[0].turns == ["Two"]  # asked after the model's own answer
    assert workloads[0].turn_ids() == ["a-t1", "a-t2"]
    assert [p["items"] for p in provenance] == [["a"], ["c"]]
    answer_first = _chat(messages=[{"role": "assistant", "content": "Hi"}])
    with pytest.raises(ConversationError, match="line 1: no user message before the answer"):
        conv.conversation_workloads(_write(tmp_path, [answer_first]), 1)


def test_a_missing_or_oversized_file_is_refused(tmp_path, monkeypatch):
    with pytest.raises(ConversationError, match="Cannot read the conversations file"):
        read_conversations(tmp_path / "nowhere.jsonl")
    path = _write(tmp_path, [_chat()])
    monkeypatch.setattr(conv, "MAX_FILE_BYTES", 10)
    with pytest.raises(ConversationError, match="larger than 10 bytes"):
        read_conversations(path)


def test_the_replay_command_says_what_is_wrong_without_a_traceback(tmp_path, capsys):
    from engine.bench.devices import main

    path = _write(tmp_path, [_chat(), {"id": "b", "category": "x", "messages": "no"}])
    assert main(["--conversations", path, "--cost-curve", CURVE, "--json"]) == 2
    error = capsys.readouterr().err
    assert f"error: {path}, line 2: needs a string id" in error and "Traceback" not in error


@pytest.mark.parametrize(
    "tool, extra, expected",
    [
        ("calibrate", [], "line 2: needs a string id"),
        ("calibrate", ["--drafter", "nope"], "Unknown drafter 'nope'"),
        ("calibrate", ["--draft-count", "0"], "draft_count must be an integer from 1 to 64"),
        ("recycling", [], "line 2: needs a string id"),
        ("recycling", ["--cost-curve", "no-such-curve"], "no-such-curve"),
        ("policy_gap", [], "line 2: needs a string id"),
        ("policy_gap", ["--cost-curve", "no-such-curve"], "no-such-curve"),
        ("tune", [], "line 2: needs a string id"),
        ("tune", ["--table", "no-such-table.npz"], "no-such-table.npz"),
    ],
)
def test_the_fitting_recycling_and_gap_tools_check_their_input_before_loading_a_model(
    tmp_path, capsys, monkeypatch, tool, extra, expected
):
    import importlib

    import engine.models

    def no_loading(*args, **kwargs):
        raise AssertionError("bad input must not load the model")

    monkeypatch.setattr(engine.models, "load_model", no_loading)
    bad = [_chat(), {"id": "b", "category": "x", "messages": "no"}]
    path = _write(tmp_path, [_chat()] if extra else bad)  # extra: the file is fine
    main = importlib.import_module(f"engine.bench.{tool}").main
    assert main(["--conversations", path, *extra]) == 2
    error = capsys.readouterr().err
    assert "error: " in error and expected in error and "Traceback" not in error


def test_splits_are_a_fixed_hash_of_the_conversation():
    splits = Counter(conv.split_of("sharegpt", f"chat{n}") for n in range(10_000))
    assert [round(splits[s] / 10_000, 1) for s in ("tuning", "dev", "rest")] == [0.4, 0.4, 0.2]
    assert conv.split_of("sharegpt", "chat7") == conv.split_of("sharegpt", "chat7")
    assert conv.main(["--source", "humaneval", "--split", "rest", "--out", "x.jsonl"]) == 2


def test_passes_costed_on_another_curve_equal_a_replay_on_it():
    """A strategy with no policy drafts the same on every curve: its replay is costed again."""
    from engine.bench.tune import recost, simulate
    from engine.policy.adaptive import AdaptiveMemory
    from engine.policy.verify_cost import CostCurve

    prompt = [5, 6, 7, 8, 9, 5, 6, 7, 10, 11, 5, 6, 7, 8, 12] * 3
    turns = [{"prompt": prompt, "answer": [5, 6, 7, 8, 9, 13, 5, 6, 7, 10, 11, 14] * 2}]
    steep = {1: 0.01, 2: 0.02, 8: 0.05, 65: 0.4}
    flat = {1: 0.01, 65: 0.012}

    def replay(seconds, extra):
        memory = AdaptiveMemory()
        return simulate(turns, "suffix", 8, False, memory, "k", seconds, 0, tree_extra=extra)

    on_steep = replay(steep, 0.003)
    assert any(tree for _, tree in on_steep["sizes"])  # tree passes are costed too
    again = recost(replay(flat, 0.0), CostCurve(steep, tree_extra=0.003))
    assert again["spec_s"] == pytest.approx(on_steep["spec_s"])
    assert again["plain_s"] == pytest.approx(on_steep["plain_s"])


def test_each_pass_is_priced_at_its_context_where_the_curve_says_how():
    """A curve with a context scale prices a pass after a longer context dearer, plain
    decoding's passes too, in the replay and when its passes are costed again."""
    from engine.bench.tune import recost, simulate
    from engine.policy.adaptive import AdaptiveMemory
    from engine.policy.context_scale import ContextScale
    from engine.policy.verify_cost import CostCurve

    prompt = [5, 6, 7, 8, 9, 5, 6, 7, 10, 11, 5, 6, 7, 8, 12] * 3
    answer = [5, 6, 7, 8, 9, 13, 5, 6, 7, 10, 11, 14] * 2
    turns = [{"prompt": prompt, "answer": answer}, {"prompt": prompt * 2, "answer": answer}]
    seconds = {1: 0.01, 2: 0.02, 8: 0.05, 65: 0.4}
    # the measured context (45 tokens) costs the curve; 90 tokens, twice that for long passes
    scale = ContextScale((45, 90), (1, 9), ((1.0, 1.0), (1.5, 2.0)))

    def replay(context_scale):
        memory = AdaptiveMemory()
        return simulate(
            turns, "suffix", 8, False, memory, "k", seconds, 0, context_scale=context_scale
        )

    flat, scaled = replay(None), replay(scale)
    assert scaled["sizes"] == flat["sizes"]  # the same passes, priced otherwise
    assert flat["contexts"][0] == len(prompt)  # the first pass reads the first prompt
    assert flat["answers"] == [(len(prompt), len(answer) + 1), (2 * len(prompt), len(answer) + 1)]
    queued = CostCurve(seconds).queued_base()
    first = [queued * scale(1, len(prompt) + i) for i in range(len(answer) + 1)]
    second = (len(answer) + 1) * queued * 1.5  # held at the grid's edge past 90 tokens
    assert scaled["plain_s"] == pytest.approx(sum(first) + second)
    assert scaled["spec_s"] > flat["spec_s"]
    for (n, _), context, cost in zip(scaled["sizes"], scaled["contexts"], scaled["costs"]):
        unscaled = queued if n == 1 else CostCurve(seconds).base(n)
        assert cost == pytest.approx(unscaled * scale(n, context))
    again = recost(flat, CostCurve(seconds, context_scale=scale))
    assert again["spec_s"] == pytest.approx(scaled["spec_s"])
    assert again["plain_s"] == pytest.approx(scaled["plain_s"])


class _Rows:
    """A drafter stub proposing fixed rows and recording what it observes."""

    multi_row = True

    def __init__(self, rows):
        self.rows, self.seen = rows, []

    def propose(self, k):
        from engine.drafters.base import Proposal

        return Proposal([r[:k] for r in self.rows], 2)

    def observe(self, emitted, **details):
        self.seen.append(details["row"])

    def reset(self, prompt):
        pass


def test_hindsight_sends_the_row_and_length_that_pay_most_or_nothing():
    from engine.bench.oracle import HindsightDrafter
    from engine.policy.verify_cost import CostCurve

    answer = [1, 2, 3, 4, 5, 6]
    inner = _Rows([[1, 2, 9, 9], [1, 2, 3, 4, 9]])  # the second row matches 4 tokens
    flat = HindsightDrafter(inner, [answer], CostCurve({1: 1.0, 8: 1.1}))
    flat.reset([0])
    proposal = flat.propose(8)
    assert proposal.rows == [[1, 2, 3, 4]] and proposal.match_length == 2
    flat.observe([1, 2, 3, 4, 5], accepted=4, drafted=4, row=0)
    assert inner.seen == [1]  # the inner drafter learns which of its rows went out
    steep = HindsightDrafter(_Rows([[1, 9]]), [answer], CostCurve({1: 1.0, 2: 2.5, 8: 9.0}))
    steep.reset([0])
    assert steep.propose(8).rows == []  # one token kept for 2.5x a pass: nothing pays
    stepped = HindsightDrafter(_Rows([[1, 2, 3, 9]]), [answer], CostCurve({1: 1, 3: 1, 4: 4}))
    stepped.reset([0])
    assert stepped.propose(8).rows == [[1, 2]]  # 3 tokens for c(3); the third draft costs 4x


@pytest.mark.embedded
def test_each_source_writes_conversations_that_replay(embedded_loaded, tmp_path, capsys):
    """A few short dev conversations of each source, replayed on one curve."""
    from engine.bench.devices import main

    chosen = []
    for source, categories in [
        ("sharegpt", {"code", "prose", "non-english"}),
        ("mt-bench", {"code", "math", "reasoning"}),
        ("humaneval", {"code"}),
    ]:
        sample = conv.sample(source, "dev", 6, embedded_loaded)
        assert len(sample) == 6 and {c["category"] for c in sample} <= categories
        tuning = conv.sample(source, "tuning", 6, embedded_loaded)
        assert not {c["id"] for c in sample} & {c["id"] for c in tuning}
        chosen += sorted(sample, key=lambda c: len(json.dumps(c)))[:2]
    path = tmp_path / "dev.jsonl"
    conv.write_conversations(chosen, path)
    assert [c["id"] for c in read_conversations(path)] == [c["id"] for c in chosen]
    assert main(["--conversations", str(path), "--cost-curve", CURVE, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    answers = sum(m["role"] == "assistant" for c in chosen for m in c["messages"])
    assert figures["conversations"] == 6 and figures["answer_tokens"] > answers * 5
    rows = figures["curves"][CURVE]
    assert {"default", "hindsight", "oracle", "vllm-suffix"} <= set(rows)
    assert rows["vllm-suffix"]["peer"] and not rows["default"]["peer"]
    categories = {c["category"] for c in chosen}
    for name, row in rows.items():
        assert set(row["categories"]) == categories, name
        values = row["categories"].values()
        assert min(values) - 1e-3 <= row["all"] <= max(values) + 1e-3, name
    default, hindsight, oracle = rows["default"], rows["hindsight"], rows["oracle"]
    assert oracle["all"] >= hindsight["all"] >= default["all"] > 0.5
    for category in categories:
        at = [r["categories"][category] for r in (oracle, hindsight, default)]
        assert at[0] >= at[1] >= at[2] > 0.5, category


@pytest.mark.embedded
def test_a_chat_the_app_exported_replays_as_a_conversation(embedded_loaded, tmp_path, capsys):
    """The app's JSON export (one pretty-printed object) is a conversations file of one."""
    from types import SimpleNamespace

    from app.presenters.export import chat_json
    from engine.bench.devices import main

    session = SimpleNamespace(id="chat-1", title="Colours", created=1.0, updated=2.0)
    answer = "Red, green and blue. Red, green and blue are the primary colours of light."
    messages = [
        SimpleNamespace(role="user", content="Name three colours.", created=1.0),
        SimpleNamespace(
            role="assistant",
            content=answer,
            created=2.0,
            model="m",
            finish_reason="stop",
            stats={},
            timing={},
            provenance=None,
        ),
    ]
    path = tmp_path / "Colours.json"
    path.write_text(chat_json(session, messages, "Be brief."), encoding="utf-8")
    assert "\n  " in path.read_text(encoding="utf-8")  # several lines: not JSONL
    assert main(["--conversations", str(path), "--cost-curve", CURVE, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["conversations"] == 1 and figures["answer_tokens"] > 10
    assert set(figures["curves"][CURVE]["default"]["categories"]) == {"chat"}


@pytest.mark.embedded
def test_a_conversation_over_the_context_is_refused_naming_it(embedded_loaded, tmp_path):
    long = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "word " * 9000}]
    conversations = read_conversations(_write(tmp_path, [_chat(), _chat("b", messages=long)]))
    with pytest.raises(ConversationError, match=r"line 2, message 2: .* over .* context of 8192"):
        conv.replay_chats(conversations, embedded_loaded)
    with pytest.raises(ConversationError, match="at least 1"):
        conv.replay_chats(conversations, embedded_loaded, max_tokens=0)
    chats = conv.replay_chats(conversations, embedded_loaded, max_tokens=100)
    assert [len(t["answer"]) for t in chats["b"]["turns"]] == [100]
    assert chats["b"]["turns"][0]["stop"] is False and chats["a"]["turns"][0]["stop"] is True


@pytest.mark.embedded
def test_the_tuning_replay_fits_priors_on_conversations_with_the_table_given(
    embedded_loaded, tmp_path, capsys
):
    """``python -m engine.bench.tune --conversations FILE --table FILE.npz``: the class
    acceptance is read from those answers, drafted with that table (the table's rows are
    the class suffix does not say, ``NOT_SAID``)."""
    from engine.bench.tune import main
    from engine.drafters._static_table import StaticTable
    from engine.runtime.static_ngrams import FollowerCounts, count_all, encode_plain
    from engine.tokens import output_size

    answer = "Quokkas juggle tangerines beneath violet lanterns while sleepy otters hum."
    messages = [{"role": "user", "content": "Say something odd."}]
    path = _write(tmp_path, [_chat(messages=messages + [{"role": "assistant", "content": answer}])])
    counts = FollowerCounts(1 << 21, min_count=1)
    for _ in range(3):
        counts.add(encode_plain(embedded_loaded.tokenizer, answer))
    vocab = output_size(embedded_loaded.model)
    StaticTable("planted", vocab, count_all(counts).orders).save(tmp_path / "planted.npz")

    def first_token_kept(*table) -> float:
        command = ["--conversations", path, "--drafters", "suffix-static", "--caps", "8"]
        assert main(command + list(table)) == 0
        out = capsys.readouterr().out
        assert f"{path}: 1 chats" in out and "fitted priors" in out
        rows = [line.split() for line in out.splitlines() if " NOT_SAID " in line]
        return float(rows[0][5]) if rows else 0.0

    assert first_token_kept("--table", str(tmp_path / "planted.npz")) > 0.8
    assert first_token_kept() < 0.5  # the shipped table does not know the sentence
    other = StaticTable("planted", vocab, count_all(counts).orders, tokenizer="0" * 16)
    other.save(tmp_path / "other.npz")
    command = ["--conversations", path, "--table", str(tmp_path / "other.npz")]
    assert main(command) == 2
    assert "was built for another model's tokenizer" in capsys.readouterr().err


def test_devices_names_an_unknown_strategy_before_reading_anything(tmp_path, capsys):
    from engine.bench.devices import main

    missing = str(tmp_path / "none.jsonl")  # never read: the names are checked first
    assert main(["--conversations", missing, "--cost-curve", CURVE, "--strategy", "nope"]) == 2
    error = capsys.readouterr().err
    assert "no strategy named nope; known: default," in error and "Traceback" not in error
    assert main(["--cost-curve", CURVE, "--strategy", "default"]) == 2
    assert "--strategy is for --conversations only" in capsys.readouterr().err


def test_a_replay_plans_on_the_measured_share_and_charges_the_clocked_one():
    """Priced at another share of c(1) for queued passes, a replay makes the same passes (its
    policy and schedule plan on the share the loop measured) and charges them at the other."""
    from engine.bench.tune import simulate
    from engine.policy.adaptive import AdaptiveMemory

    prompt = [5, 6, 7, 8, 9, 5, 6, 7, 10, 11, 5, 6, 7, 8, 12] * 3
    turns = [{"prompt": prompt, "answer": [5, 6, 7, 8, 9, 13, 20, 21, 22, 23] * 3}]
    seconds = {1: 0.01, 2: 0.013, 8: 0.02, 65: 0.1}

    def replay(**charge):
        memory = AdaptiveMemory()
        return simulate(turns, "suffix", 8, True, memory, "k", seconds, 0, pipelined=0.8, **charge)

    planned, clocked = replay(), replay(charge_share=1.2)
    assert clocked["sizes"] == planned["sizes"]
    assert clocked["plain_s"] == pytest.approx(planned["plain_s"] * 1.2 / 0.8)
    queued = [c for (n, _), c in zip(planned["sizes"], planned["costs"]) if n == 1]
    assert queued and clocked["spec_s"] > planned["spec_s"]


def test_a_replay_plans_on_the_curve_the_loop_had_and_charges_the_run_s():
    """Charged at another c(n) (the bench's curve over the whole run), a replay's policy plans
    on the curve the loop planned on (here: it drafts, where the other curve would not) and
    every pass is charged at the other."""
    from engine.bench.tune import simulate
    from engine.policy.adaptive import AdaptiveMemory
    from engine.policy.verify_cost import CostCurve

    prompt = [5, 6, 7, 8, 9, 5, 6, 7, 10, 11, 5, 6, 7, 8, 12] * 3
    turns = [{"prompt": prompt, "answer": [5, 6, 7, 8, 9, 13, 20, 21, 22, 23] * 3}]
    planned = {1: 0.01, 2: 0.013, 8: 0.02, 65: 0.1}
    steeper = {1: 0.01, 2: 0.03, 8: 0.08, 65: 0.4}

    def replay(seconds, **charge):
        memory = AdaptiveMemory()
        return simulate(turns, "suffix", 8, True, memory, "k", seconds, 0, pipelined=0.8, **charge)

    alone, charged = replay(planned), replay(planned, charge_seconds=steeper)
    assert [n for n, _ in replay(steeper)["sizes"]] == [1] * 31  # it would draft nothing
    first = alone["sizes"][0][0]
    assert first > 1 and charged["sizes"][0][0] == first  # planned on the loop's curve
    assert alone["costs"][0] == pytest.approx(CostCurve(planned).base(first))
    assert charged["costs"][0] == pytest.approx(CostCurve(steeper).base(first))
    assert charged["plain_s"] == pytest.approx(alone["plain_s"])  # c(1) is the same
