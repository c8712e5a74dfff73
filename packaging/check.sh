#!/usr/bin/env bash
# Check a built bundle by running its executable (never this checkout's code) as a new user:
# the desk offscreen to the demo's first fill, eval (the rule engine, and the OpenAI and Anthropic
# SDKs against fake servers), prompt, a live-paper run against the fake exchange, mcp-serve
# answering an MCP client and Telegram answering on the fake Bot API.
# See packaging/check_bundle.py for each check.
#
#   bash packaging/check.sh [--python PY] [--only NAME]... [BINARY]
#
# PY: the checkout's environment that serves the fakes (default: .venv);
# BINARY: default packaging/build/dist/kestrel/kestrel. Exit code 0: every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
ARGS=()
BIN=packaging/build/dist/kestrel/kestrel
while [ $# -gt 0 ]; do
  case "$1" in
    --python) [ $# -ge 2 ] || { echo "check: --python needs the interpreter" >&2; exit 2; }
              PY=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || { echo "check: --only needs a check's name" >&2; exit 2; }
            ARGS+=(--only "$2"); shift 2 ;;
    -h|--help) sed -n 2,11p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) BIN=$1; shift ;;
  esac
done
started=$(date +%s)
status=0
"$PY" packaging/check_bundle.py "${ARGS[@]}" "$BIN" || status=$?
echo "check: took $(( $(date +%s) - started )) s"
exit "$status"
