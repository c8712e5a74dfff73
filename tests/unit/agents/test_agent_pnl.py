"""An agent's P&L in the agent list is what its trades did to the account, fees and all.

Both venues now count a buy's fee in the position's cost, so a sell's realized P&L is net of
every fee; the agent list subtracted the buys' fees once more (a demo trade that made +64.84
showed about +62.85). A fee taken in the base asset (Binance without BNB) leaves less to sell, and
the list counts the quantity the agent holds.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal as D

from app.ccxt.orders import average_cost
from app.domain.trading import Fill, Side
from app.exchange.book import AccountBook
from app.store.order_journal import JournalFill
from app.trading.agent_pnl import AgentPnL, PnLTracker


class _Fills:
    """The broker port's ``trades`` (newest first), all the tracker reads."""

    def __init__(self, fills: list[Fill]) -> None:
        self.fills = fills

    async def trades(self, _symbol: object, _limit: object) -> list[Fill]:
        return list(reversed(self.fills))


def _agent(fills: list[Fill], last: D) -> AgentPnL:
    async def price_of(_symbol: str) -> D:
        return last

    tracker = PnLTracker(_Fills(fills), price_of)  # type: ignore[arg-type]
    return asyncio.run(tracker.update())["a1"]


def _tracked(fills: list[Fill], last: D) -> tuple[D, D]:
    pnl = _agent(fills, last)
    return pnl.realized, pnl.total


def _fill(n: int, side: Side, qty: D, price: D, fee: D, currency: str, realized: D) -> Fill:
    return Fill(f"F{n}", f"O{n}", "a1", "BTC/USDT", side, qty, price, fee, currency, n, realized)


def test_a_paper_round_trip_shows_what_it_did_to_the_cash_open_and_closed() -> None:
    book = AccountBook("USDT")
    book.balances["USDT"] = D(10_000)
    book.apply_buy("a1", "BTC/USDT", "BTC", D("0.5"), D("50"), D("0.05"))
    buy = _fill(1, Side.BUY, D("0.5"), D("100"), D("0.05"), "USDT", D(0))
    realized, total = _tracked([buy], D("105"))
    assert realized == 0 and total == D("0.5") * D("105") - D("50.05")  # selling now would make
    made, _ = book.apply_sell("a1", "BTC/USDT", "BTC", D("0.5"), D("55"), D("0.055"), D("110"))
    sell = _fill(2, Side.SELL, D("0.5"), D("110"), D("0.055"), "USDT", made)
    realized, total = _tracked([buy, sell], D("120"))
    assert realized == total == book.total("USDT") - 10_000 == D("4.895")


def test_a_live_buy_whose_fee_was_taken_in_btc_counts_the_btc_left() -> None:
    journal = [
        JournalFill("binance", "T1", "c1", "E1", "BTC/USDT", Side.BUY, D("0.5"), D("100"),
                    D("50"), D("0.0005"), "BTC", 1),
        JournalFill("binance", "T2", "c2", "E2", "BTC/USDT", Side.SELL, D("0.4995"), D("110"),
                    D("54.945"), D("0.054945"), "USDT", 2),
    ]
    _size, _avg, realized_of = average_cost(journal, "BTC", "USDT")
    fills = [_fill(n, j.side, j.quantity, j.price, j.fee, j.fee_currency, r)
             for n, (j, r) in enumerate(zip(journal, realized_of, strict=True), start=1)]
    realized, total = _tracked(fills[:1], D("110"))
    assert total == D("0.4995") * D("110") - D("50")  # the BTC held, for the USDT paid
    realized, total = _tracked(fills, D("120"))
    cash = -D("50") + D("54.945") - D("0.054945")
    assert abs(realized - cash) < D("0.000001") and total == realized
    # the fees it is net of, in USDT: the BTC taken at its fill's price
    assert _agent(fills, D("120")).fees == D("0.0005") * D("100") + D("0.054945")
