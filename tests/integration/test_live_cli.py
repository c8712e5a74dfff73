"""``kestrel run --venue live --exchange binance`` as a person runs it, against the fake Binance.

The workspace's settings point ccxt at the fake; the keys come from the environment variables
(read before any keyring), and each command runs in this process as ``main`` runs it. An open
order on the exchange that the journal does not know stops the run before any agent starts until
the person decides; with ``--adopt-unknown`` it is followed as the person's. Without the
confirmation naming the exchange nothing is opened.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from app.ccxt.credentials import key_names
from app.secrets import env_var_name
from app.ui.settings_io import save_settings
from tests.helpers.cli import Ran, run_cli
from tests.helpers.fake_exchange import FakeExchangeServer
from tests.helpers.fake_exchange.broker import DUMMY_KEYS
from tests.helpers.fake_exchange.live import live_settings
from tests.integration.ccxt_fixtures import START_MS


@pytest.fixture(name="server")
def server_fixture():
    with FakeExchangeServer(START_MS) as server:
        yield server


@pytest.fixture(autouse=True)
def _binance_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys where a headless machine gives them: the environment, read before any keyring."""
    names = key_names("binance")
    monkeypatch.setenv(env_var_name(names["api_key"]), DUMMY_KEYS.api_key)
    monkeypatch.setenv(env_var_name(names["secret"]), DUMMY_KEYS.secret)


def run(folder: Path, *args: str, stdin: str = "") -> Ran:
    return run_cli("run", "--workspace", folder, "--venue", "live", "--exchange", "binance",
                   "--symbol", "BTC/USDT", "--for", "1s", *args, stdin=stdin)


def place_on_exchange(server: FakeExchangeServer) -> int:
    price = Decimal(str(server.state.last("BTC/USDT"))) * Decimal("0.9")
    answer = server.binance_account.create({
        "symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT", "quantity": "0.01000",
        "price": f"{price:.2f}", "newClientOrderId": "web-1", "timeInForce": "GTC"})
    return int(answer["orderId"])


def journal_rows(folder: Path) -> list[tuple[str, str, int]]:
    conn = sqlite3.connect(folder / "kestrel.db")
    try:
        return conn.execute(
            "SELECT exchange_order_id, agent_id, adopted FROM order_journal").fetchall()
    finally:
        conn.close()


def test_kestrel_run_live_waits_for_the_persons_decision_on_unknown_orders_then_adopts(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    save_settings(tmp_path / "settings.toml", live_settings(server))
    order_id = place_on_exchange(server)

    undecided = run(tmp_path, "--confirm-live", "binance")
    assert undecided.returncode == 2, undecided.stderr
    assert "not in Kestrel's journal" in undecided.stderr
    assert f"exchange id {order_id}" in undecided.stderr
    assert "--adopt-unknown" in undecided.stderr
    assert "Traceback" not in undecided.stderr
    assert server.count("binance", "order.create") == 0

    adopted = run(tmp_path, "--confirm-live", "binance", "--adopt-unknown")
    assert adopted.returncode == 0, adopted.stderr
    assert "LIVE binance (real money): REAL orders with REAL money" in adopted.stdout
    assert "1 unknown exchange orders adopted" in adopted.stdout
    assert "Balances: LIVE" in adopted.stdout
    assert journal_rows(tmp_path) == [(str(order_id), "person", 1)]


def test_kestrel_run_live_without_the_confirmation_opens_nothing(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    save_settings(tmp_path / "settings.toml", live_settings(server))
    refused = run(tmp_path, "--confirm-live", "okx", stdin="yes\n")
    assert refused.returncode == 2
    assert "Live trading on binance was not confirmed" in refused.stderr
    assert "REAL money" in refused.stderr
    assert server.requests == []


def baseline(folder: Path, asset: str) -> str:
    conn = sqlite3.connect(folder / "kestrel.db")
    try:
        (value,) = conn.execute("SELECT value FROM journal_meta WHERE venue = 'binance' AND "
                                "key = ?", (f"baseline:{asset}",)).fetchone()
        return str(value)
    finally:
        conn.close()


def test_kestrel_run_live_prints_a_balance_mismatch_with_what_to_do_then_accepts_it(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    save_settings(tmp_path / "settings.toml", live_settings(server))
    first = run(tmp_path, "--confirm-live", "binance")  # the journal's baseline
    assert first.returncode == 0, first.stderr
    with server.binance_account.lock:  # 2500 USDT withdrawn on the exchange's website
        server.binance_account.balances["USDT"][0] -= Decimal("2500")
    told = run(tmp_path, "--confirm-live", "binance")
    assert told.returncode == 0, told.stderr
    assert "BALANCES DIFFER on binance" in told.stdout
    assert ("USDT: the journal explains 100000, the exchange holds 97500 (difference -2500)"
            in told.stdout)
    assert "--accept-exchange-balances" in told.stdout and "reset the kill switch" in told.stdout
    assert "KILL SWITCH TRIPPED" in told.stdout
    assert Decimal(baseline(tmp_path, "USDT")) == 100000  # not without their word

    accepted = run(tmp_path, "--confirm-live", "binance", "--accept-exchange-balances")
    assert accepted.returncode == 0, accepted.stderr
    assert "Accepted binance's balances" in accepted.stdout
    assert "KILL SWITCH TRIPPED" in accepted.stdout  # accepting is not resetting
    assert Decimal(baseline(tmp_path, "USDT")) == Decimal("97500")
    again = run(tmp_path, "--confirm-live", "binance")
    assert "BALANCES DIFFER" not in again.stdout, again.stdout
    assert "Traceback" not in again.stderr + accepted.stderr + told.stderr
