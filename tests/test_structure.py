"""The house plan: no import cycles (imports inside functions count), measurement only
reachable from the CLI, the engine never reaching into the app. See tests/import_graph.py."""

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
