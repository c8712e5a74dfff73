"""A workspace's world as a person gets it: its settings reach the Risk Guard and the broker, its
tool calls reach its audit trail."""

import asyncio
from decimal import Decimal

from lxml import etree

from app.domain.clock import parse_time
from app.tools.spec import AgentContext
from app.workspace import Workspace
from tests.helpers.agents import tool_world

BUY_1000 = (
    "<create_order><symbol>BTC/USD</symbol><side>BUY</side><quote_amount>1000</quote_amount>"
    "</create_order>"
)


def test_risk_limits_from_settings_toml_reject_an_oversized_order(tmp_path):
    workspace = Workspace.at(tmp_path)
    workspace.ensure()
    workspace.settings_path.write_text(
        "[paper]\ninitial_cash = 5000\n\n[risk.max_position_weight]\nlimit_pct = 5\n",
        encoding="utf-8",
    )
    world = tool_world(workspace, at_ms=parse_time("2019-10-10T00:00:00Z"))
    try:
        assert world.venue.broker.initial_cash == Decimal(5000)
        result = asyncio.run(world.executor.execute_text(AgentContext("trader-1"), BUY_1000))
    finally:
        world.close()
    assert result.status == "rejected"
    assert result.rule == "max_position_weight"
    root = etree.fromstring(result.xml)
    assert "> limit 5" in root.findtext("reason")


def test_every_tool_call_is_kept_in_the_workspace_ledger(tmp_path):
    workspace = Workspace.at(tmp_path)
    world = tool_world(workspace, at_ms=parse_time("2019-10-10T00:00:00Z"))
    try:
        ctx = AgentContext("analyst-2")
        asyncio.run(world.executor.execute_text(ctx, "<get_account_balance/>"))
        asyncio.run(
            world.executor.execute_text(
                ctx, "<get_order_book><symbol>X</symbol></get_order_book>"
            )
        )
    finally:
        world.close()
    world = tool_world(workspace, at_ms=parse_time("2019-10-10T00:00:00Z"))
    try:
        calls = world.ledger.tool_calls()
    finally:
        world.close()
    assert [(c["tool_name"], c["status"]) for c in calls][-2:] == [
        ("get_account_balance", "success"),
        ("get_order_book", "error"),
    ]


def test_every_tool_call_is_announced_on_the_bus_after_it_is_stored(tmp_path):
    from app.events import EventBus, ToolCallCompleted

    bus = EventBus()
    seen: list[ToolCallCompleted] = []
    world = tool_world(
        Workspace.at(tmp_path), at_ms=parse_time("2019-10-10T00:00:00Z"), bus=bus)
    bus.subscribe(ToolCallCompleted, seen.append)

    def stored() -> int:
        return world.ledger.connection.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0]

    bus.subscribe(ToolCallCompleted, lambda _event: counts.append(stored()))
    counts: list[int] = []
    try:
        ctx = AgentContext("trader-1")
        asyncio.run(world.executor.execute_text(ctx, BUY_1000))
        asyncio.run(world.executor.execute_text(ctx, "<get_order_book><symbol>NOPE</symbol>"
                                                       "</get_order_book>"))
    finally:
        world.close()
    assert [(e.agent_id, e.tool_name, e.status) for e in seen] == [
        ("trader-1", "create_order", "success"), ("trader-1", "get_order_book", "error")]
    assert seen[1].error_code == "NOT_FOUND" and seen[0].duration_ms >= 0
    assert counts == [1, 2], "announced only once stored"
