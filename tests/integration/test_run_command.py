"""``kestrel run --setup`` as a person runs it: a new workspace starts where the watched symbol's
data exists, in its currency, so the agents analyse real candles and the Trader's orders can fill;
a used workspace that cannot trade the setup says why and runs nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO

SETUP = "watch BTC/USDT on 1h every 1h with a trend analyst and a trader"


def kestrel(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own command line
        [sys.executable, "-m", "app", *map(str, args)], input=stdin, capture_output=True,
        text=True, timeout=300, cwd=REPO, check=False,
    )


def test_a_new_workspace_watching_btc_usdt_analyses_real_candles_and_its_orders_fill(
    tmp_path: Path,
) -> None:
    done = kestrel("run", "--workspace", tmp_path / "ws", "--setup", SETUP, "--for", "8d",
                   "--speed", "1000000")
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "Offline replay from 2019-10-02T19:00:00Z" in out  # 60 hours into BTC/USDT's data
    assert "0 bars visible" not in out and "no analysis" not in out
    assert len(re.findall(r"Trend Analyst: BTC/USDT 1h: (?:HOLD|BUY|SELL)", out)) >= 8 * 24
    assert "BTC/USDT 1h: BUY" in out and "fill(s)" in out, out[-3000:]
    fills = int(re.search(r"; (\d+) fills in total", out).group(1))  # type: ignore[union-attr]
    assert fills >= 1
    assert re.search(r"Balances: .*USDT \d", out), out[-500:]


def test_a_used_usd_workspace_refuses_a_btc_usdt_setup_and_says_why(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    first = kestrel("chat", "--workspace", workspace, stdin="/quit\n")
    assert first.returncode == 0, first.stderr
    assert "Try: watch BTC/USD on 1h" in first.stdout  # what this USD account can trade
    done = kestrel("run", "--workspace", workspace, "--setup", SETUP, "--for", "1h")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kestrel: this workspace's paper account holds USD, so BTC/USDT (quoted in USDT) cannot "
        "be traded in it; watch a USD pair here, or use a new --workspace for it"
    ]
    assert "Offline replay" not in done.stdout
