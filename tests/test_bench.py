"""The benchmark machinery on the tiny random-weight model: report files and identity check."""

from __future__ import annotations

import math
import json
from pathlib import Path

import pytest


@pytest.fixture
def bench_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTLESS_CACHE_DIR", str(tmp_path / "cache"))  # adaptive cost curve


def tiny_config(out, model_dir, **overrides):
    from engine.bench.suite import BenchConfig

    cfg = BenchConfig(
        out=out,
        model=str(model_dir),
        tasks=["code-edit"],
        per_task=1,
        max_tokens=8,
        drafters=["prompt-lookup"],
        repeats=3,
        verify_ns=[1, 2, 3],
        verify_repeats=1,
        verify_prefix=16,
        command="pytest",
    )
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


def test_bench_writes_report_and_checks_identity(tiny_model_dir, tmp_path, bench_cache):
    from engine.bench.suite import Suite

    out = tmp_path / "report"
    assert Suite(tiny_config(out, tiny_model_dir)).run() == 0
    plots = ["speedup.png", "tokens_per_pass.png", "verify_cost.png"]
    assert sorted(p.name for p in out.iterdir()) == sorted(["report.md", "results.json", *plots])
    results = json.loads((out / "results.json").read_text())
    assert results["failures"] == []
    configs = {run["config"] for run in results["runs"]}
    assert configs == {"none", "prompt-lookup", "oracle", "mlx-lm"}
    assert all(run["identical"] for run in results["runs"])
    # every config ran once per round, rounds interleaved
    rounds = {(run["config"], run["repeat"]) for run in results["runs"]}
    assert rounds == {(c, r) for c in configs for r in range(3)}
    summary = results["summary"]["per"]["prompt-lookup"]["all"]
    assert summary["emitted"] >= summary["passes"] >= 1
    assert summary["rounds"] == 3 and summary["lo"] <= summary["speedup"] <= summary["hi"]
    assert summary["verdict"] in ("gain", "loss", "no change")
    assert set(results["verify_cost"]["ratio"]) == {"1", "2", "3"}
    assert results["verify_cost"]["ratio"]["1"] == 1.0
    # c(n) priced over the run: the start's sample and 2 after the one chat; the start's kept
    assert results["verify_cost"]["repeats"] == 1 + 2 * len(results["workloads"])
    assert set(results["verify_cost"]["planned_s"]) == {"1", "2", "3"}
    scale = results["verify_cost"]["context_scale"]  # timed at a third, once and 3x the prefix
    assert scale["contexts"] == [5, 16, 48] and scale["lengths"] == [1]  # none past the curve's
    assert scale["ratios"][1] == [1.0]
    # plain decoding's own pace in the loop, what the prediction prices it at: recorded (its
    # value is a timing of 1 ms passes here, one c(1) sample: no bound on it is safe)
    loop_share = results["verify_cost"]["loop_share"]
    assert isinstance(loop_share, float) and math.isfinite(loop_share) and loop_share > 0
    report = (out / "report.md").read_text()
    assert "Identity check: every Draftless run" in report
    assert "median of up to 3 timed passes a length: 1 at the start" in report
    speed = next(t for t in markdown_tables(report) if t[0][:2] == ["config", "tokens/s"])
    assert [row[0] for row in speed[1:]] == [f"`{c}`" for c in results["summary"]["configs"]]
    assert all(float(row[1]) > 0 and row[-1] == "yes" for row in speed[1:])


