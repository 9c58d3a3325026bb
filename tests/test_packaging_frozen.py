"""Build the frozen app (if needed) and launch it once: the packaging smoke test.

Slow (a build takes minutes), so it is behind the ``frozen`` marker, which the default run
excludes:  .venv/bin/python -m pytest -m frozen tests/test_packaging_frozen.py
`bash packaging/build.sh` runs the same check (packaging/smoke_test.py) after building.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.frozen


def _smoke_module():
    spec = importlib.util.spec_from_file_location("draftless_packaging_smoke_test",
                                                  ROOT / "packaging" / "smoke_test.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stale(app: Path) -> bool:
    """No build yet, or sources newer than it."""
    if not app.exists():
        return True
    built = app.stat().st_mtime
    sources = [p for folder in ("app", "engine", "resources", "packaging")
               for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return any(p.stat().st_mtime > built for p in sources)


@pytest.mark.skipif(sys.platform not in ("linux", "darwin"), reason="the recipe targets macOS and Linux")
def test_frozen_app_starts_answers_and_saves_a_screenshot(tmp_path):
    smoke = _smoke_module()
    app = smoke.default_app_path()
    if _stale(app):
        subprocess.run(["bash", str(ROOT / "packaging" / "build.sh"), "--no-smoke"], cwd=ROOT, check=True)
    report = smoke.run_smoke(app, out=tmp_path / "smoke", timeout=600)
    assert report["returncode"] == 0
    if report["mode"] == "screenshot":
        assert report["width"] >= 320 and report["height"] >= 240
        assert report["distinct_colours"] >= 3
