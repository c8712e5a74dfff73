"""Fill prices, fees and balances of the paper broker, checked by hand against the data file."""

from __future__ import annotations

import asyncio
from decimal import ROUND_DOWN, Decimal

from app.domain.trading import ExitKind, OrderStatus, OrderType, Side
from app.trading.port import OrderRequest
from tests.unit.exchange.support import BAR0_OPEN, DAY, SYMBOL, make_rig

D = Decimal


def run(coro):
    return asyncio.run(coro)


def req(side: Side, kind: OrderType = OrderType.MARKET, qty: str = "0.5", **kw) -> OrderRequest:
    return OrderRequest("a1", SYMBOL, side, kind, D(qty), **kw)


def test_market_buy_fills_at_next_bar_open_plus_slippage_with_taker_fee():
    rig = make_rig(visible=1)
    order = run(rig.broker.create_order(req(Side.BUY)))
    assert order.status is OrderStatus.SUBMITTED
    assert rig.broker.settle() == []  # bar 1 is not visible yet: nothing can fill
    fills = rig.step()
    assert len(fills) == 1
    fill = fills[0]
    # bar 1 open 7200.77 x 1.0002 = 7202.210154, rounded up to the 0.01 tick
    assert fill.price == D("7202.22")
    assert fill.time_ms == BAR0_OPEN + DAY
    assert fill.fee == D("3.60111")  # 0.5 x 7202.22 = 3601.11, x 0.001
    account = run(rig.broker.account())
    assert account.cash == D("10000") - D("3601.11") - D("3.60111")
    # valued at bar 1's close 6965.71
    assert account.equity == account.cash + D("0.5") * D("6965.71")
    assert order.status is OrderStatus.FILLED
    assert order.fee == D("3.60111")
    assert order.average_price == D("7202.22")


def test_market_sell_fills_at_next_open_minus_slippage_and_realizes_pnl():
    rig = make_rig(visible=1)
    run(rig.broker.create_order(req(Side.BUY)))
    rig.step()
    run(rig.broker.create_order(req(Side.SELL)))
    (fill,) = rig.step()
    # bar 2 open 6965.49 x 0.9998 = 6964.096902, rounded down to the tick
    assert fill.price == D("6964.09")
    assert fill.fee == D("3.482045")
    # net of both fees, the buy's as part of the position's cost (as the live account counts it)
    assert fill.realized_pnl == D("3482.045") - D("3601.11") - D("3.60111") - D("3.482045")
    account = run(rig.broker.account())
    expected_cash = D("10000") - D("3601.11") - D("3.60111") + D("3482.045") - D("3.482045")
    assert account.cash == expected_cash
    assert account.cash - D("10000") == fill.realized_pnl  # what the round trip made, all of it
    assert account.equity == expected_cash
    assert account.positions == ()
    assert account.total_pnl == expected_cash - D("10000")


def test_limit_buy_fills_at_limit_when_low_reaches_it_with_maker_fee():
    rig = make_rig(visible=2, fee_maker=D("0.0005"))
    run(rig.broker.create_order(req(Side.BUY, OrderType.LIMIT, price=D("6900"))))
    (fill,) = rig.step()  # bar 2: open 6965.49, low 6871.04
    assert fill.price == D("6900")
    assert fill.is_maker
    assert fill.fee == D("1.725")  # 3450 x 0.0005


def test_limit_buy_gap_fills_at_open_when_bar_opens_below_limit():
    rig = make_rig(visible=2)
    run(rig.broker.create_order(req(Side.BUY, OrderType.LIMIT, price=D("7000"))))
    (fill,) = rig.step()
    assert fill.price == D("6965.49")  # bar 2 opened through the limit


def test_limit_order_waits_while_price_does_not_reach_it():
    rig = make_rig(visible=2)
    order = run(rig.broker.create_order(req(Side.BUY, OrderType.LIMIT, price=D("6000"))))
    assert rig.step(3) == []
    assert order.status is OrderStatus.SUBMITTED