def test_a_conversations_file_runs_with_its_speed_up_measured_beside_predicted(
    tiny_model_dir, tmp_path, bench_cache
):
    from engine.bench.report import measured_beside_predicted, pass_cost_table, predicted_table
    from engine.bench.report import measured_curve, priced_passes
    from engine.bench.suite import Suite
    from engine.drafters import DEFAULT_DRAFTER

    chats = [
        ("a", "prose", ["Say a b c a b c.", "Again."]),
        ("b", "prose", ["Left out: one chat per category."]),
        ("c", "code", ["def f(): return f"]),
    ]
    lines = []
    for name, category, asked in chats:
        messages = []
        for text in asked:
            messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "x"}]
        lines.append(json.dumps({"id": name, "category": category, "messages": messages}))
    (tmp_path / "chats.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "report"
    overrides = dict(drafters=[DEFAULT_DRAFTER], repeats=2, oracle=False, mlx_lm=False)
    overrides.update(max_tokens=6)
    cfg = tiny_config(out, tiny_model_dir, conversations=str(tmp_path / "chats.jsonl"), **overrides)
    assert Suite(cfg).run() == 0
    results = json.loads((out / "results.json").read_text())
    assert [w["turns"] for w in results["workloads"]] == [["a-t1", "a-t2"], ["c"]]
    assert {run["config"] for run in results["runs"]} == {"none", DEFAULT_DRAFTER}
    assert results["summary"]["tasks"] == ["prose", "code"]  # categories the suite never had
    predicted = results["predicted"]
    assert set(predicted) == {DEFAULT_DRAFTER, "hindsight"}  # every drafter config that ran
    assert all(
        set(p) == {"prose", "code", "all"} and min(p.values()) > 0 for p in predicted.values()
    )
    table = next(t for t in markdown_tables(predicted_table(results)[4]) if t[0][0] == "config")
    assert [row[1] for row in table[1:]] == ["prose", "code", "**all**"]
    measured = results["summary"]["per"][DEFAULT_DRAFTER]["all"]["speedup"]
    ratio = measured / predicted[DEFAULT_DRAFTER]["all"]
    assert table[-1][2:5] == [
        f"{measured:.2f}",
        f"{predicted[DEFAULT_DRAFTER]['all']:.2f}",
        f"{ratio:.2f}",
    ]
    assert report_lines_say(measured_beside_predicted(results), f"{ratio:.2f}")
    report = (out / "report.md").read_text()
    assert "## Measured against predicted" in report and "chats.jsonl`" in report
    costs = markdown_tables("\n".join(pass_cost_table(results)))[0]
    assert [row[0] for row in costs[1:]] == ["`none`", f"`{DEFAULT_DRAFTER}`"]  # not mlx-lm
    plain = [r for r in results["runs"] if r["config"] == "none"]
    passes = sum(r["stats"]["passes"] for r in plain)
    queued = sum(r["stats"]["queued_passes"] for r in plain) / passes
    assert queued > 0.5  # plain decoding queues every pass but an answer's first
    assert costs[1][1:4] == [f"{passes:,}", "100%", f"{queued:.0%}"]
    assert costs[1][4] == f"{1e3 * sum(r['timing']['decode_s'] for r in plain) / passes:.2f}"
    share = results["verify_cost"]["loop_share"]
    charged = sum(priced_passes(measured_curve(results), r, share) for r in plain)
    assert costs[1][6] == f"{1e3 * charged / passes:.2f}"
    by_task = markdown_tables("\n".join(pass_cost_table(results)))[1]
    assert [row[0] for row in by_task[1:]] == ["prose", "code"]
    for row in by_task[1:]:  # plain decoding's passes of that task against their charge
        runs = [r for r in plain if r["task"] == row[0]]
        spent = sum(r["timing"]["decode_s"] for r in runs)
        charged = sum(priced_passes(measured_curve(results), r, share) for r in runs)
        assert row[1] == f"{spent / charged:.2f}"
    for run in results["runs"]:  # a results.json written before passes were listed
        run.get("stats", {}).pop("pass_sizes", None)
    assert pass_cost_table(results) == []


def report_lines_say(lines: list[str], ratio: str) -> bool:
    """The run's closing lines give the default's measured / predicted over all tasks."""
    return any(" all " in line and line.endswith(f"= {ratio}") for line in lines)


def test_bench_flags_a_mismatch(tiny_model_dir, tmp_path, bench_cache, monkeypatch):
    from engine.bench import suite
    from engine.bench.suite import Suite

    real = suite.mlx_lm_greedy

    def corrupted(*args, **kwargs):
        tokens, seconds, cpu = real(*args, **kwargs)
        return [tokens[0] + 1] + tokens[1:], seconds, cpu

    monkeypatch.setattr(suite, "mlx_lm_greedy", corrupted)
    out = tmp_path / "report"
    cfg = tiny_config(out, tiny_model_dir, max_tokens=4)
    assert Suite(cfg).run() != 0
    results = json.loads((out / "results.json").read_text())
    assert any("mlx-lm" in f for f in results["failures"])
    assert "FAILED" in (out / "report.md").read_text()


def test_quick_arguments():
    import argparse

    from engine.bench.cli import add_bench_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    cfg = config_from_args(
        parser.parse_args(
            ["--quick", "--drafters", "prompt-lookup,frequency", "--max-tokens", "32"]
            + ["--prompts-per-task", "3", "--no-oracle", "--no-mlx-lm"]
        )
    )
    assert cfg.quick and cfg.repeats == 1 and cfg.per_task == 3 and not cfg.oracle
    assert not cfg.mlx_lm
    assert cfg.drafters == ["prompt-lookup", "frequency"] and cfg.max_tokens == 32
    assert cfg.draft_count + 1 in cfg.verify_ns


COMMITTED = Path(__file__).resolve().parent.parent / "resources" / "readme" / "benchmarks"


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table of a report as rows of stripped cells (separator rows dropped)."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-:") and cell for cell in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_paired_ratios_come_from_the_committed_runs_with_intervals():
    from engine.bench.aggregate import paired_ratios, ratio_interval

    results = json.loads((COMMITTED / "results.json").read_text())
    ratios = paired_ratios(results)
    plain = {
        (r["workload"], r["repeat"]): r["decode_wall_s"]
        for r in results["runs"]
        if r["config"] == "none"
    }
    suffix = [r for r in results["runs"] if r["config"] == "suffix" and r["task"] == "code-edit"]
    assert sorted(ratios["suffix"]["code-edit"]) == sorted(
        r["decode_wall_s"] / plain[(r["workload"], r["repeat"])] for r in suffix
    )
    cell = ratio_interval(ratios["suffix"]["all"])
    assert cell["pairs"] == len([r for r in results["runs"] if r["config"] == "suffix"])
    assert cell["lo"] <= cell["ratio"] <= cell["hi"]
    assert ratio_interval(ratios["suffix"]["all"]) == cell  # fixed seed: the same interval
    assert ratio_interval([]) is None and ratio_interval([0.5])["lo"] == 0.5


