"""Paper and live count realised P&L by one rule: a buy's fee (paid in the quote currency) is part
of the position's cost, so a sell realises what the round trip made, both fees included.

The paper book left the buy's fee out of the cost while the live account's journal put it in, so
the same trades showed different P&L on paper and on the exchange, and the rule-engine Trader,
which keeps the venue's realised P&L in its record, believed a losing backtest (-81 after 258
trades) was a winning one (+423): every trade's entry fee was missing.
"""

from __future__ import annotations

from decimal import Decimal as D

from hypothesis import given, settings
from hypothesis import strategies as st

from app.ccxt.orders import average_cost
from app.domain.trading import Side
from app.exchange.book import AccountBook
from app.store.order_journal import JournalFill

PRICES = st.decimals(min_value=D("100"), max_value=D("100000"), places=2)
SIZES = st.decimals(min_value=D("0.001"), max_value=D("2"), places=3)
RATE = D("0.001")


def _journal(side: Side, qty: D, price: D, n: int) -> JournalFill:
    cost = qty * price
    return JournalFill("binance", f"T{n}", f"c{n}", f"E{n}", "BTC/USDT", side, qty, price, cost,
                       cost * RATE, "USDT", n)


@settings(max_examples=200, deadline=None)
@given(buys=st.lists(st.tuples(SIZES, PRICES), min_size=1, max_size=4), sell_price=PRICES)
def test_paper_and_live_realise_the_same_pnl_for_the_same_fills(
    buys: list[tuple[D, D]], sell_price: D
) -> None:
    book = AccountBook("USDT")
    book.balances["USDT"] = D("10000000")
    fills = []
    for n, (qty, price) in enumerate(buys):
        book.apply_buy("a1", "BTC/USDT", "BTC", qty, qty * price, qty * price * RATE)
        fills.append(_journal(Side.BUY, qty, price, n))
    held = book.position("BTC/USDT").size
    proceeds = held * sell_price
    paper, _ = book.apply_sell("a1", "BTC/USDT", "BTC", held, proceeds, proceeds * RATE,
                               sell_price)
    fills.append(_journal(Side.SELL, held, sell_price, len(buys)))
    _size, _avg, live = average_cost(fills, "BTC", "USDT")
    # the paper book keeps its average to 10 decimals and P&L to 8: equal to a hundredth of a cent
    assert abs(paper - live[-1]) < D("0.0001")
    spent = sum((q * p * (1 + RATE) for q, p in buys), D(0))
    assert abs(paper - (proceeds * (1 - RATE) - spent)) < D("0.0001")  # all of the round trip
