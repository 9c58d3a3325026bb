"""The house plan: no import cycles (imports inside functions count), measurement only
reachable from the CLI and kept small, the engine never reaching into the app. See
tests/import_graph.py."""

from .import_graph import bench_importers, cycles, engine_importing_app, graph


def test_no_import_cycles_anywhere():
    assert cycles(graph()) == []


def test_only_the_cli_imports_the_measurement_package():
    edges = graph()
    assert "engine.bench.cli" in edges["engine.__main__"]
    assert bench_importers(edges) == []


def test_the_engine_never_imports_the_app():
    assert engine_importing_app(graph()) == []


def test_the_graph_sees_imports_inside_functions(tmp_path):
    package = tmp_path / "engine"
    package.mkdir()
    (tmp_path / "app").mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from . import b\n")
    (package / "b.py").write_text("from .a import f\n")
    edges = graph(tmp_path)
    assert edges["engine.a"] == {"engine.b"} and edges["engine.b"] == {"engine.a"}
    assert cycles(edges) == [["engine.a", "engine.b"]]


def test_the_measurement_package_stays_under_two_thousand_lines():
    """The benchmark once outgrew the engine it measures; a new tool replaces one, or earns
    its lines by cutting others."""
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "engine" / "bench"
    lines = sum(len(path.read_text().splitlines()) for path in package.glob("*.py"))
    assert lines < 2000, f"engine/bench has {lines} lines of Python"