def test_stop_buy_triggers_on_high_and_fills_at_stop_plus_slippage():
    rig = make_rig(visible=3)  # newest visible bar 2, close 7344.96
    run(rig.broker.create_order(req(Side.BUY, OrderType.STOP, stop_price=D("7400"))))
    (fill,) = rig.step()  # bar 3: open 7345, high 7404
    assert fill.price == D("7401.48")  # 7400 x 1.0002


def test_stop_buy_gap_fills_at_open_when_bar_opens_above_stop():
    rig = make_rig(visible=3)
    run(rig.broker.create_order(req(Side.BUY, OrderType.STOP, stop_price=D("7300"))))
    (fill,) = rig.step()
    assert fill.price == D("7346.47")  # open 7345 x 1.0002 = 7346.469, rounded up


def test_stop_sell_gap_fills_at_open_minus_slippage():
    rig = make_rig(visible=1)
    run(rig.broker.create_order(req(Side.BUY)))
    rig.step()  # holds 0.5; bar 1 close 6965.71
    run(rig.broker.create_order(req(Side.SELL, OrderType.STOP, stop_price=D("7000"))))
    (fill,) = rig.step()  # bar 2 opens 6965.49, already below the stop
    assert fill.price == D("6964.09")


def test_stop_limit_triggered_at_open_above_limit_rests_then_fills_at_limit():
    rig = make_rig(visible=3)
    order = run(rig.broker.create_order(
        req(Side.BUY, OrderType.STOP_LIMIT, stop_price=D("7300"), price=D("7320"))
    ))
    assert rig.step() == []  # bar 3 opens 7345 > stop, but also > limit 7320
    assert order.triggered
    (fill,) = rig.step()  # bar 4: open 7354.19, low 7318 reaches the limit
    assert fill.price == D("7320")


def test_stop_limit_triggered_intrabar_fills_at_stop_price():
    rig = make_rig(visible=3)
    run(rig.broker.create_order(
        req(Side.BUY, OrderType.STOP_LIMIT, stop_price=D("7400"), price=D("7410"))
    ))
    (fill,) = rig.step()
    assert fill.price == D("7400")


def test_quote_amount_market_buy_spends_at_most_the_amount_fee_included():
    rig = make_rig(visible=1)
    order = run(rig.broker.create_order(
        OrderRequest("a1", SYMBOL, Side.BUY, OrderType.MARKET, D(0), quote_amount=D("1000"))
    ))
    (fill,) = rig.step()
    expected_qty = (D("1000") / (D("7202.22") * D("1.001"))).quantize(
        D("0.000001"), rounding=ROUND_DOWN
    )
    assert fill.quantity == expected_qty == order.quantity
    spent = D("10000") - run(rig.broker.account()).cash
    assert spent <= D("1000")
    assert spent == fill.quantity * fill.price + fill.fee


def test_buy_sized_to_all_cash_is_reduced_when_the_open_gaps_up_and_never_overdraws():
    rig = make_rig(visible=4)  # last close 7354.11; bar 4 opens 7354.19
    qty = (D("10000") / (D("7354.11") * D("1.0002") * D("1.001"))).quantize(
        D("0.000001"), rounding=ROUND_DOWN
    )
    order = run(rig.broker.create_order(req(Side.BUY, qty=str(qty))))
    (fill,) = rig.step()
    price = D("7355.67")  # 7354.19 x 1.0002 = 7355.660838, rounded up
    assert fill.price == price
    affordable = (D("10000") / (price * D("1.001"))).quantize(D("0.000001"), rounding=ROUND_DOWN)
    assert fill.quantity <= affordable < qty
    assert order.status is OrderStatus.CANCELLED
    assert "rest was cancelled" in order.reason
    assert run(rig.broker.account()).cash >= 0


