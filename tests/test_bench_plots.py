"""The report's plots: drawn offline from saved results (``python -m engine bench --render``),
a clear message where the results lack what a plot needs, and the committed report's plots."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from .test_bench import COMMITTED, markdown_tables

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TASKS = ["code-edit", "novel"]


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk comes first)."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


def figures(speedup: float, tokens_per_pass: float | None) -> dict:
    cell = {"speedup": speedup, "lo": speedup * 0.9, "hi": speedup * 1.1, "verdict": "gain"}
    cell |= {"tokens_per_pass": tokens_per_pass, "tok_s": 10.0, "acceptance_rate": 0.5}
    return {task: dict(cell, identical=True) for task in TASKS + ["all"]}


def small_results() -> dict:
    """A results.json of two tasks and three configs, with what the report reads."""
    machine = {"cpu": "test CPU", "cores": 2, "platform": "linux", "blas": "OpenBLAS"}
    model = {"name": "tiny", "model_type": "llama", "parameters": 1e6, "dtype": "float32"}
    settings = {"quick": True, "max_tokens": 8, "repeats": 1, "draft_count": 4, "adaptive": True}
    return {
        "format": 2,
        "command": "python -m engine bench --quick",
        "settings": settings,
        "environment": {
            "machine": machine,
            "model": dict(model, speculation="on"),
            "versions": {"mlx": "0"},
            "date_utc": "today",
        },
        "drafters": ["suffix"],
        "oracle_draft_count": 8,
        "runs": [],
        "failures": [],
        "skipped": [],
        "provenance": [],
        "workloads": [],
        "summary": {
            "tasks": TASKS,
            "configs": ["none", "suffix", "oracle", "mlx-lm"],
            "ranking": ["suffix"],
            "default_drafter": "suffix",
            "per": {
                "none": figures(1.0, 1.0),
                "suffix": figures(1.6, 2.2),
                "oracle": figures(5.0, 30.0),
                "mlx-lm": figures(0.95, None),
            },
        },
        "verify_cost": {
            "prefix_tokens": 16,
            "median_s": {"1": 0.01, "2": 0.012, "4": 0.02},
            "ratio": {"1": 1.0, "2": 1.2, "4": 2.0},
            "ratio_min": {"1": 1.0, "2": 1.1, "4": 1.9},
        },
    }


def small_devices() -> dict:
    """A devices.json (``python -m engine.bench.devices --json``) of two curves."""

    def row(peer: bool, x: float) -> dict:
        return {"peer": peer, "all": x, "copy-heavy": x, "categories": {t: x for t in TASKS}}

    strategies = {"default": row(False, 2.0), "vllm-ngram": row(True, 1.5)}
    strategies |= {"llama.cpp ngram-simple": row(True, 1.7), "oracle": row(False, 9.0)}
    return {"chats": 2, "answer_tokens": 40, "curves": {"fast": strategies, "slow": strategies}}


def write(folder: Path, results: dict, devices: dict | None = None) -> Path:
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(results))
    if devices is not None:
        (folder / "devices.json").write_text(json.dumps(devices))
    return folder / "results.json"


def test_render_draws_the_plots_from_saved_results(tmp_path, capsys):
    from engine.__main__ import main

    source = write(tmp_path / "run", small_results(), small_devices())
    out = tmp_path / "report"
    assert main(["bench", "--render", str(source), "--out", str(out)]) == 0
    pngs = ["devices.png", "speedup.png", "tokens_per_pass.png", "verify_cost.png"]
    assert sorted(p.name for p in out.glob("*.png")) == pngs
    assert all(png_size(out / name)[0] == 900 for name in pngs)
    report = (out / "report.md").read_text()
    assert all(f"]({name})" in report for name in pngs)
    assert "left out" not in capsys.readouterr().err  # devices.json was found


def test_without_a_devices_file_the_device_plot_is_left_out_and_said(tmp_path, capsys):
    from engine.__main__ import main

    source = write(tmp_path / "run", small_results())
    assert main(["bench", "--render", str(source)]) == 0
    assert sorted(p.name for p in source.parent.glob("*.png")) == [
        "speedup.png",
        "tokens_per_pass.png",
        "verify_cost.png",
    ]
    assert "the device table's plot is left out" in capsys.readouterr().err


def test_results_without_a_plot_section_are_a_message(tmp_path, capsys):
    from engine.__main__ import main

    results = small_results()
    del results["verify_cost"]
    source = write(tmp_path / "run", results)
    assert main(["bench", "--render", str(source)]) == 2
    error = capsys.readouterr().err
    assert "lacks the `verify_cost` section that the verify cost plot is drawn from" in error
    assert "Traceback" not in error
    assert not list(source.parent.glob("*.png")) and not (source.parent / "report.md").exists()


@pytest.mark.parametrize(
    "devices, expected",
    [
        ("{not json", "Cannot read the device table"),
        ({"curves": {"h100": {"default": {"all": 1.5}}}}, "with a devices.json by"),
    ],
)
def test_a_bad_devices_file_is_a_message(tmp_path, capsys, devices, expected):
    from engine.__main__ import main

    source = write(tmp_path / "run", small_results())
    text = devices if isinstance(devices, str) else json.dumps(devices)
    (source.parent / "devices.json").write_text(text)
    assert main(["bench", "--render", str(source)]) == 2
    error = capsys.readouterr().err
    assert expected in error and "devices.json" in error and "Traceback" not in error


def test_a_missing_results_file_is_a_message(tmp_path, capsys):
    from engine.__main__ import main

    assert main(["bench", "--render", str(tmp_path / "nowhere.json")]) == 2
    error = capsys.readouterr().err
    assert "Cannot read the benchmark results" in error and "Traceback" not in error


def test_the_committed_report_shows_its_plots():
    report = (COMMITTED / "report.md").read_text()
    linked = [line[line.index("](") + 2 : -1] for line in report.splitlines() if "![" in line]
    assert len(linked) >= 3
    for name in linked:
        width, height = png_size(COMMITTED / name)
        assert width == 900 and height <= 700


def test_the_committed_device_figures_are_the_device_table():
    """devices.json, which the device plot draws, holds devices.md's figures."""
    from engine.bench.devices import device_table
    from engine.policy.verify_cost import named_curves

    figures = json.loads((COMMITTED / "devices.json").read_text())
    curves = [named_curves()[name] for name in figures["curves"]]
    again = markdown_tables("\n".join(device_table(figures, curves)))
    assert again == markdown_tables((COMMITTED / "devices.md").read_text())
