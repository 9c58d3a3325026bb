"""Smoke-test a frozen Draftless build: start it as a user would, offline, with a fresh home.

    python packaging/smoke_test.py [--app PATH] [--prompt TEXT] [--out DIR] [--timeout S] [--online]

It runs ``<app> --screenshot OUT/screenshot.png --prompt TEXT`` offscreen with HOME pointing
at an empty folder (so the embedded model is converted from the bundled GGUF, as on a
first launch) and, on Linux, without any network (``unshare --net``), and checks that
  - the app exits 0 within the timeout,
  - the PNG is real: PNG signature, sane size, and not a blank image,
  - the app wrote nothing into its own bundle nor into its working folder, and wrote into
    the fresh home only under the platform's user folders (platformdirs' cache/data/config/
    state locations; on macOS ~/Library/{Caches,Application Support,Preferences,Logs}).
Exit status 0 when all hold. Used by packaging/build.sh and tests/test_packaging.py (marker frozen).

While app/ has no --screenshot yet (its placeholder CLI answers a prompt on stdout), the
same launch is made with the prompt as argument and the answer is checked instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DEFAULT_PROMPT = "Name three colours."

# Where a user-level app may write, relative to HOME (platformdirs' and Qt's user folders).
ALLOWED_UNDER_HOME = {
    "linux": (".cache", ".config", ".local/share", ".local/state"),
    "darwin": (
        "Library/Caches",
        "Library/Application Support",
        "Library/Preferences",
        "Library/Logs",
        "Library/Saved Application State",
        "Library/HTTPStorages",
    ),
}


def default_app_path() -> Path:
    if sys.platform == "darwin":
        return ROOT / "dist" / "Draftless.app" / "Contents" / "MacOS" / "Draftless"
    return ROOT / "dist" / "Draftless" / "Draftless"


def bundle_root(app: Path) -> Path:
    """The folder the build owns: Draftless.app on macOS, dist/Draftless on Linux."""
    for parent in app.parents:
        if parent.suffix == ".app":
            return parent
    return app.parent


def app_supports_screenshot() -> bool:
    """Whether the app in this checkout has the GUI's --screenshot option yet."""
    main = ROOT / "app" / "__main__.py"
    sources = [main] + sorted((ROOT / "app").glob("*.py"))
    return any(
        "--screenshot" in path.read_text(encoding="utf-8") for path in sources if path.exists()
    )


def offline_prefix() -> list[str]:
    """A command prefix that runs without any network (Linux network namespace), or []."""
    if not sys.platform.startswith("linux") or not shutil.which("unshare"):
        return []
    for prefix in (["unshare", "--net"], ["unshare", "--map-root-user", "--net"]):
        try:
            subprocess.run(prefix + ["true"], check=True, capture_output=True, timeout=20)
            return prefix
        except (OSError, subprocess.SubprocessError):
            continue
    return []


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    result = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            stat = path.stat()
            result[str(path.relative_to(folder))] = (stat.st_size, stat.st_mtime_ns)
    return result


