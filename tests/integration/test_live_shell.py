"""The shell reaches the live account, honestly: ``kestrel tool``, ``chat`` and ``run`` on a
workspace that trades a real exchange account, against the fake Binance on 127.0.0.1.

The commands run in this process (``run_main``); the account's keys are in a keyring held in
memory, set as the process's keyring the way the OS keyring is. A workspace trades live once its
order journal has entries: the tests place them as the person would in the window (the live
world built as the app builds it), then use the shell.
"""

from __future__ import annotations

import asyncio
import io
import re
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import keyring
import pytest

from app.trading.live_account import PERSON
from app.ui.settings_io import save_settings
from tests.helpers.cli import run_main
from tests.helpers.fake_exchange import FakeExchangeServer
from tests.helpers.fake_exchange.live import (
    call,
    keyring_with_keys,
    live_settings,
    market_buy,
    run_live,
)
from tests.helpers.fake_exchange.tape import wall_ms
from tests.helpers.memory_keyring import MemoryKeyring
from tests.integration.ccxt_fixtures import START_MS
from tests.integration.live_paper import live_world as live_paper_world
from tests.integration.test_live_cli import place_on_exchange

LIVE = ("--venue", "live", "--exchange", "binance", "--confirm-live", "binance")
SETUP = "watch BTC/USDT on 1m every 1m with a trend analyst and a trader"
BALANCE = "<get_account_balance></get_account_balance>"


@pytest.fixture(name="server")
def server_fixture() -> Iterator[FakeExchangeServer]:
    with FakeExchangeServer(START_MS) as server:
        yield server


@pytest.fixture(name="keys", autouse=True)
def keys_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    """The fake account's keys in the process's keyring (and none in the environment)."""
    for name in ("KESTREL_BINANCE_API_KEY", "KESTREL_BINANCE_SECRET"):
        monkeypatch.delenv(name, raising=False)
    backend = keyring_with_keys().backend
    assert isinstance(backend, MemoryKeyring)
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def live_workspace(folder: Path, server: FakeExchangeServer, *, bought: bool = False) -> str:
    """A workspace that trades on the fake binance account: the person's limit buy rests there
    (placed as in the window), after a market buy of 0.01 BTC when ``bought``; returns the limit
    order's id."""
    save_settings(folder / "settings.toml", live_settings(server))
    placed: list[str] = []

    async def buy(world) -> None:  # noqa: ANN001 - the helper's World
        if bought:
            filled = await call(world, PERSON, market_buy())
            assert filled.ok, filled.xml
        price = (await world.venue.broker.last_price("BTC/USDT")) * Decimal("0.95")
        result = await call(world, PERSON, (
            "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT"
            f"</order_type><quantity>0.01000</quantity><price>{price:.2f}</price>"
            "</create_order>"))
        assert result.ok, result.xml
        found = re.search(r'order_id="([^"]+)"', result.xml)
        assert found is not None, result.xml
        placed.append(found[1])

    run_live(folder, server, buy)
    return placed[0]


def exchange_balances(server: FakeExchangeServer) -> str:
    """The fake account's balances as the summary writes them (free and locked together)."""
    with server.binance_account.lock:
        held = {a: sum(v, Decimal(0)) for a, v in server.binance_account.balances.items()}
    return ", ".join(f"{a} {v.normalize():f}" for a, v in sorted(held.items()) if v)


def cancel(order_id: str) -> str:
    return (f"<cancel_order><symbol>BTC/USDT</symbol><order_id>{order_id}</order_id>"
            "</cancel_order>")


def paper_ledger_opened(folder: Path) -> bool:
    conn = sqlite3.connect(folder / "kestrel.db")
    try:
        return conn.execute("SELECT COUNT(*) FROM meta WHERE key = 'initialized'").fetchone()[0] > 0
    finally:
        conn.close()