def test_reserved_cash_for_open_buy_is_used_not_free():
    rig = make_rig(visible=2)
    run(rig.broker.create_order(req(Side.BUY, OrderType.LIMIT, price=D("6000"))))
    account = run(rig.broker.account())
    usdt = next(a for a in account.assets if a.currency == "USDT")
    assert usdt.used == D("3003")  # 0.5 x 6000 x 1.001
    assert usdt.free == D("6997")
    assert usdt.total == D("10000")


def test_oco_bar_touching_both_exits_takes_the_stop_loss_and_cancels_take_profit():
    rig = make_rig(visible=1)
    run(rig.broker.create_order(req(Side.BUY)))
    rig.step()
    tp = run(rig.broker.create_order(req(Side.SELL, OrderType.LIMIT, price=D("7400"),
                                         reduce_only=True, exit_kind=ExitKind.TAKE_PROFIT)))
    sl = run(rig.broker.create_order(req(Side.SELL, OrderType.STOP, stop_price=D("6900"),
                                         reduce_only=True, exit_kind=ExitKind.STOP_LOSS)))
    (fill,) = rig.step()  # bar 2: high 7405 and low 6871.04 both touched
    assert fill.order_id == sl.order_id
    assert fill.price == D("6898.62")  # 6900 x 0.9998
    assert tp.status is OrderStatus.CANCELLED
    assert "OCO" in tp.reason
    assert rig.broker.position_size(SYMBOL) == 0


def test_oco_take_profit_fill_cancels_stop_loss():
    rig = make_rig(visible=1)
    run(rig.broker.create_order(req(Side.BUY)))
    rig.step()
    tp = run(rig.broker.create_order(req(Side.SELL, OrderType.LIMIT, price=D("7390"),
                                         reduce_only=True, exit_kind=ExitKind.TAKE_PROFIT)))
    sl = run(rig.broker.create_order(req(Side.SELL, OrderType.STOP, stop_price=D("6000"),
                                         reduce_only=True, exit_kind=ExitKind.STOP_LOSS)))
    (fill,) = rig.step()
    assert fill.order_id == tp.order_id
    assert fill.price == D("7390")
    assert sl.status is OrderStatus.CANCELLED
    assert run(rig.broker.open_orders()) == []


def test_equity_curve_gets_a_point_per_settle_and_drawdown_is_tracked():
    rig = make_rig(visible=1)
    run(rig.broker.create_order(req(Side.BUY, qty="1")))
    rig.step(3)
    curve = rig.ledger.equity_curve()
    assert [t for t, _, _ in curve] == [BAR0_OPEN + k * DAY for k in (2, 3, 4)]
    # after bar 1: equity = 10000 - 7202.22 - 7.20222 + 6965.71
    assert curve[0][1] == D("10000") - D("7202.22") - D("7.20222") + D("6965.71")
    peak = D("10000")
    expected_dd = max((peak - e) / peak * 100 for _, e, _ in curve)
    account = run(rig.broker.account())
    assert account.max_drawdown_pct == expected_dd.quantize(D("0.01"))



def test_no_partial_fills_an_order_fills_whole_even_beyond_the_bar_volume():
    """Policy: no volume-bounded partial fills; bar 1 traded 31951 BTC, the order is 40000."""
    rig = make_rig(visible=1, cash="1000000000")
    order = run(rig.broker.create_order(req(Side.BUY, qty="40000")))
    (fill,) = rig.step()
    assert fill.quantity == D("40000")
    assert order.status is OrderStatus.FILLED


def test_today_pnl_counts_from_the_equity_at_the_start_of_the_utc_day():
    rig = make_rig(visible=1)
    run(rig.broker.create_order(req(Side.BUY, qty="1")))
    rig.step(3)  # daily bars: each settle is at 00:00 UTC, the start of a new day
    curve = rig.ledger.equity_curve()
    assert rig.broker.risk_view().day_start_equity == curve[-1][1]
    assert run(rig.broker.account()).today_pnl == 0
    rig.clock.advance_to(rig.clock.now_ms() + DAY // 2)  # noon: no new daily candle
    rig.broker.settle()
    assert rig.broker.risk_view().day_start_equity == curve[-1][1]
