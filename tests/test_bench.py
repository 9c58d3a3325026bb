"""The benchmark machinery on the tiny random-weight model: report files and identity check."""

from __future__ import annotations

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
        hf_peer=False,
        sweep=True,
        sweep_counts=[1, 2],
        repeats=3,
        sweep_drafters=1,
        sweep_tasks=["code-edit"],
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
    for name in (
        "report.md",
        "results.json",
        "tokens_per_pass.png",
        "speedup.png",
        "verify_cost.png",
        "speedup_vs_draft_count.png",
    ):
        assert (out / name).stat().st_size > 0, name
    results = json.loads((out / "results.json").read_text())
    assert results["failures"] == []
    configs = {run["config"] for run in results["runs"]}
    assert configs == {"none", "prompt-lookup", "oracle", "mlx-lm"}
    assert all(run["identical"] for run in results["runs"] + results["sweep_runs"])
    # every config ran once per round, rounds interleaved
    rounds = {(run["config"], run["repeat"]) for run in results["runs"]}
    assert rounds == {(c, r) for c in configs for r in range(3)}
    summary = results["summary"]["per"]["prompt-lookup"]["all"]
    assert summary["emitted"] >= summary["passes"] >= 1
    assert summary["rounds"] == 3 and summary["lo"] <= summary["speedup"] <= summary["hi"]
    assert summary["verdict"] in ("gain", "loss", "no change")
    assert set(results["verify_cost"]["ratio"]) == {"1", "2", "3"}
    assert results["verify_cost"]["ratio"]["1"] == 1.0
    report = (out / "report.md").read_text()
    assert "Identity check: every Draftless run" in report
    assert "Peer differences" not in report
    assert "Hugging Face" in report and "skipped" in report
    assert "llama.cpp: skipped: llama.cpp is not built" in report
    assert "python -m engine.bench.llamacpp build" in report


def test_bench_flags_a_mismatch(tiny_model_dir, tmp_path, bench_cache, monkeypatch):
    from engine.bench import peers
    from engine.bench.suite import Suite

    real = peers.mlx_lm_greedy

    def corrupted(*args, **kwargs):
        run = real(*args, **kwargs)
        run.tokens[0] += 1
        return run

    monkeypatch.setattr(peers, "mlx_lm_greedy", corrupted)
    out = tmp_path / "report"
    cfg = tiny_config(out, tiny_model_dir, sweep=False, plots=False, max_tokens=4)
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
            ["--quick", "--drafters", "prompt-lookup,frequency", "--max-tokens", "32", "--no-peers"]
        )
    )
    assert cfg.quick and not cfg.sweep and not cfg.hf_peer
    assert cfg.drafters == ["prompt-lookup", "frequency"] and cfg.max_tokens == 32


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
    assert "humaneval" not in ratios["HF prompt lookup"]  # the peers ran fewer tasks


def test_the_report_says_not_in_this_run_where_results_lack_pairs(tmp_path):
    from engine.bench import report

    results = json.loads((COMMITTED / "results.json").read_text())
    report.render(results, tmp_path, plots=False)
    table = next(
        t
        for t in markdown_tables((tmp_path / "report.md").read_text())
        if t[0][0] == "task" and any("pairs" in c for row in t for c in row)
    )
    header = table[0]
    humaneval = next(row for row in table if row[0] == "humaneval")
    assert humaneval[header.index("HF prompt lookup")] == "not in this run"
    assert humaneval[header.index("Draftless (`suffix`)")].endswith("; 3 pairs)")


def test_committed_results_render_again_without_measuring(tmp_path, monkeypatch):
    from engine.__main__ import main
    from engine.bench import suite

    def no_measuring(*args, **kwargs):
        raise AssertionError("rendering must not measure")

    monkeypatch.setattr(suite.Suite, "run", no_measuring)
    out = tmp_path / "again"
    assert main(["bench", "--render", str(COMMITTED / "results.json"), "--out", str(out)]) == 0
    # the report is a function of results.json alone: the committed one's tables come back
    again, committed = (out / "report.md").read_text(), (COMMITTED / "report.md").read_text()
    assert len(markdown_tables(committed)) >= 6
    assert markdown_tables(again) == markdown_tables(committed)
    assert "Identity check: every Draftless run" in again
    results = json.loads((COMMITTED / "results.json").read_text())
    assert sorted(p.name for p in out.glob("*.png")) == sorted(results["plots"])


def test_a_peers_difference_is_reported_but_is_not_our_failure(tmp_path):
    from engine.bench import report

    results = json.loads((COMMITTED / "results.json").read_text())
    results["failures"], results["peer_differences"] = (
        [],
        ["llama.cpp ngram-cache x (round 1): output differs"],
    )
    report.render(results, tmp_path, plots=False)
    text = (tmp_path / "report.md").read_text()
    assert "**Identity check: every Draftless run's greedy output equals" in text
    assert "1 peer answers differ" in text and "- llama.cpp ngram-cache x (round 1)" in text
    results["failures"] = ["suffix code-edit: output differs from plain greedy at token 3"]
    report.render(results, tmp_path, plots=False)
    assert "Identity check: FAILED" in (tmp_path / "report.md").read_text()


def test_render_of_a_bad_results_file_is_a_message(tmp_path, capsys):
    from engine.__main__ import main

    bad = tmp_path / "results.json"
    bad.write_text('{"settings": {}}')
    assert main(["bench", "--render", str(bad), "--no-plots"]) == 2
    assert "is not a results.json" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()


def test_profile_pass_splits_a_pass_into_its_parts(tiny_loaded):
    import math

    from engine.bench.profile_pass import profile

    result = profile(tiny_loaded, prefix=8, n=3, repeats=1)
    for part in (
        "full_ms",
        "graph_ms",
        "matmul_ms",
        "head_ms",
        "attention_ms",
        "softmax_ms",
        "silu_ms",
    ):
        assert math.isfinite(result[part]) and result[part] > 0, part
    assert result["n"] == 3 and result["layers"] == len(tiny_loaded.model.layers)
