"""``kestrel mcp-serve`` as a real subprocess, used by the MCP SDK's own stdio client.

An external agent lists Kestrel's tools, reads the market, has an order refused by the Risk Guard
and one accepted, writes memory only into its own folder, and every call is in the workspace's
audit trail under its agent id.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from app.store.texts import install

KESTREL = str(Path(sys.executable).with_name("kestrel"))


def _text(result) -> str:
    return result.content[0].text


async def _session(workspace: Path, *extra: str):
    params = StdioServerParameters(
        command=KESTREL, args=["mcp-serve", "--workspace", str(workspace), *extra])
    return Client(stdio_client(params), cache=None)


def test_an_external_agent_trades_through_the_risk_guard_and_is_audited(tmp_path):
    async def scenario() -> None:
        async with await _session(tmp_path, "--agent", "ext-1") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("get_current_ticker_info", "calculate_technical_indicator",
                         "get_account_balance", "create_order", "write_note"):
                assert name in tools
            assert tools["create_order"].input_schema["required"] == ["symbol", "side"]
            assert "mcp_" not in " ".join(tools), "an MCP client's tools are never served"

            ticker = await client.call_tool("get_current_ticker_info",
                                            {"symbols": ["BTC/USD"]})
            assert "<status>success</status>" in _text(ticker) and not ticker.is_error

            too_big = await client.call_tool(
                "create_order", {"symbol": "BTC/USD", "side": "BUY", "quantity": "0.5"})
            assert "<status>rejected</status>" in _text(too_big) and too_big.is_error
            assert "<rule>max_position_weight</rule>" in _text(too_big)

            fine = await client.call_tool(
                "create_order", {"symbol": "BTC/USD", "side": "BUY", "quote_amount": 500})
            assert "<status>success</status>" in _text(fine), _text(fine)
            assert "order_created" in _text(fine)

            bad = await client.call_tool("create_order", {"symbol": "BTC/USD", "side": "HOLD"})
            assert "<error_code>INVALID_PARAMETER</error_code>" in _text(bad)

            note = await client.call_tool("write_note", {"key": "plan", "content": "buy dips"})
            assert "<status>success</status>" in _text(note)
            escape = await client.call_tool(
                "read_agent_memory_file", {"file_path": "../other-agent/notes/plan.md"})
            assert "<error_code>ACCESS_DENIED</error_code>" in _text(escape)

    asyncio.run(scenario())
    db = install(sqlite3.connect(tmp_path / "kestrel.db"))
    calls = db.execute("SELECT agent_id, tool_name, status FROM tool_calls ORDER BY id").fetchall()
    assert calls == [
        ("ext-1", "get_current_ticker_info", "success"),
        ("ext-1", "create_order", "rejected"),
        ("ext-1", "create_order", "success"),
        ("ext-1", "create_order", "error"),
        ("ext-1", "write_note", "success"),
        ("ext-1", "read_agent_memory_file", "error"),
    ]
    assert db.execute("SELECT agent_id FROM orders").fetchall() == [("ext-1",)]
    assert (tmp_path / "memory" / "ext-1" / "notes" / "plan.md").read_text().strip() == "buy dips"


def test_an_order_the_approval_policy_would_hold_is_refused_and_recorded(tmp_path):
    (tmp_path / "settings.toml").write_text('[approval]\nabove_quote = "100"\n')

    async def scenario() -> str:
        async with await _session(tmp_path) as client:
            result = await client.call_tool(
                "create_order", {"symbol": "BTC/USD", "side": "BUY", "quote_amount": 500})
            return _text(result)

    text = asyncio.run(scenario())
    assert "<rule>human_approval_required</rule>" in text
    assert "approval.above_quote" in text
    db = install(sqlite3.connect(tmp_path / "kestrel.db"))
    assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 0
    assert db.execute("SELECT agent_id, status FROM tool_calls").fetchall() == [
        ("mcp-client", "rejected")]


def test_orders_are_refused_while_the_workspaces_kill_switch_is_tripped(tmp_path):
    from app.domain.kill_switch import TripCause
    from app.store.kill_switch_log import KillSwitchLog

    (tmp_path / "settings.toml").write_text('[approval]\nabove_quote = "100"\n')

    async def place(client, side: str = "BUY", amount: int = 50) -> str:
        result = await client.call_tool(
            "create_order", {"symbol": "BTC/USD", "side": side, "quote_amount": amount})
        return _text(result)

    async def before() -> str:
        async with await _session(tmp_path, "--agent", "ext-1") as client:
            placed = await place(client)
            assert "<status>success</status>" in placed, placed
            return placed.split('order_id="', 1)[1].split('"', 1)[0]

    order_id = asyncio.run(before())
    log = KillSwitchLog(tmp_path / "kestrel.db")  # as the window trips it
    log.trip(cause=TripCause.MANUAL, cause_key="", reason="the external agent misbehaves",
             by="the person in the Kestrel window", tripped_ms=1_800_000_000_000,
             market_ms=1_800_000_000_000)
    log.close()

    async def after() -> tuple[str, str, str]:
        async with await _session(tmp_path, "--agent", "ext-1") as client:
            small = await place(client)
            held = await place(client, amount=500)  # the approval policy would hold it too
            cancel = await client.call_tool(
                "cancel_order", {"symbol": "BTC/USD", "order_id": order_id})
            return small, held, _text(cancel)

    small, held, cancel = asyncio.run(after())
    for refused in (small, held):
        assert "<status>rejected</status>" in refused and "<rule>kill_switch</rule>" in refused
        assert "the external agent misbehaves" in refused
        assert "the person in the Kestrel window" in refused
    assert "<status>success</status>" in cancel and "CANCELLED" in cancel
