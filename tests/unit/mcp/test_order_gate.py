"""Orders from an external agent pass the approval policy (nobody can approve: refused) and the
kill switch seam before the trade tool runs."""

import asyncio
from decimal import Decimal

import pytest

from app.config.approval import ApprovalSettings
from app.domain.errors import RiskRejection
from app.domain.trading import Mode
from app.mcp.order_gate import OrderGate


async def _price(_symbol):
    return Decimal(100)


def _gate(**kwargs):
    kwargs.setdefault("approval", ApprovalSettings(above_quote=Decimal(500)))
    return OrderGate(mode=kwargs.pop("mode", Mode.PAPER), last_price=_price,
                     traded_symbols=lambda: {"BTC/USD"}, **kwargs)


def test_an_order_the_policy_would_hold_is_refused_naming_the_setting():
    with pytest.raises(RiskRejection) as caught:
        asyncio.run(_gate().check("create_order", {"symbol": "BTC/USD",
                                                   "quantity": Decimal(6)}))
    assert caught.value.rule == "human_approval_required"
    assert "approval.above_quote" in caught.value.reason


def test_a_small_order_and_other_tools_pass():
    asyncio.run(_gate().check("create_order", {"symbol": "BTC/USD", "quantity": Decimal(1)}))
    asyncio.run(_gate().check("get_account_balance", {}))


def test_every_live_order_is_refused_by_default():
    gate = _gate(approval=ApprovalSettings(), mode=Mode.LIVE)
    with pytest.raises(RiskRejection, match="LIVE"):
        asyncio.run(gate.check("create_order", {"symbol": "BTC/USD", "quantity": Decimal(1)}))


def test_the_kill_switch_seam_stops_entries_but_not_exits_or_a_cancel():
    gate = _gate(kill_switch=lambda: "a person pressed the kill switch")
    for side in ("BUY", "buy", ""):
        with pytest.raises(RiskRejection, match="halted") as caught:
            asyncio.run(gate.check("create_order", {"symbol": "BTC/USD", "side": side,
                                                    "quantity": Decimal(1)}))
        assert caught.value.rule == "kill_switch"
        assert "a person pressed the kill switch" in caught.value.reason
    # exits go on to the trade tool, whose Risk Guard lets only reductions through
    asyncio.run(gate.check("create_order", {"symbol": "BTC/USD", "side": "SELL",
                                            "quantity": Decimal(1)}))
    asyncio.run(gate.check("close_position", {"symbol": "BTC/USD"}))
    asyncio.run(gate.check("set_position_tp_sl_orders", {"symbol": "BTC/USD",
                                                         "stop_loss_price": Decimal(90)}))
    asyncio.run(gate.check("cancel_order", {"symbol": "BTC/USD", "order_id": "x"}))