def test_the_kestrel_run_summary_on_a_live_venue_reads_the_exchange_account(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    live_workspace(tmp_path, server, bought=True)

    code = run_main(["run", "--workspace", str(tmp_path), *LIVE, "--for", "1s"])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "; 1 fills in total." in out  # the journal's fill, not the paper ledger's none
    assert f"Balances: LIVE {exchange_balances(server)}. Equity " in out, out
    assert re.search(r"Equity \d+(\.\d+)? USDT, 1 open order\. This run:", out), out
    assert not paper_ledger_opened(tmp_path)


def test_allow_live_grants_the_trader_a_setup_creates_in_a_new_workspace(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    save_settings(tmp_path / "settings.toml", live_settings(server))

    code = run_main(["run", "--workspace", str(tmp_path), *LIVE, "--setup", SETUP,
                     "--allow-live", "BTC/USDT Trader", "--for", "1s"])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "BTC/USDT Trader may trade live on binance" in out
    conn = sqlite3.connect(tmp_path / "kestrel.db")
    try:
        granted = conn.execute("SELECT agent_id FROM agents WHERE name = 'BTC/USDT Trader' "
                               "AND ('live_grant:' || lower(agent_id)) IN (SELECT key FROM "
                               "journal_meta WHERE venue = 'binance' AND value != '')")
        assert len(granted.fetchall()) == 1
    finally:
        conn.close()


def test_allow_live_naming_an_agent_the_setup_did_not_create_is_refused(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    save_settings(tmp_path / "settings.toml", live_settings(server))

    code = run_main(["run", "--workspace", str(tmp_path), *LIVE, "--setup", SETUP,
                     "--allow-live", "Nobody", "--for", "1s"])

    out, err = capsys.readouterr()
    assert code == 2
    assert "--allow-live Nobody: no agent is called so (agents: " in err
    assert "BTC/USDT Trader" in err and "Traceback" not in err


def test_a_tool_call_on_a_live_workspace_without_the_live_flags_is_refused_with_the_command(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    order_id = live_workspace(tmp_path, server)

    code = run_main(["tool", "--workspace", str(tmp_path), cancel(order_id)])

    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert out == ""
    assert "this workspace trades LIVE on your binance account" in err
    assert "its order journal holds 1 order on binance" in err
    assert (f"To act on your binance account: kestrel tool --workspace {tmp_path} "
            f"'{cancel(order_id)}' --venue live --exchange binance --confirm-live binance") in err
    assert "Traceback" not in err
    assert server.count("binance", "order.cancel") == 0
    assert not paper_ledger_opened(tmp_path)  # no paper account was made to act on


def test_mcp_serve_refuses_a_live_workspace_rather_than_serving_a_paper_ledger(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    live_workspace(tmp_path, server)

    code = run_main(["mcp-serve", "--workspace", str(tmp_path)])

    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "serves the offline replay" in err and "LIVE account on binance" in err
    assert "its order journal holds 1 order on binance" in err
    assert "Traceback" not in err
    assert not paper_ledger_opened(tmp_path)


def test_a_tool_call_with_the_live_flags_cancels_the_order_on_the_exchange(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    order_id = live_workspace(tmp_path, server)

    code = run_main(["tool", "--workspace", str(tmp_path), cancel(order_id), *LIVE])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert re.search(rf'<order_cancelled order_id="{order_id}" status="CANCELLED"', out), out
    assert "LIVE binance (real money): REAL orders with REAL money" in err
    assert server.count("binance", "order.cancel") == 1
    assert server.binance_account.open_orders({}) == []
    assert not paper_ledger_opened(tmp_path)



def test_a_live_tool_call_waits_for_the_persons_decision_on_unknown_exchange_orders(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    live_workspace(tmp_path, server)
    order_id = place_on_exchange(server)  # placed on the exchange's website

    code = run_main(["tool", "--workspace", str(tmp_path), market_buy(), *LIVE])

    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert f"exchange id {order_id}" in err and "--adopt-unknown" in err
    assert out == ""
    assert server.count("binance", "order.create") == 1  # the workspace's own limit buy only


def test_kestrel_chat_on_a_live_workspace_needs_the_live_flags_then_reads_the_live_account(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live_workspace(tmp_path, server, bought=True)

    monkeypatch.setattr("sys.stdin", io.StringIO("/quit\n"))
    refused = run_main(["chat", "--workspace", str(tmp_path)])
    out, err = capsys.readouterr()
    assert refused == 2, out + err
    assert "this workspace trades LIVE on your binance account" in err
    assert (f"kestrel chat --workspace {tmp_path} --venue live --exchange binance "
            "--confirm-live binance") in err

    monkeypatch.setattr("sys.stdin", io.StringIO("/agents\n/quit\n"))
    code = run_main(["chat", "--workspace", str(tmp_path), *LIVE])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "LIVE binance (real money): REAL orders with REAL money" in out
    assert "on LIVE binance (real money)" in out
    assert f"Balances: LIVE {exchange_balances(server)}. Equity " in out, out
    assert ", 1 open order." in out
    assert not paper_ledger_opened(tmp_path)


@pytest.fixture(name="wall_exchange")
def wall_exchange_fixture() -> Iterator[FakeExchangeServer]:
    now = wall_ms()
    with FakeExchangeServer(now) as server:
        server.now.run_with_wall_clock(now)
        yield server


def test_a_tool_call_on_a_workspace_paper_trading_live_quotes_names_the_venue_to_use(
    tmp_path: Path, wall_exchange: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    async def open_and_close() -> None:  # its paper account opens on binance's live quotes
        world = await live_paper_world(tmp_path, wall_exchange)
        await world.aclose()

    asyncio.run(open_and_close())
    save_settings(tmp_path / "settings.toml", live_settings(wall_exchange))  # [venue]: replay

    refused = run_main(["tool", "--workspace", str(tmp_path), BALANCE])
    out, err = capsys.readouterr()
    assert refused == 2, out + err
    assert "this workspace paper-trades on binance's live quotes" in err
    assert (f"To act on that paper account: kestrel tool --workspace {tmp_path} '{BALANCE}' "
            "--venue live-paper --exchange binance") in err

    code = run_main(["tool", "--workspace", str(tmp_path), BALANCE, "--venue", "live-paper",
                     "--exchange", "binance"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert 'cash="10000"' in out and 'mode="PAPER"' in out


def test_venue_replay_opens_the_paper_account_of_a_live_workspace_on_purpose(
    tmp_path: Path, server: FakeExchangeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    live_workspace(tmp_path, server)
    requests = len(server.requests)

    code = run_main(["tool", "--workspace", str(tmp_path), "--venue", "replay", BALANCE])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert 'mode="PAPER"' in out
    assert len(server.requests) == requests  # the exchange is not asked
