"""The import graph of engine/ and app/, every import counted (also those inside functions).

    python -m tests.import_graph          # modules, their imports, cycles, boundary checks

Used by tests/test_structure.py. Only imports between Draftless modules are edges.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "app")


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Draftless modules ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from pkg import sub`` imports the submodule when there is one
            candidates = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:  # import a.b.c where only a.b is ours
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    found = modules(root)
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return result


def bench_importers(edges: dict[str, set[str]]) -> list[str]:
    """Modules outside engine.bench (and the CLI) that import it."""
    return sorted(
        name
        for name, targets in edges.items()
        if not name.startswith("engine.bench")
        and name != "engine.__main__"
        and any(t == "engine.bench" or t.startswith("engine.bench.") for t in targets)
    )


def engine_importing_app(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        name
        for name, targets in edges.items()
        if name.startswith("engine") and any(t.startswith("app") for t in targets)
    )


# The engine's modules that hold the model, the decode loop or the thread that runs them;
# the app reaches them only where it builds this machine's engine (app.__main__) and
# otherwise through engine.api, so a client of a server never loads MLX.
ENGINE_INTERNALS = (
    "engine.runtime.service",
    "engine.runtime.session",
    "engine.loop.decode",
    "engine.runtime.engine_thread",
)
BUILDS_THE_ENGINE = ("app.__main__",)


def app_reaching_engine_internals(edges: dict[str, set[str]]) -> list[str]:
    """``app -> engine.internal`` edges outside ``BUILDS_THE_ENGINE``."""
    return sorted(
        f"{name} -> {target}"
        for name, targets in edges.items()
        if name.startswith("app") and name not in BUILDS_THE_ENGINE
        for target in targets
        if target in ENGINE_INTERNALS
    )


def main() -> int:
    edges = graph()
    width = max(len(name) for name in edges)
    for name in sorted(edges):
        print(f"{name:{width}s} -> {', '.join(sorted(edges[name])) or '-'}")
    found = cycles(edges)
    print()
    print("cycles:", "none" if not found else "; ".join(" <-> ".join(c) for c in found))
    print("importers of engine.bench besides the CLI:", ", ".join(bench_importers(edges)) or "none")
    print("engine modules importing app:", ", ".join(engine_importing_app(edges)) or "none")
    reaching = app_reaching_engine_internals(edges)
    print("app modules reaching the engine's internals:", ", ".join(reaching) or "none")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
