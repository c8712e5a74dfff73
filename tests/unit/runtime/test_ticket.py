"""The order ticket's form read strictly: every wrong field is named with a sentence, numbers in
the one plain syntax, and only what the order type uses is taken."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from app.domain.trading import OrderType, Side
from app.runtime.ticket import TicketError, TicketKind, read_ticket


def form(**fields: str) -> dict[str, str]:
    base = {"symbol": "BTC/USD", "side": "BUY", "kind": "MARKET", "amount": "0.01",
            "unit": "base"}
    base.update(fields)
    return base


def test_a_market_buy_by_quantity() -> None:
    ticket = read_ticket(form())
    assert ticket.side is Side.BUY and ticket.order_type is OrderType.MARKET
    assert ticket.quantity == D("0.01") and ticket.quote_amount is None
    assert ticket.price is None and ticket.stop_price is None and not ticket.has_exits


def test_an_amount_in_the_quote_currency_is_a_quote_amount() -> None:
    ticket = read_ticket(form(amount="250", unit="quote"))
    assert ticket.quote_amount == D("250") and ticket.quantity is None


def test_a_limit_needs_its_price_and_a_stop_its_trigger() -> None:
    with pytest.raises(TicketError) as err:
        read_ticket(form(kind="LIMIT"))
    assert err.value.field == "price" and "Limit price is required" in err.value.message
    with pytest.raises(TicketError) as err:
        read_ticket(form(kind="STOP"))
    assert err.value.field == "stop_price"
    ticket = read_ticket(form(kind="STOP_LIMIT", price="101", stop_price="100"))
    assert (ticket.price, ticket.stop_price) == (D("101"), D("100"))


def test_fields_the_type_does_not_use_are_ignored() -> None:
    ticket = read_ticket(form(kind="MARKET", price="123", stop_price="junk"))
    assert ticket.price is None and ticket.stop_price is None


@pytest.mark.parametrize("text", ["1,000", "1e3", "1_000", "٥٠٠", "abc"])
def test_a_number_not_written_plainly_is_refused_naming_the_syntax(text: str) -> None:
    with pytest.raises(TicketError) as err:
        read_ticket(form(amount=text))
    assert err.value.field == "amount" and "written plainly" in err.value.message


@pytest.mark.parametrize("text", ["0", "-1"])
def test_an_amount_must_be_above_zero(text: str) -> None:
    with pytest.raises(TicketError, match="must be above zero"):
        read_ticket(form(amount=text))


def test_missing_symbol_side_or_amount_is_named() -> None:
    for field, fields in (("symbol", form(symbol=" ")), ("side", form(side="HOLD")),
                          ("amount", form(amount="")), ("kind", form(kind="ICEBERG"))):
        with pytest.raises(TicketError) as err:
            read_ticket(fields)
        assert err.value.field == field


def test_tp_and_sl_on_a_limit_buy_must_straddle_the_entry() -> None:
    ticket = read_ticket(form(kind="LIMIT", price="100", take_profit="110", stop_loss="95"))
    assert (ticket.take_profit, ticket.stop_loss) == (D("110"), D("95")) and ticket.has_exits
    with pytest.raises(TicketError) as err:
        read_ticket(form(kind="LIMIT", price="100", take_profit="99"))
    assert err.value.field == "take_profit" and "above the entry price 100" in err.value.message
    with pytest.raises(TicketError) as err:
        read_ticket(form(kind="LIMIT", price="100", stop_loss="101"))
    assert err.value.field == "stop_loss"
    with pytest.raises(TicketError, match="above stop loss"):
        read_ticket(form(take_profit="90", stop_loss="95"))


def test_tp_and_sl_protect_a_long_so_a_sell_cannot_carry_them() -> None:
    with pytest.raises(TicketError, match="protect a long position"):
        read_ticket(form(side="SELL", take_profit="110"))


def test_tp_sl_exits_for_a_held_position_need_no_amount() -> None:
    ticket = read_ticket({"symbol": "BTC/USD", "kind": "TP_SL", "stop_loss": "9000"})
    assert ticket.kind is TicketKind.TP_SL and ticket.stop_loss == D("9000")
    assert ticket.quantity is None and ticket.side is Side.SELL
    with pytest.raises(TicketError, match="Give a take profit, a stop loss or both"):
        read_ticket({"symbol": "BTC/USD", "kind": "TP_SL"})
