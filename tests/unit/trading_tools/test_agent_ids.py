"""Agent ids are case-insensitive everywhere an account matches them: ``TRADER-1`` is ``trader-1``.

Issue 14: an allotment given for ``trader-1`` did not bind ``TRADER-1``, so one agent could escape
its budget by the spelling of its id. Budgets, order ownership and client order ids now match
through one key (``app.domain.agents.agent_key``), and a risk profile naming one agent twice in
different cases is refused.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from app.config import settings_from_mapping
from app.config.risk import RiskConfig
from app.domain.errors import OperationalError
from app.domain.trading import OrderType, Side
from app.risk.config import build_guard
from app.risk.guard import MemoryDecisionRecorder
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext
from app.tools.trade_tools import TradeTools
from app.trading.port import OrderRequest
from tests.helpers.orders import order_entry
from tests.helpers.scripted_market import make_scripted_broker

D = Decimal
BUY_6000 = ("<create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
            "<quote_amount>6000</quote_amount></create_order>")


def test_an_allotment_binds_every_spelling_of_the_agents_id() -> None:
    broker, _, _ = make_scripted_broker({"BTC/USDT": D(40_000)})
    config = RiskConfig.model_validate({"agent_budget": {"allotments": {"trader-1": "10000"}}})
    executor = ToolExecutor(
        ToolRegistry(TradeTools(
            order_entry(broker, build_guard(config, MemoryDecisionRecorder()))).specs()),
        MemoryRecorder(),
    )

    def buy(agent: str):
        result = asyncio.run(executor.execute_text(AgentContext(agent), BUY_6000))
        assert result is not None
        return result

    assert buy("trader-1").status == "success"
    for spelling in ("TRADER-1", "Trader-1"):
        refused = buy(spelling)
        assert refused.status == "rejected" and refused.rule == "agent_budget"
        assert "(6000 committed + 6000 this order) > its allotment 10000 USDT" in refused.message
    assert buy("trader-2").status == "success"  # another agent, not capped


def test_an_agent_cancels_and_finds_its_orders_whatever_the_case_of_its_id() -> None:
    broker, _, _ = make_scripted_broker({"BTC/USDT": D(40_000)})
    placed = asyncio.run(broker.create_order(OrderRequest(
        "trader-1", "BTC/USDT", Side.BUY, OrderType.LIMIT, D("0.01"), price=D(39_000),
        client_order_id="c1",
    )))
    assert broker.find_order("TRADER-1", "c1") == placed
    assert asyncio.run(broker.open_orders("Trader-1")) == [placed]
    cancelled = asyncio.run(broker.cancel_order("TRADER-1", "BTC/USDT", placed.order_id))
    assert cancelled.status.value == "CANCELLED"


def test_a_risk_profile_naming_one_agent_in_two_cases_is_refused() -> None:
    with pytest.raises(OperationalError, match="name the same agent"):
        settings_from_mapping(
            {"risk": {"agent_budget": {"allotments": {"trader-1": "100", "TRADER-1": "900"}}}}
        )
