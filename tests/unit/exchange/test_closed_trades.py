"""Closed trades paired from fills: P&L net of every fee, per round trip and per actor who
opened it, on a shared account where one actor may close another's holding."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal as D

from app.domain.trading import Fill, Side
from app.trading.closed_trades import closed_trades, totals_by_actor

_seq = iter(range(1, 10_000))


def fill(agent: str, side: Side, qty: str, price: str, fee: str, t: int,
         symbol: str = "BTC/USD", fee_currency: str = "USD") -> Fill:
    n = next(_seq)
    return Fill(f"F{n:09d}", f"P{n:08d}", agent, symbol, side, D(qty), D(price), D(fee),
                fee_currency, t)


def test_a_buy_then_a_sell_is_one_trade_with_pnl_net_of_both_fees() -> None:
    (trade,) = closed_trades([
        fill("trader", Side.BUY, "0.5", "10000", "5", 1),
        fill("trader", Side.SELL, "0.5", "11000", "5.5", 2),
    ])
    assert trade.opened_by == "trader" and trade.closed_by == ("trader",)
    assert (trade.entry_ms, trade.exit_ms) == (1, 2)
    assert trade.quantity == D("0.5")
    assert trade.entry_price == D("10000") and trade.exit_price == D("11000")
    assert trade.fees == D("10.5")
    assert trade.pnl == D("500") - D("10.5")
    assert trade.return_pct == (D("489.5") / D("5000") * 100)


def test_scaling_in_and_out_averages_the_prices_and_closes_once_flat() -> None:
    trades = closed_trades([
        fill("a", Side.BUY, "1", "100", "0", 1),
        fill("a", Side.BUY, "1", "200", "0", 2),
        fill("a", Side.SELL, "1.5", "300", "0", 3),
    ])
    assert trades == []  # half a unit still open: not a closed trade yet
    (trade,) = closed_trades([
        fill("a", Side.BUY, "1", "100", "0", 1),
        fill("a", Side.BUY, "1", "200", "0", 2),
        fill("a", Side.SELL, "1.5", "300", "0", 3),
        fill("a", Side.SELL, "0.5", "100", "0", 4),
    ])
    assert trade.entry_price == D("150") and trade.exit_price == D("250")
    assert trade.pnl == D("200") and trade.exit_ms == 4


def test_the_persons_close_of_an_agents_position_stays_the_agents_trade() -> None:
    trades = closed_trades([
        fill("trader", Side.BUY, "1", "100", "1", 1),
        fill("person", Side.BUY, "1", "110", "1", 2),
        # the person's close sells everything: its own holding first, then the trader's
        fill("person", Side.SELL, "2", "120", "2", 3),
    ])
    by = {t.opened_by: t for t in trades}
    assert set(by) == {"trader", "person"}
    assert by["person"].pnl == D("10") - D("1") - D("1")
    assert by["trader"].pnl == D("20") - D("1") - D("1")
    assert by["trader"].closed_by == ("person",)
    totals = totals_by_actor(trades)
    assert totals["trader"].trades == 1 and totals["trader"].wins == 1
    assert totals["trader"].pnl == D("18") and totals["person"].pnl == D("8")
    assert totals["person"].fees == D("2")


def test_a_loss_counts_as_a_trade_but_not_a_win_and_symbols_pair_apart() -> None:
    trades = closed_trades([
        fill("a", Side.BUY, "1", "100", "0", 1),
        fill("a", Side.BUY, "10", "5", "0", 1, symbol="ETH/USD"),
        fill("a", Side.SELL, "10", "6", "0", 2, symbol="ETH/USD"),
        fill("a", Side.SELL, "1", "90", "0", 3),
    ])
    assert [(t.symbol, t.pnl) for t in trades] == [("ETH/USD", D("10")), ("BTC/USD", D("-10"))]
    totals = totals_by_actor(trades)["a"]
    assert (totals.trades, totals.wins, totals.pnl) == (2, 1, D("0"))


def test_a_buy_fee_in_the_base_currency_leaves_less_to_sell_and_is_counted_once() -> None:
    """Binance charges a buy's fee in what it buys: 1 BTC bought leaves 0.99 to sell."""
    (trade,) = closed_trades([
        fill("a", Side.BUY, "1", "100", "0.01", 1, fee_currency="BTC"),
        fill("a", Side.SELL, "0.99", "100", "0", 2),
    ])
    assert trade.fees == D("1.00")  # shown, valued at the fill price
    assert trade.pnl == D("99") - D("100")  # paid once: in the smaller sale, not again


def test_a_sell_the_fills_cannot_explain_is_left_out_not_guessed() -> None:
    assert closed_trades([fill("a", Side.SELL, "1", "100", "0", 1)]) == []


def test_the_trade_pnl_equals_the_ledgers_realized_pnl_less_the_buy_fees() -> None:
    """One actor's trip: the same number the agents' P&L shows (realized net of every fee)."""
    buy = fill("a", Side.BUY, "0.3", "9000", "2.7", 1)
    sold = fill("a", Side.SELL, "0.3", "9400", "2.82", 2)
    # the book's realized P&L of the sell: (price - average cost) x qty - the sell's fee
    sell = replace(sold, realized_pnl=(sold.price - buy.price) * sold.quantity - sold.fee)
    (trade,) = closed_trades([buy, sell])
    assert trade.pnl == sell.realized_pnl - buy.fee
