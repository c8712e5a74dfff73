#!/usr/bin/env bash
# Build the one-folder bundle into packaging/build/dist/kestrel, then check it as a new user would
# (packaging/check.sh: the desk, eval, prompt, live paper, MCP and Telegram, on the built binary).
#
#   bash packaging/build.sh [--python PY] [--no-check]
#
# --python PY: the Python environment to build from and check with (default: .venv, set up first
# with scripts/bootstrap); PyInstaller is installed into it when it has none.
# --no-check: build only.
# Everything it writes stays in packaging/build/ (PyInstaller's cache included).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=""
CHECK=1
while [ $# -gt 0 ]; do
  case "$1" in
    --python) [ $# -ge 2 ] || { echo "build: --python needs the interpreter" >&2; exit 2; }
              PY=$2; shift 2 ;;
    --no-check) CHECK=0; shift ;;
    -h|--help) sed -n 2,10p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$PY" ]; then
  bash scripts/bootstrap
  PY=.venv/bin/python
fi
if [ ! -x "$PY" ]; then
  echo "build: $PY is not a Python interpreter" >&2
  exit 2
fi
if ! "$PY" -c 'import PyInstaller' 2>/dev/null; then
  echo "build: installing PyInstaller into $("$PY" -c 'import sys; print(sys.prefix)')"
  PIP_NO_CACHE_DIR=1 "$PY" -m pip install --quiet "pyinstaller>=6.6"
fi

OUT=packaging/build
export PYINSTALLER_CONFIG_DIR="$PWD/$OUT/pyinstaller-cache"
started=$(date +%s)
"$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --workpath "$OUT/work" --distpath "$OUT/dist" packaging/kestrel.spec
BIN=$OUT/dist/kestrel/kestrel
echo "build: $BIN built in $(( $(date +%s) - started )) s; the bundle is $(du -sh "$OUT/dist/kestrel" | cut -f1)"
if [ "$CHECK" = 1 ]; then
  bash packaging/check.sh --python "$PY" "$BIN"
fi
