"""The trading tools with the real Risk Guard, recording its decisions in the ledger."""

from __future__ import annotations

import asyncio

from app.config.risk import RiskConfig
from app.risk.config import build_guard
from app.runtime.recorders import SqliteRiskRecorder, SqliteToolCallRecorder
from app.tools.account_tools import AccountTools
from app.tools.executor import ToolExecutor
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext
from app.tools.trade_tools import TradeTools
from tests.helpers.orders import order_entry
from tests.unit.exchange.support import make_rig


def test_weight_limit_rejects_with_reason_and_every_decision_and_call_is_recorded():
    rig = make_rig(visible=1)
    guard = build_guard(RiskConfig(), SqliteRiskRecorder(rig.ledger))
    registry = ToolRegistry(AccountTools(rig.broker).specs()
                            + TradeTools(order_entry(rig.broker, guard)).specs())
    executor = ToolExecutor(registry, SqliteToolCallRecorder(rig.ledger), rig.clock)
    ctx = AgentContext(agent_id="a1")

    def call(xml: str):
        return asyncio.run(executor.execute_text(ctx, xml))

    # 0.5 x 7200.85 = 3600 of 10000 equity = 36% > the default 20% weight limit
    rejected = call("<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                    "<quantity>0.5</quantity></create_order>")
    assert rejected.status == "rejected"
    assert rejected.rule == "max_position_weight"
    accepted = call("<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                    "<quantity>0.2</quantity></create_order>")
    assert accepted.status == "success"
    rig.step()
    closed = call("<close_position><symbol>BTC/USDT</symbol></close_position>")
    assert closed.status == "success"

    decisions = rig.ledger.risk_decisions()
    assert [(d["accepted"], d["rule"]) for d in decisions] == [
        (0, "max_position_weight"), (1, ""), (1, ""),
    ]
    assert len(rig.ledger.load().orders) == 2
    calls = rig.ledger.tool_calls()
    assert [c["status"] for c in calls] == ["rejected", "success", "success"]
    assert calls[0]["params"]["quantity"] == "0.5"
