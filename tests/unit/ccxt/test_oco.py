"""Which markets take an OCO list, and the list's parameters as Binance reads them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from app.ccxt.oco import OcoLegs, oco_allowed, request_params
from app.domain.trading import ExitKind, OrderType, Side
from app.store.order_journal import JournalEntry


class Exchange:
    """Just what ``oco`` reads of a ccxt exchange."""

    def __init__(self, exchange_id: str, allowed: Any, has_method: bool = True) -> None:
        self.id = exchange_id
        self.markets = {"BTC/USDT": {"id": "BTCUSDT", "info": {"ocoAllowed": allowed}}}
        if has_method:
            self.privatePostOrderListOco = object()

    def market_id(self, symbol: str) -> str:
        return str(self.markets[symbol]["id"])


def test_only_a_market_marked_oco_allowed_on_an_exchange_kestrel_sends_lists_to_takes_one():
    assert oco_allowed(Exchange("binance", True), "BTC/USDT")
    assert not oco_allowed(Exchange("binance", False), "BTC/USDT")
    assert not oco_allowed(Exchange("binance", None), "BTC/USDT")
    assert not oco_allowed(Exchange("binance", True), "ETH/USDT")
    assert not oco_allowed(Exchange("binance", True, has_method=False), "BTC/USDT")
    assert not oco_allowed(Exchange("okx", True), "BTC/USDT")


def leg(cid: str, **fields: Any) -> JournalEntry:
    return JournalEntry(venue="binance", client_order_id=cid, agent_id="a", agent_order_id=cid,
                        symbol="BTC/USDT", side=Side.SELL, quantity=Decimal("0.00999"),
                        created_ms=0, reduce_only=True, **fields)


def test_the_list_sells_the_take_profit_above_and_the_stop_limit_below_with_their_own_ids():
    legs = OcoLegs(
        "kstlist", leg("ksttp", order_type=OrderType.LIMIT, price=Decimal("71000.50"),
                       exit_kind=ExitKind.TAKE_PROFIT),
        leg("kstsl", order_type=OrderType.STOP_LIMIT, stop_price=Decimal("65000"),
            price=Decimal("64675.00"), exit_kind=ExitKind.STOP_LOSS))
    assert request_params(Exchange("binance", True), legs) == {
        "symbol": "BTCUSDT", "side": "SELL", "quantity": "0.00999",
        "listClientOrderId": "kstlist",
        "aboveType": "LIMIT_MAKER", "abovePrice": "71000.5", "aboveClientOrderId": "ksttp",
        "belowType": "STOP_LOSS_LIMIT", "belowStopPrice": "65000", "belowPrice": "64675",
        "belowTimeInForce": "GTC", "belowClientOrderId": "kstsl",
    }