def png_info(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    if not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG file")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def distinct_colours(path: Path, grid: int = 48) -> int:
    """Colours on a grid of sample points: a blank or single-colour image has 1."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication, QImage

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841
    image = QImage(str(path))
    if image.isNull():
        raise AssertionError(f"Qt cannot decode {path}")
    colours = {
        image.pixel(x * (image.width() - 1) // (grid - 1), y * (image.height() - 1) // (grid - 1))
        for x in range(grid)
        for y in range(grid)
    }
    return len(colours)


def check_home_writes(home: Path) -> list[str]:
    """Files the app created in the fresh home; raise if any lie outside the user folders."""
    allowed = ALLOWED_UNDER_HOME.get(sys.platform, ALLOWED_UNDER_HOME["linux"])
    written, stray = [], []
    for path in sorted(home.rglob("*")):
        if path.is_dir():
            continue
        rel = path.relative_to(home).as_posix()
        written.append(rel)
        if not any(rel == prefix or rel.startswith(prefix + "/") for prefix in allowed):
            stray.append(rel)
    if stray:
        raise AssertionError(f"the app wrote outside the user folders: {stray[:10]}")
    return written


def run_smoke(
    app: Path | None = None,
    prompt: str = DEFAULT_PROMPT,
    out: Path | None = None,
    timeout: float = 600,
    screenshot: bool | None = None,
    offline: bool = True,
) -> dict:
    """Launch the frozen app once and check it; return a report (raises AssertionError on failure)."""
    app = Path(app or default_app_path()).resolve()
    if not app.exists():
        raise AssertionError(f"no frozen app at {app}; run bash packaging/build.sh first")
    out = Path(out or ROOT / "build" / "smoke").resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    screenshot = app_supports_screenshot() if screenshot is None else screenshot
    home, workdir = out / "home", out / "cwd"
    home.mkdir()
    workdir.mkdir()
    png = out / "screenshot.png"

    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DRAFTLESS_", "XDG_", "HF_", "PYTHON", "LD_PRELOAD", "VIRTUAL_ENV"))
    }
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen", TMPDIR=str(out / "tmp"))
    (out / "tmp").mkdir()
    if screenshot:
        command = [str(app), "--screenshot", str(png), "--prompt", prompt]
    else:
        command = [str(app), prompt]
    prefix = offline_prefix() if offline else []

    before = snapshot(bundle_root(app))
    started = time.monotonic()
    with open(out / "app.log", "wb") as log:
        try:
            proc = subprocess.run(
                prefix + command,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
            returncode = proc.returncode
        except subprocess.TimeoutExpired:
            returncode = None
    seconds = time.monotonic() - started
    log_text = (out / "app.log").read_text(encoding="utf-8", errors="replace")
    report = {
        "app": str(app),
        "command": command[1:],
        "mode": "screenshot" if screenshot else "placeholder-cli",
        "seconds": round(seconds, 1),
        "returncode": returncode,
        "log": str(out / "app.log"),
        "network": "none (" + " ".join(prefix) + ")" if prefix else "host",
    }

    def fail(message: str):
        tail = "\n".join(log_text.splitlines()[-30:])
        raise AssertionError(f"{message}\n--- last lines of {out / 'app.log'} ---\n{tail}")

    if returncode is None:
        fail(f"the app did not exit within {timeout:.0f} s")
    if returncode != 0:
        fail(f"the app exited with status {returncode}")
    if screenshot:
        if not png.exists():
            fail(f"the app exited 0 but wrote no {png}")
        width, height = png_info(png)
        if not (320 <= width <= 8192 and 240 <= height <= 8192):
            fail(f"screenshot has an odd size {width}x{height}")
        if png.stat().st_size < 4096:
            fail(f"screenshot is suspiciously small ({png.stat().st_size} bytes)")
        colours = distinct_colours(png)
        if colours < 3:
            fail(f"screenshot looks blank ({colours} distinct colours)")
        report.update(
            screenshot=str(png),
            width=width,
            height=height,
            bytes=png.stat().st_size,
            distinct_colours=colours,
        )
    else:
        answer = log_text.strip()
        if "tokens" not in answer:
            fail("the placeholder CLI printed no answer statistics")
        report["answer_tail"] = answer.splitlines()[-1][:200] if answer else ""

    changed = sorted(set(snapshot(bundle_root(app)).items()) ^ set(before.items()))
    if changed:
        fail(f"the app modified its own bundle: {sorted({name for name, _ in changed})[:10]}")
    if any(workdir.iterdir()):
        fail(f"the app wrote into its working folder: {sorted(p.name for p in workdir.iterdir())}")
    report["home_writes"] = check_home_writes(home)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--app", type=Path, help="frozen executable (default: this platform's dist/ build)"
    )
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument(
        "--out", type=Path, help="where the screenshot, log and fresh home go (default build/smoke)"
    )
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--mode", choices=("auto", "screenshot", "cli"), default="auto")
    parser.add_argument(
        "--online",
        action="store_true",
        help="keep the network (default on Linux: none, via unshare --net)",
    )
    args = parser.parse_args(argv)
    screenshot = {"auto": None, "screenshot": True, "cli": False}[args.mode]
    try:
        report = run_smoke(
            args.app, args.prompt, args.out, args.timeout, screenshot, not args.online
        )
    except AssertionError as error:
        print(f"SMOKE TEST FAILED: {error}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    print(f"SMOKE TEST PASSED in {report['seconds']} s ({report['mode']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
