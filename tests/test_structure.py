"""The house plan: no import cycles (imports inside functions count), measurement only
reachable from the CLI, no logic repeated in the engine, the engine never reaching into the
app. See tests/import_graph.py."""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .import_graph import (
    ROOT,
    app_reaching_engine_internals,
    bench_importers,
    cycles,
    engine_importing_app,
    graph,
)


def test_no_import_cycles_anywhere():
    assert cycles(graph()) == []


LONGEST_FUNCTION = 120  # lines: issue 60's bound, so each function reads on one screen or two


def test_no_function_in_the_engine_or_the_app_is_longer_than_the_bound():
    long = []
    for package in ("engine", "app"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > LONGEST_FUNCTION:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {lines}")
    assert long == []


def test_only_the_cli_imports_the_measurement_package():
    edges = graph()
    assert "engine.bench.cli" in edges["engine.__main__"]
    assert bench_importers(edges) == []


def test_the_engine_never_imports_the_app():
    assert engine_importing_app(graph()) == []


def test_the_app_reaches_the_engine_through_its_api():
    """Only app.__main__ builds this machine's engine; the rest of the app speaks to
    ``engine.api``'s protocol (a server's engine or this machine's)."""
    assert app_reaching_engine_internals(graph()) == []


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


# The pairs `duplicates` finds in engine/ today, none boilerplate: the drafter protocol's
# attach_model and use_model signatures (base.py: the same keyword parameters, passed on),
# and one loop's shape in ngram_simple.py ~ suffix.py. A new pair fails the test; one fixed
# lowers this.
ENGINE_DUPLICATES = 2
DUPLICATE_ROW = re.compile(r"^D\d+ ")


def engine_duplicates(root: Path = ROOT) -> list[str]:
    """The rows `duplicates` lists for engine/ that are not boilerplate."""
    command = ["duplicates", "--repo", str(root / "engine"), "--most", "200", "--seconds", "60"]
    output = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    incomplete = [line for line in output.splitlines() if line.startswith("incomplete:")]
    assert not incomplete, incomplete
    rows = [line for line in output.splitlines() if DUPLICATE_ROW.match(line)]
    return [row for row in rows if "boilerplate" not in row]


@pytest.mark.skipif(shutil.which("duplicates") is None, reason="`duplicates` is not on PATH")
def test_the_engine_repeats_no_logic():
    """The rule the benchmark's old line cap stood for: a new tool reuses what is there."""
    rows = engine_duplicates()
    assert len(rows) <= ENGINE_DUPLICATES, "repeated logic in engine/:\n" + "\n".join(rows)


@pytest.mark.skipif(shutil.which("duplicates") is None, reason="`duplicates` is not on PATH")
def test_the_duplicates_check_sees_a_repeat(tmp_path):
    body = "".join(f"    total = total * {n} + value\n" for n in range(8))
    (tmp_path / "engine").mkdir()
    for name in ("a", "b"):
        text = f"def {name}(value):\n    total = 0\n{body}    return total\n"
        (tmp_path / "engine" / f"{name}.py").write_text(text)
    assert len(engine_duplicates(tmp_path)) == 1


@pytest.mark.parametrize(
    "modules",
    [
        "engine.policy.adaptive",
        "engine.drafters",
        "engine.settings",
        "engine.api",
        # a client of a server loads no MLX (issue 60): the app's engine-facing modules
        "app.engines.remote_engine, app.presenters.controller",
        "app.engines.recorded_replay",
    ],
)
def test_planning_drafting_and_the_apps_side_load_no_mlx(modules):
    """The policy, the drafters, the request values and the engine's API are plain Python:
    MLX is for the passes alone (the cost curve's timing imports it inside its function),
    and the app loads it only when it builds this machine's engine."""
    check = f"import sys, {modules}; print('mlx.core' in sys.modules)"
    ran = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert ran.stdout.strip() == "False"


# The rooms (issue 60): engine/ and app/ are a few packages a newcomer can name, each on a
# floor; a module imports only modules on its own floor or below (imports inside functions
# count). A new module must be given a room, or a place here, before it lands.
FLOORS = {
    "engine": [
        # the ground floor: errors, paths, files read as untrusted input, the token gate,
        # events and statistics, the BLAS loader
        (
            "engine.errors",
            "engine.paths",
            "engine.untrusted",
            "engine.tokens",
            "engine.events",
            "engine.stats",
            "engine._blas",
        ),
        ("engine.drafters", "engine.formats"),
        ("engine.settings", "engine.api"),
        ("engine.policy", "engine.models"),
        ("engine.loop",),
        ("engine.runtime", "engine.command_line"),
        ("engine.server", "engine.bench"),
        ("engine", "engine.__main__"),
    ],
    "app": [
        ("app.storage", "app.engines"),
        ("app.views", "app.presenters"),
        ("app", "app.__main__", "app.single_instance"),
    ],
}


def floor_of(name: str) -> tuple[str, int] | None:
    """(the floor's package, its level) of a module: the longest entry naming it or a
    package above it (a top-level package names only itself)."""
    best = None
    for package, floors in FLOORS.items():
        for level, rooms in enumerate(floors):
            for room in rooms:
                holds = name == room or (room != package and name.startswith(room + "."))
                if holds and (best is None or len(room) > len(best[0])):
                    best = (room, level)
    return None if best is None else (best[1], best[0])


def test_every_module_has_a_room_on_a_floor():
    assert [name for name in graph() if floor_of(name) is None] == []


def test_a_module_imports_only_its_floor_or_below():
    breaches = []
    for name, targets in graph().items():
        own = floor_of(name)
        for target in targets:
            there = floor_of(target)
            same_package = target.split(".")[0] == name.split(".")[0]
            if own and there and same_package and there[0] > own[0]:
                breaches.append(f"{name} -> {target}")
    assert sorted(breaches) == []


@pytest.mark.parametrize(
    "room, library",
    [("engine.policy", "mlx.core"), ("app.engines", "mlx.core"), ("app.storage", "PySide6")],
)
def test_rooms_that_stay_plain_python(room, library):
    """Planning loads no MLX, the app's other engines none either, storage no Qt: each room
    imported whole."""
    names = sorted(name for name in graph() if name == room or name.startswith(room + "."))
    check = f"import sys, {', '.join(names)}; print({library!r} in sys.modules)"
    ran = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert ran.stdout.strip() == "False"
