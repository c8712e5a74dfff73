"""How far an order still in flight could move the balances: what the balance check waits out."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from app.ccxt.in_flight import Reach, either_way, order_reach, unfilled
from app.domain.trading import OrderType, Side
from app.store.order_journal import JournalEntry, JournalState

D = Decimal
FEE = D("0.01")


def entry(side: Side = Side.BUY, quantity: str = "0.01", price: str | None = "50000",
          state: JournalState = JournalState.UNKNOWN, **changes: object) -> JournalEntry:
    kind = OrderType.MARKET if price is None else OrderType.LIMIT
    made = JournalEntry("binance", "kst1", "trader", "k-1", "BTC/USDT", side, kind, D(quantity),
                        0, price=None if price is None else D(price), state=state)
    return replace(made, **changes)


def test_a_buy_in_flight_may_add_up_to_its_quantity_and_spend_up_to_its_cost_with_fee() -> None:
    reach = order_reach(entry(), D("0.01"), D(0), D("47500"), D("52500"), FEE)
    assert reach == {"BTC": Reach(D(0), D("0.01")), "USDT": Reach(D("-530.25"), D(0))}
    assert reach["USDT"].covers(D("-500.5")) and not reach["USDT"].covers(D("-600"))
    assert not reach["BTC"].covers(D("-0.001"))  # a buy never lowers the coin


def test_a_buy_for_a_quote_amount_spends_at_most_what_is_left_of_it() -> None:
    buy = entry(price=None, quote_amount=D("1000"))
    reach = order_reach(buy, D("0.019"), D("400"), D("50000"), D("52500"), FEE)
    assert reach["USDT"] == Reach(D("-606"), D(0))
    assert reach["BTC"] == Reach(D(0), D("0.012"))


def test_a_sell_may_remove_its_coins_and_bring_in_their_price() -> None:
    reach = order_reach(entry(Side.SELL), D("0.01"), D(0), D("47500"), D("52500"), FEE)
    assert reach == {"BTC": Reach(D("-0.0101"), D(0)), "USDT": Reach(D(0), D("525"))}


def test_only_the_part_the_journal_holds_no_fills_of_may_still_move_the_balances() -> None:
    assert unfilled(entry(), D(0)) == D("0.01")  # not found yet: all of it
    resting = entry(state=JournalState.PARTIALLY_FILLED, filled_quantity=D("0.004"))
    assert unfilled(resting, D("0.004")) == 0  # read again just now: nothing beyond its fills
    assert unfilled(replace(resting, filled_quantity=D("0.008")), D("0.004")) == D("0.004")
    filled = entry(state=JournalState.FILLED, filled_quantity=D("0.01"))
    assert unfilled(filled, D("0.01")) == 0  # every fill stored: it moves nothing any more
    assert unfilled(filled, D(0)) == D("0.01")  # closed, its fills not stored yet
    assert unfilled(entry(state=JournalState.NOT_PLACED), D(0)) == 0
    assert unfilled(entry(state=JournalState.REJECTED), D(0)) == 0


def test_a_fill_learnt_after_the_balances_were_read_may_or_may_not_be_in_them() -> None:
    reach = either_way({"BTC": D("0.00999"), "USDT": D("-700")})
    assert reach == {"BTC": Reach(D("-0.00999"), D(0)), "USDT": Reach(D(0), D("700"))}
