"""A stop on a market without a stop-market order is sent as a stop-limit, its limit a band
beyond the stop and rounded to stay fillable; where the market lists a stop-market, it is not."""

from __future__ import annotations

from decimal import Decimal

from app.ccxt.stops import as_stop_limit, limit_for, needs_stop_limit
from app.domain.market_rules import MarketRules
from app.domain.trading import OrderType, Side
from app.trading.port import OrderRequest

BINANCE_BTCUSDT = {"info": {"orderTypes": [
    "LIMIT", "LIMIT_MAKER", "MARKET", "STOP_LOSS_LIMIT", "TAKE_PROFIT_LIMIT"]}}
RULES = MarketRules(symbol="BTC/USDT", tick=Decimal("0.01"))


def test_a_market_that_lists_no_stop_market_needs_a_stop_limit() -> None:
    assert needs_stop_limit("binance", BINANCE_BTCUSDT)


def test_a_market_that_lists_a_stop_market_keeps_it() -> None:
    listed = {"info": {"orderTypes": ["LIMIT", "MARKET", "STOP_LOSS", "STOP_LOSS_LIMIT"]}}
    assert not needs_stop_limit("binance", listed)
    assert not needs_stop_limit("binance", {"info": {}})  # nothing listed: ccxt decides
    assert not needs_stop_limit("okx", BINANCE_BTCUSDT)


def test_a_sell_stops_limit_is_below_it_rounded_down_and_a_buy_stops_above_rounded_up() -> None:
    band = Decimal("0.005")
    assert limit_for(Decimal("60000.01"), Side.SELL, band, RULES) == Decimal("59700.00")
    assert limit_for(Decimal("60000.01"), Side.BUY, band, RULES) == Decimal("60300.02")


def test_the_stop_limit_says_its_limit_and_that_it_may_not_fill_in_a_gap() -> None:
    req = OrderRequest("a", "BTC/USDT", Side.SELL, OrderType.STOP, Decimal("0.01"),
                       stop_price=Decimal("60000"), reason="stop loss")
    sent = as_stop_limit(req, "binance", RULES, Decimal("0.01"))
    assert sent.order_type is OrderType.STOP_LIMIT
    assert sent.price == Decimal("59400.00") and sent.stop_price == Decimal("60000")
    assert sent.reason.startswith("stop loss; sent as a STOP_LIMIT")
    assert "limit 59400" in sent.reason and "may not fill" in sent.reason
