"""``kestrel run`` and ``kestrel chat`` on paper on live quotes: real processes against the fake
Binance on 127.0.0.1, which runs on the wall clock here (a separate process cannot share an
injected time). The workspace's settings.toml points binance at it, as a person would point
Kestrel at a proxy or a test server."""

from __future__ import annotations

import re
import subprocess
import sys
from decimal import Decimal

import pytest

from tests.helpers.fake_exchange import FakeExchangeServer
from tests.helpers.fake_exchange.__main__ import point_workspace
from tests.helpers.fake_exchange.tape import wall_ms
from tests.helpers.paths import REPO

SETUP = "watch BTC/USDT on 1m every 1m with a trend analyst and a trader"


@pytest.fixture(name="wall_exchange", scope="module")
def wall_exchange_fixture():
    now = wall_ms()
    with FakeExchangeServer(now) as server:
        server.now.run_with_wall_clock(now)
        yield server


def kestrel(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "app", *args], input=stdin,
                          capture_output=True, timeout=120, cwd=REPO, check=False)


def test_kestrel_run_trades_on_paper_on_binances_live_quotes(tmp_path, wall_exchange):
    point_workspace(tmp_path, wall_exchange)
    before = wall_exchange.count("binance", "klines")
    done = kestrel("run", "--workspace", str(tmp_path), "--venue", "live-paper", "--exchange",
                   "binance", "--for", "3s", "--setup", SETUP)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err
    assert "Traceback" not in err
    assert out.startswith("Paper on live quotes (binance) from ")
    assert "in real time" in out.splitlines()[0]
    assert "BTC/USDT 1m Trend Analyst: BTC/USDT 1m:" in out  # it analysed the live candles
    # the live candles of the moment decide whether the Trader bought within the 3 s
    number = r"([0-9]+(?:\.[0-9]+)?)"  # plain: the sentence's full stop is not part of it
    balances = re.search(rf"Balances: (?:BTC {number}, )?USDT {number}\.", out)
    assert balances is not None, out
    assert (balances[1] is None) == (Decimal(balances[2]) == 10000)
    assert wall_exchange.count("binance", "klines") > before


def test_kestrel_run_on_a_live_market_refuses_a_replay_speed(tmp_path, wall_exchange):
    point_workspace(tmp_path, wall_exchange)
    done = kestrel("run", "--workspace", str(tmp_path), "--venue", "live-paper", "--for", "2s",
                   "--speed", "600")
    assert done.returncode == 2
    assert done.stderr.decode().strip() == ("kestrel: Paper on live quotes (binance) runs in "
                                            "real time: --speed is for the replay")


def test_kestrel_chat_talks_to_the_orchestrator_on_live_quotes(tmp_path, wall_exchange):
    point_workspace(tmp_path, wall_exchange)
    done = kestrel("chat", "--workspace", str(tmp_path), "--venue", "live-paper", "--exchange",
                   "binance", stdin=f"/advance 1h\n{SETUP}\n/quit\n".encode())
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "on Paper on live quotes (binance)" in out
    assert "Paper on live quotes (binance) runs in real time: it cannot be advanced." in out
    assert "Set up BTC/USDT 1m Trend Analyst" in out


def test_replay_options_stay_the_default(tmp_path):
    done = kestrel("run", "--workspace", str(tmp_path), "--exchange", "binance", "--for", "1h")
    assert done.returncode == 2
    assert "--exchange and --symbol choose a live market: add --venue live-paper" in (
        done.stderr.decode())