def test_the_report_says_not_in_this_run_where_results_lack_pairs(tmp_path):
    from engine.bench import report

    results = json.loads((COMMITTED / "results.json").read_text())
    results["runs"] = [  # as if prompt-lookup had not run on HumanEval
        r for r in results["runs"] if (r["config"], r["task"]) != ("prompt-lookup", "humaneval")
    ]
    report.render(results, tmp_path)
    table = next(
        t
        for t in markdown_tables((tmp_path / "report.md").read_text())
        if t[0][0] == "task" and any("pairs" in c for row in t for c in row)
    )
    header = table[0]
    humaneval = next(row for row in table if row[0] == "humaneval")
    assert humaneval[header.index("`prompt-lookup`")] == "not in this run"
    assert humaneval[header.index("Draftless (`suffix`)")].endswith("; 3 pairs)")


@pytest.mark.parametrize(
    "folder",
    [
        COMMITTED,
        COMMITTED / "gpu-dev",
        COMMITTED / "cpu-dev" / "f32",
        COMMITTED / "cpu-dev" / "4bit",
    ],
    ids=["cpu", "gpu-dev", "cpu-dev-f32", "cpu-dev-4bit"],
)
def test_committed_results_render_again_without_measuring(tmp_path, monkeypatch, folder):
    from engine.__main__ import main
    from engine.bench import suite

    def no_measuring(*args, **kwargs):
        raise AssertionError("rendering must not measure")

    monkeypatch.setattr(suite.Suite, "run", no_measuring)
    out = tmp_path / "again"
    assert main(["bench", "--render", str(folder / "results.json"), "--out", str(out)]) == 0
    # the report is a function of results.json alone: the committed one's tables come back
    again, committed = (out / "report.md").read_text(), (folder / "report.md").read_text()
    assert len(markdown_tables(committed)) >= 5
    assert markdown_tables(again) == markdown_tables(committed)
    identity = "FAILED" if json.loads((folder / "results.json").read_text())["failures"] else ""
    assert f"Identity check: {identity or 'every Draftless run'}" in again


def test_a_failure_is_the_first_thing_the_report_says(tmp_path):
    from engine.bench import report

    results = json.loads((COMMITTED / "results.json").read_text())
    results["failures"] = ["suffix code-edit: output differs from plain greedy at token 3"]
    report.render(results, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "Identity check: FAILED" in text.split("\n\n")[1]
    assert "- FAILED suffix code-edit: output differs" in text


def test_an_unknown_task_is_a_message_before_any_model_loads(tmp_path, capsys, monkeypatch):
    from engine.__main__ import main
    from engine.bench import suite

    def no_loading(*args, **kwargs):
        raise AssertionError("a bad task list must not load the model")

    monkeypatch.setattr(suite, "load_model", no_loading)
    assert main(["bench", "--tasks", "code-edit,nope", "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "Unknown task 'nope'; choose from code-edit" in error and "Traceback" not in error
    assert not (tmp_path / "report.md").exists()


def test_render_of_a_bad_results_file_is_a_message(tmp_path, capsys):
    from engine.__main__ import main

    bad = tmp_path / "results.json"
    bad.write_text('{"settings": {}}')
    assert main(["bench", "--render", str(bad)]) == 2
    assert "is not a results.json" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()


def test_a_pass_splits_into_graph_eval_and_sync(tiny_loaded):
    import math

    from engine.bench.passes import pass_split

    result = pass_split(tiny_loaded, context=8, n=3, repeats=1)
    for part in ("full_ms", "graph_ms", "eval_ms", "sync_ms"):
        assert math.isfinite(result[part]), part
    assert result["n"] == 3 and result["full_ms"] > 0 and result["graph_ms"] > 0


def test_a_token_is_timed_pass_by_pass_and_pipelined_over_the_same_passes(tiny_loaded):
    from engine.bench.passes import plain_pace

    pace = plain_pace(tiny_loaded, context=8, tokens=6, rounds=2)
    assert pace["waited"] > 0 and pace["pipelined"] > 0
    assert len(pace["tokens"]["waited"]) == 6
    assert pace["tokens"]["pipelined"] == pace["tokens"]["waited"]


def test_the_loop_against_the_oracle_is_checked_against_plain(tiny_loaded, capsys):
    from engine.bench.passes import loop
    from engine.policy.verify_cost import CostCurve

    loop(tiny_loaded, CostCurve({1: 1.0, 8: 1.2}), [2], ["prompt-lookup"], 6, 2)
    table = markdown_tables(capsys.readouterr().out)[0]
    assert [row[0] for row in table[1:]] == ["oracle-2", "prompt-lookup"]
    assert all(row[-1] == "yes" for row in table[1:])
    assert float(table[1][2]) > 1.0  # the oracle's drafts are all accepted
