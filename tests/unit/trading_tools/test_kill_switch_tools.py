"""The trading tools while the kill switch is tripped: every order-creating call that could add
exposure is refused with the trip's when, why and who; cancelling, closing, reduce-only exits and
a sell of what is held still work; after a reset entries pass again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.config.risk import RiskConfig
from app.domain.kill_switch import TripCause
from app.risk.config import build_guard
from app.runtime.recorders import SqliteRiskRecorder
from app.store.kill_switch_log import KillSwitchLog
from app.tools.account_tools import AccountTools
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext
from app.tools.trade_tools import TradeTools
from tests.helpers.orders import order_entry
from tests.unit.exchange.support import make_rig

WALL = 1_800_000_000_000


def test_entries_are_refused_while_tripped_and_exits_are_not(tmp_path: Path) -> None:
    db = tmp_path / "kestrel.db"
    rig = make_rig(db=db, visible=1)
    log = KillSwitchLog(db)
    guard = build_guard(RiskConfig(), SqliteRiskRecorder(rig.ledger))
    registry = ToolRegistry(AccountTools(rig.broker).specs() + TradeTools(
        order_entry(rig.broker, guard, halted=log.active)).specs())
    executor = ToolExecutor(registry, MemoryRecorder(), rig.clock)

    def call(xml: str):
        return asyncio.run(executor.execute_text(AgentContext(agent_id="trader"), xml))

    assert call("<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                "<quantity>0.2</quantity></create_order>").status == "success"
    rig.step()
    pending = call("<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT"
                   "</order_type><price>6900</price><quantity>0.01</quantity></create_order>")
    assert pending.status == "success"
    log.trip(cause=TripCause.MANUAL, cause_key="", reason="agents misbehave",
             by="the person in the Kestrel window", tripped_ms=WALL,
             market_ms=rig.clock.now_ms())

    entries = {
        "market buy": "<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                      "<quantity>0.01</quantity></create_order>",
        "quote amount": "<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
                        "<quote_amount>50</quote_amount></create_order>",
        "limit buy": "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT"
                     "</order_type><price>6900</price><quantity>0.01</quantity></create_order>",
        "stop buy": "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>STOP"
                    "</order_type><stop_price>7100</stop_price><quantity>0.01</quantity>"
                    "</create_order>",
    }
    for name, xml in entries.items():
        refused = call(xml)
        assert refused.status == "rejected", name
        assert refused.rule == "kill_switch", name
        assert "agents misbehave" in refused.xml and "the person in the Kestrel window" in \
            refused.xml and "2027-01-15 08:00:00 UTC" in refused.xml, name

    order_id = dict(pending.data[0].attrs)["order_id"]
    assert call(f"<cancel_order><symbol>BTC/USDT</symbol><order_id>{order_id}</order_id>"
                "</cancel_order>").status == "success"
    assert call("<create_order><symbol>BTC/USDT</symbol><side>SELL</side>"
                "<quantity>0.05</quantity></create_order>").status == "success"
    assert call("<set_position_tp_sl_orders><symbol>BTC/USDT</symbol><stop_loss_price>6500"
                "</stop_loss_price></set_position_tp_sl_orders>").status == "success"
    assert call("<close_position><symbol>BTC/USDT</symbol></close_position>").status == "success"

    log.reset(by="me", reset_ms=WALL + 1, market_ms=rig.clock.now_ms())
    assert call(entries["market buy"]).status == "success"
    rules = [(d["accepted"], d["rule"]) for d in rig.ledger.risk_decisions()]
    assert rules.count((0, "kill_switch")) == len(entries)
