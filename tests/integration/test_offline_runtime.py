"""The offline runtime a person gets: workspace settings reach the Risk Guard and broker."""

import asyncio
from decimal import Decimal

from lxml import etree

from app.domain.clock import parse_time
from app.runtime import build_offline_runtime
from app.tools.spec import AgentContext
from app.workspace import Workspace

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
    runtime = build_offline_runtime(workspace, at_ms=parse_time("2019-10-10T00:00:00Z"))
    try:
        assert runtime.broker.initial_cash == Decimal(5000)
        result = asyncio.run(runtime.executor.execute_text(AgentContext("trader-1"), BUY_1000))
    finally:
        runtime.close()
    assert result.status == "rejected"
    assert result.rule == "max_position_weight"
    root = etree.fromstring(result.xml)
    assert "> limit 5" in root.findtext("reason")


def test_every_tool_call_is_kept_in_the_workspace_ledger(tmp_path):
    workspace = Workspace.at(tmp_path)
    runtime = build_offline_runtime(workspace, at_ms=parse_time("2019-10-10T00:00:00Z"))
    try:
        ctx = AgentContext("analyst-2")
        asyncio.run(runtime.executor.execute_text(ctx, "<get_account_balance/>"))
        asyncio.run(
            runtime.executor.execute_text(
                ctx, "<get_order_book><symbol>X</symbol></get_order_book>"
            )
        )
    finally:
        runtime.close()
    runtime = build_offline_runtime(workspace, at_ms=parse_time("2019-10-10T00:00:00Z"))
    try:
        calls = runtime.ledger.tool_calls()
    finally:
        runtime.close()
    assert [(c["tool_name"], c["status"]) for c in calls][-2:] == [
        ("get_account_balance", "success"),
        ("get_order_book", "error"),
    ]
