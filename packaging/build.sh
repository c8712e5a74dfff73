#!/usr/bin/env bash
# Build the one-folder bundle into packaging/build/dist/kestrel and smoke-test it offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap
.venv/bin/python -m pip install --quiet "pyinstaller>=6.6"
.venv/bin/pyinstaller --noconfirm --clean \
  --workpath packaging/build/work --distpath packaging/build/dist packaging/kestrel.spec
BIN=packaging/build/dist/kestrel/kestrel
"$BIN" --version
"$BIN" tool --workspace "$(mktemp -d)" \
  '<get_current_ticker_info><symbols><symbol>BTC/USD</symbol></symbols></get_current_ticker_info>'
echo "bundle: $BIN"
