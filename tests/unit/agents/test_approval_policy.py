"""Which orders wait for the person: live orders, large orders, first orders in a new symbol."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest

from app.config.approval import ApprovalSettings
from app.domain.trading import Mode
from app.trading.approval import approval_reason, is_approval, order_notional


def _never_asked() -> set[str]:
    raise AssertionError("the traded symbols were read although no rule needed them")


def _reason(settings: ApprovalSettings, *, tool: str = "create_order", mode: Mode = Mode.PAPER,
            last: str | None = "100", traded: Callable[[], set[str]] = _never_asked,
            **args: object) -> str | None:
    return approval_reason(
        settings, tool=tool, args={"symbol": "BTC/USDT", **args}, mode=mode,
        price=Decimal(last) if last is not None else None, traded_symbols=traded)


def test_every_live_order_waits_by_default_and_paper_orders_do_not() -> None:
    settings = ApprovalSettings()
    live = _reason(settings, mode=Mode.LIVE, quantity=Decimal("0.1"))
    assert live is not None and "LIVE" in live and "approval.live_orders" in live
    assert _reason(settings, mode=Mode.PAPER, quantity=Decimal("0.1")) is None
    assert _reason(ApprovalSettings(live_orders=False), mode=Mode.LIVE,
                   quantity=Decimal("0.1")) is None


def test_tools_other_than_orders_never_wait() -> None:
    settings = ApprovalSettings(above_quote=Decimal(1), new_symbols=True)
    assert _reason(settings, tool="get_klines", mode=Mode.LIVE, quantity=Decimal(5)) is None
    assert _reason(settings, tool="cancel_order", mode=Mode.LIVE) is None


@pytest.mark.parametrize(("args", "last", "waits"), [
    ({"quote_amount": Decimal("1500")}, None, True),        # spend stated in quote currency
    ({"quote_amount": Decimal("900")}, "100", False),
    ({"quantity": Decimal("11")}, "100", True),              # market order: quantity x last price
    ({"quantity": Decimal("9")}, "100", False),
    ({"quantity": Decimal("2"), "price": Decimal("600")}, "100", True),  # limit price counts
    ({"quantity": Decimal("11")}, None, False),              # no price known: not decidable here
])
def test_orders_above_the_quote_limit_wait_with_their_worth_stated(
        args: dict[str, Decimal], last: str | None, waits: bool) -> None:
    reason = _reason(ApprovalSettings(above_quote=Decimal(1000)), last=last, **args)
    assert (reason is not None) is waits
    if reason is not None:
        assert "above your limit of 1,000" in reason and "approval.above_quote" in reason


def test_the_first_order_in_a_symbol_never_traded_waits_when_asked_for() -> None:
    settings = ApprovalSettings(new_symbols=True)
    reason = _reason(settings, quantity=Decimal(1), traded=lambda: {"ETH/USDT"})
    assert reason is not None and "BTC/USDT has never been traded" in reason
    assert _reason(settings, quantity=Decimal(1), traded=lambda: {"BTC/USDT"}) is None


def test_order_worth_uses_quote_amount_then_limit_price_then_last_price() -> None:
    assert order_notional({"quote_amount": Decimal(50)}, Decimal(1)) == Decimal(50)
    assert order_notional({"quantity": Decimal(2), "price": Decimal(30)}, Decimal(1)) == 60
    assert order_notional({"quantity": Decimal(2)}, Decimal(7)) == Decimal(14)
    assert order_notional({"quantity": Decimal(2)}, None) is None


@pytest.mark.parametrize("answer", ["Approve", "yes", " OK. ", "confirm!", "y"])
def test_plain_words_of_consent_approve(answer: str) -> None:
    assert is_approval(answer)


@pytest.mark.parametrize("answer", ["Refuse", "no", "not yet", "approve later", ""])
def test_anything_else_refuses(answer: str) -> None:
    assert not is_approval(answer)
