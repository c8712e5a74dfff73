"""An open stop-limit's row in the account panel names its limit beside its stop, and its tooltip
says why it is a stop-limit and that it may not fill in a gap (a live Binance spot stop)."""

from __future__ import annotations

from decimal import Decimal

from app.domain.trading import ExitKind, Order, OrderType, Side
from app.ui.panels.account_tables import order_columns


def test_a_stop_limits_row_names_its_limit_and_stop_and_says_why() -> None:
    order = Order(
        "1000003", "k-1", "T", "BTC/USDT", Side.SELL, OrderType.STOP_LIMIT, Decimal("0.01"), 0,
        price=Decimal("59700"), stop_price=Decimal("60000"), reduce_only=True,
        exit_kind=ExitKind.STOP_LOSS,
        reason="stop loss; sent as a STOP_LIMIT: binance lists no stop-market order for "
               "BTC/USDT; triggers at 60000, limit 59700 (0.5% below the stop, [exchanges] "
               "stop_limit_band); if the price gaps past the limit it may not fill")
    columns = {c.title: c for c in order_columns(lambda _symbol: 2, live=True)}
    assert columns["Type"].text(order) == "STOP_LIMIT · STOP_LOSS"
    assert columns["Price"].text(order) == "limit 59,700.00 / stop 60,000.00"
    tooltip = columns["Order id"].tooltip
    assert tooltip is not None and "may not fill" in tooltip(order)
    plain = Order("1", "k-2", "T", "BTC/USDT", Side.BUY, OrderType.LIMIT, Decimal("0.01"), 0,
                  price=Decimal("59000"))
    assert columns["Price"].text(plain) == "59,000.00"
