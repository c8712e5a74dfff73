"""A fake Binance spot account: balances, orders, a matching engine and trades, in Decimals.

Why: the live broker must be proven against ccxt's real signed requests and real order parsing,
and against the ways a real exchange surprises a client: an order booked whose answer is lost, an
order not yet visible right after it was accepted, partial fills, a client order id Binance
refuses only while its first order is still open. Everything is exact (Decimal), so a test can
compare the journal with the account to the last satoshi.

Matching: a MARKET order (or the crossing part of a LIMIT) walks the fake's order book (the
recorded book shape at the tape's last price, as the public depth endpoint serves it), level by
level, one trade per level; what the book cannot fill expires (a MARKET order) or rests (a
LIMIT). A resting LIMIT fills at its price once the tape's last price crosses it; a
STOP_LOSS_LIMIT becomes a LIMIT once its stop is touched. Order types are checked against the
symbol's ``orderTypes`` as Binance does (BTCUSDT lists no STOP_LOSS: refused, -2010), and a stop
that would trigger at once is refused. Resting orders are matched before every
private request, at most once per fake minute each, ``fill_cap`` at a time (partial fills).
Fees: 0.1% of what is received, in the received asset (Binance's rule without BNB).

Knobs a test sets (under ``lock``): ``fill_cap``, ``book_levels`` (fewer levels: market orders
fill partly), ``hide_new_s`` (a new order is invisible to every read for that many fake
seconds: lookups, open and all orders, and its trades in myTrades), ``hide_trades_s`` (None:
a hidden order's trades stay hidden as long as the order; a number: they show in myTrades that
many fake seconds after the order was placed, so 0 shows a trade whose order no read finds yet,
as an exchange whose order index lags its trade history does), ``check_timestamps`` (refuse a
signed request whose timestamp is off the fake now by more than its recvWindow, code -1021).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from typing import Any

from tests.helpers.fake_exchange.tape import MINUTE
from tests.helpers.fake_exchange.venues import MarketState, Shape

ZERO = Decimal(0)
FEE = Decimal("0.001")
OPEN = ("NEW", "PARTIALLY_FILLED")
# Binance's refusal (-2010) of an order type the symbol does not list in its orderTypes
UNSUPPORTED = {
    "STOP_LOSS": "Stop loss orders are not supported for this symbol.",
    "STOP_LOSS_LIMIT": "Stop loss limit orders are not supported for this symbol.",
    "TAKE_PROFIT": "Take profit orders are not supported for this symbol.",
    "TAKE_PROFIT_LIMIT": "Take profit limit orders are not supported for this symbol.",
    "MARKET": "Market orders are not supported for this symbol.",
}


class Refused(Exception):
    """The exchange's refusal: HTTP status, Binance code and message."""

    def __init__(self, status: int, code: int, msg: str) -> None:
        super().__init__(msg)
        self.status, self.code, self.msg = status, code, msg


@dataclass
class FakeOrder:
    order_id: int
    client_id: str
    symbol: str
    market_id: str
    side: str
    type: str
    orig_qty: Decimal
    price: Decimal
    stop_price: Decimal
    time_ms: int
    status: str = "NEW"
    executed: Decimal = ZERO
    quote_done: Decimal = ZERO
    update_ms: int = 0
    locked: Decimal = ZERO
    last_match_minute: int = -1
    triggered: bool = False
    list_id: int = -1  # the OCO list it is a leg of (-1: none)
    fills: list[dict[str, Any]] = field(default_factory=list)

    def wire(self) -> dict[str, Any]:
        """The order as GET /api/v3/order answers it."""
        return {
            "symbol": self.market_id, "orderId": self.order_id, "orderListId": self.list_id,
            "clientOrderId": self.client_id, "price": f"{self.price:f}",
            "origQty": f"{self.orig_qty:f}", "executedQty": f"{self.executed:f}",
            "cummulativeQuoteQty": f"{self.quote_done:f}", "status": self.status,
            "timeInForce": "GTC" if self.type != "MARKET" else "GTC", "type": self.type,
            "side": self.side, "stopPrice": f"{self.stop_price:f}", "icebergQty": "0.00000000",
            "time": self.time_ms, "updateTime": self.update_ms or self.time_ms,
            "isWorking": self.status in OPEN, "workingTime": self.time_ms,
            "origQuoteOrderQty": "0.00000000", "selfTradePreventionMode": "EXPIRE_MAKER",
        }


@dataclass(frozen=True, slots=True)
class SymbolRules:
    base: str
    quote: str
    tick: Decimal
    step: Decimal
    min_qty: Decimal
    min_notional: Decimal
    order_types: tuple[str, ...]
    oco_allowed: bool = True


def symbol_rules(info: Mapping[str, Any]) -> SymbolRules:
    filters = {f["filterType"]: f for f in info["filters"]}
    return SymbolRules(
        base=info["baseAsset"], quote=info["quoteAsset"],
        tick=Decimal(filters["PRICE_FILTER"]["tickSize"]).normalize(),
        step=Decimal(filters["LOT_SIZE"]["stepSize"]).normalize(),
        min_qty=Decimal(filters["LOT_SIZE"]["minQty"]),
        min_notional=Decimal(filters["NOTIONAL"]["minNotional"]),
        order_types=tuple(info["orderTypes"]),
        oco_allowed=info.get("ocoAllowed", False) in (True, "true"),
    )


class FakeBinanceAccount:
    """One spot account on the fake Binance; thread-safe (the server runs in its own thread)."""

    def __init__(
        self, state: MarketState, infos: Mapping[str, Mapping[str, Any]], shape: Shape
    ) -> None:
        self.state = state
        self.rules = {symbol: symbol_rules(info) for symbol, info in infos.items()}
        self.by_market_id = {info["symbol"]: symbol for symbol, info in infos.items()}
        self.shape = shape
        self.lock = threading.RLock()
        self.balances: dict[str, list[Decimal]] = {}
        self.orders: list[FakeOrder] = []
        self.lists: dict[int, str] = {}  # OCO lists: id -> listClientOrderId (``oco``)
        self.trades: list[dict[str, Any]] = []
        self.fill_cap: Decimal | None = None
        self.book_levels = 20
        self.hide_new_s = 0.0
        self.hide_trades_s: float | None = None
        self.check_timestamps = False
        self._next_order = 1_000_000
        self._next_trade = 5_000_000
        self.reset()

    def relist(self, symbol: str, info: Mapping[str, Any]) -> None:
        """Take ``symbol``'s rules anew from its exchangeInfo (its order types, OCO allowed)."""
        with self.lock:
            self.rules[symbol] = symbol_rules(info)

    def reset(self, balances: Mapping[str, str] | None = None) -> None:
        with self.lock:
            start = balances or {"USDT": "100000", "BTC": "0", "ETH": "0"}
            self.balances = {a: [Decimal(v), ZERO] for a, v in start.items()}
            self.orders.clear()
            self.lists.clear()
            self.trades.clear()
            self.fill_cap = None
            self.book_levels = 20
            self.hide_new_s = 0.0
            self.hide_trades_s = None
            self.check_timestamps = False

    # -- what tests read ---------------------------------------------------------------------

    def total(self, asset: str) -> Decimal:
        with self.lock:
            free, locked = self.balances.get(asset, [ZERO, ZERO])
            return free + locked

    def orders_with_client_id(self, client_id: str) -> list[FakeOrder]:
        with self.lock:
            return [o for o in self.orders if o.client_id == client_id]

    # -- the engine --------------------------------------------------------------------------

    def _now(self) -> int:
        return self.state.now.now_ms()

    def _visible(self, order: FakeOrder) -> bool:
        return self._now() >= order.time_ms + int(self.hide_new_s * 1000)

    def _trade_visible(self, trade: Mapping[str, Any]) -> bool:
        hide = self.hide_new_s if self.hide_trades_s is None else self.hide_trades_s
        order = next((o for o in self.orders if o.order_id == trade["orderId"]), None)
        return order is None or self._now() >= order.time_ms + int(hide * 1000)

    def _balance(self, asset: str) -> list[Decimal]:
        return self.balances.setdefault(asset, [ZERO, ZERO])

    def _book(self, symbol: str, side: str) -> list[tuple[Decimal, Decimal]]:
        decimals = self.state.market(symbol).decimals
        bids, asks = self.state.book(symbol, self.book_levels, self.shape, decimals)
        levels = asks if side == "BUY" else bids
        return [(Decimal(p), Decimal(q)) for p, q in levels]

    def _trade(self, order: FakeOrder, qty: Decimal, price: Decimal, maker: bool) -> None:
        rules = self.rules[order.symbol]
        quote_qty = qty * price
        base, quote = self._balance(rules.base), self._balance(rules.quote)
        if order.side == "BUY":
            fee, fee_asset = (qty * FEE).quantize(Decimal("1e-8"), ROUND_DOWN), rules.base
            spend_from_lock = min(order.locked, quote_qty)
            order.locked -= spend_from_lock
            quote[1] -= spend_from_lock
            quote[0] -= quote_qty - spend_from_lock
            base[0] += qty - fee
        else:
            fee, fee_asset = (quote_qty * FEE).quantize(Decimal("1e-8"), ROUND_DOWN), rules.quote
            from_lock = min(order.locked, qty)
            order.locked -= from_lock
            base[1] -= from_lock
            base[0] -= qty - from_lock
            quote[0] += quote_qty - fee
        self._next_trade += 1
        now = self._now()
        trade = {
            "symbol": order.market_id, "id": self._next_trade, "orderId": order.order_id,
            "orderListId": order.list_id, "price": f"{price:f}", "qty": f"{qty:f}",
            "quoteQty": f"{quote_qty:f}", "commission": f"{fee:f}", "commissionAsset": fee_asset,
            "time": now, "isBuyer": order.side == "BUY", "isMaker": maker, "isBestMatch": True,
        }
        self.trades.append(trade)
        order.fills.append({"price": f"{price:f}", "qty": f"{qty:f}", "commission": f"{fee:f}",
                            "commissionAsset": fee_asset, "tradeId": self._next_trade})
        order.executed += qty
        order.quote_done += quote_qty
        order.update_ms = now
        order.status = "FILLED" if order.executed >= order.orig_qty else "PARTIALLY_FILLED"

    def _engage(self, order: FakeOrder) -> None:
        """An OCO leg that triggers or fills: the list's other leg expires, its coins (locked
        once for the list) now this leg's."""
        if order.list_id < 0:
            return
        for other in self.orders:
            if other.list_id == order.list_id and other is not order and other.status in OPEN:
                order.locked += other.locked
                other.locked = ZERO
                other.status = "EXPIRED"
                other.update_ms = self._now()

    def _release(self, order: FakeOrder) -> None:
        if order.locked:
            rules = self.rules[order.symbol]
            asset = self._balance(rules.quote if order.side == "BUY" else rules.base)
            asset[1] -= order.locked
            asset[0] += order.locked
            order.locked = ZERO

    def _take(self, order: FakeOrder, limit: Decimal | None, quote_budget: Decimal | None) -> None:
        """Fill ``order`` against the book, best level first, up to ``limit`` (a price bound)."""
        step = self.rules[order.symbol].step
        remaining_quote = quote_budget
        for price, size in self._book(order.symbol, order.side):
            if limit is not None and (price > limit if order.side == "BUY" else price < limit):
                break
            want = order.orig_qty - order.executed
            if remaining_quote is not None:
                want = (remaining_quote / price / step).to_integral_value(ROUND_DOWN) * step
            qty = min(want, size)
            if self.fill_cap is not None:
                qty = min(qty, self.fill_cap)
            if qty <= 0:
                break
            self._trade(order, qty, price, maker=False)
            if remaining_quote is not None:
                remaining_quote -= qty * price
            if order.status == "FILLED" or self.fill_cap is not None:
                break

    def match(self) -> None:
        """Fill resting orders the tape's last price has crossed (once per fake minute each)."""
        with self.lock:
            minute = self._now() // MINUTE
            for order in self.orders:
                if order.status not in OPEN or order.type == "MARKET":
                    continue
                if order.last_match_minute == minute:
                    continue
                last = Decimal(str(self.state.last(order.symbol)))
                if order.type == "STOP_LOSS_LIMIT" and not order.triggered:
                    touched = last <= order.stop_price if order.side == "SELL" else (
                        last >= order.stop_price)
                    if not touched:
                        continue
                    order.triggered = True
                    self._engage(order)
                crossed = last <= order.price if order.side == "BUY" else last >= order.price
                if not crossed:
                    continue
                order.last_match_minute = minute
                self._engage(order)
                qty = order.orig_qty - order.executed
                if self.fill_cap is not None:
                    qty = min(qty, self.fill_cap)
                self._trade(order, qty, order.price, maker=True)
                if order.status == "FILLED":
                    self._release(order)

    # -- requests ----------------------------------------------------------------------------

    def check_time(self, params: Mapping[str, str]) -> None:
        if not self.check_timestamps:
            return
        stamp = int(params.get("timestamp", "0"))
        window = int(params.get("recvWindow", "5000"))
        now = self._now()
        if stamp > now + 1000 or now - stamp > window:
            raise Refused(400, -1021, "Timestamp for this request is outside of the recvWindow.")

    def _symbol(self, params: Mapping[str, str]) -> str:
        symbol = self.by_market_id.get(params.get("symbol", ""))
        if symbol is None:
            raise Refused(400, -1121, "Invalid symbol.")
        return symbol

    def create(self, params: Mapping[str, str]) -> dict[str, Any]:
        """POST /api/v3/order: check, book, match what crosses; the FULL answer."""
        with self.lock:
            self.match()
            symbol = self._symbol(params)
            rules = self.rules[symbol]
            side, kind = params.get("side", ""), params.get("type", "")
            client_id = params.get("newClientOrderId", "")
            if kind not in rules.order_types:
                raise Refused(400, -2010, UNSUPPORTED.get(kind, "Unsupported order combination"))
            if any(o.client_id == client_id and o.status in OPEN for o in self.orders):
                raise Refused(400, -2010, "Duplicate order sent.")
            price = Decimal(params.get("price", "0"))
            stop = Decimal(params.get("stopPrice", "0"))
            quote_qty = Decimal(params["quoteOrderQty"]) if "quoteOrderQty" in params else None
            qty = Decimal(params.get("quantity", "0"))
            last = Decimal(str(self.state.last(symbol)))
            if kind in ("STOP_LOSS", "STOP_LOSS_LIMIT") and (
                    stop <= 0 or (stop >= last if side == "SELL" else stop <= last)):
                raise Refused(400, -2010, "Order would trigger immediately.")
            if kind == "STOP_LOSS_LIMIT" and (price <= 0 or "timeInForce" not in params):
                raise Refused(400, -1102, "Mandatory parameter 'price' or 'timeInForce' was "
                              "not sent, was empty/null, or malformed.")
            if quote_qty is None:
                if qty % rules.step != 0 or qty < rules.min_qty:
                    raise Refused(400, -1013, "Filter failure: LOT_SIZE")
                if kind != "MARKET" and price % rules.tick != 0:
                    raise Refused(400, -1013, "Filter failure: PRICE_FILTER")
                if qty * (price if kind != "MARKET" else last) < rules.min_notional:
                    raise Refused(400, -1013, "Filter failure: NOTIONAL")
            self._check_funds(rules, side, kind, qty, price, last, quote_qty)
            self._next_order += 1
            order = FakeOrder(
                order_id=self._next_order, client_id=client_id, symbol=symbol,
                market_id=params["symbol"], side=side, type=kind, price=price, stop_price=stop,
                orig_qty=qty if quote_qty is None else ZERO, time_ms=self._now(),
            )
            self.orders.append(order)
            if kind == "MARKET":
                if quote_qty is not None:
                    order.orig_qty = (quote_qty / last / rules.step).to_integral_value(
                        ROUND_DOWN) * rules.step
                self._take(order, None, quote_qty)
                if order.status != "FILLED":
                    order.status = "EXPIRED"  # the book could not fill the rest
            else:
                self._lock_funds(order, rules)
                if kind == "LIMIT":
                    self._take(order, price, None)
                if order.status == "FILLED":
                    self._release(order)
            out = order.wire()
            out.update(transactTime=order.time_ms, fills=list(order.fills))
            return out

    def _check_funds(self, rules: SymbolRules, side: str, kind: str, qty: Decimal,
                     price: Decimal, last: Decimal, quote_qty: Decimal | None) -> None:
        if side == "BUY":
            needed = quote_qty if quote_qty is not None else qty * (
                price if kind != "MARKET" else last * Decimal("1.01"))
            have = self._balance(rules.quote)[0]
        else:
            needed, have = qty, self._balance(rules.base)[0]
        if needed > have:
            raise Refused(400, -2010, "Account has insufficient balance for requested action.")

    def _lock_funds(self, order: FakeOrder, rules: SymbolRules) -> None:
        if order.side == "BUY":
            amount, asset = order.orig_qty * order.price, self._balance(rules.quote)
        else:
            amount, asset = order.orig_qty, self._balance(rules.base)
        asset[0] -= amount
        asset[1] += amount
        order.locked = amount

    def _find(self, params: Mapping[str, str]) -> FakeOrder:
        symbol = self._symbol(params)
        order_id, client_id = params.get("orderId"), params.get("origClientOrderId")
        for order in reversed(self.orders):  # the newest with a reused client id
            if order.symbol != symbol or not self._visible(order):
                continue
            if (order_id is not None and str(order.order_id) == order_id) or (
                order_id is None and client_id is not None and order.client_id == client_id
            ):
                return order
        raise Refused(400, -2013, "Order does not exist.")

    def get(self, params: Mapping[str, str]) -> dict[str, Any]:
        with self.lock:
            self.match()
            return self._find(params).wire()

    def cancel(self, params: Mapping[str, str]) -> dict[str, Any]:
        with self.lock:
            self.match()
            try:
                order = self._find(params)
            except Refused:
                raise Refused(400, -2011, "Unknown order sent.") from None
            if order.status not in OPEN:
                raise Refused(400, -2011, "Unknown order sent.")
            legs = [order] if order.list_id < 0 else [
                o for o in self.orders if o.list_id == order.list_id and o.status in OPEN]
            for leg in legs:  # cancelling one leg of an OCO list cancels the list
                leg.status = "CANCELED"
                leg.update_ms = self._now()
                self._release(leg)
            out = order.wire()
            out["origClientOrderId"] = order.client_id
            return out

    def cancel_replace(self, params: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """POST /api/v3/order/cancelReplace with ``STOP_ON_FAILURE``, as Binance answers it:
        the order named by ``cancelOrderId`` (or ``cancelOrigClientOrderId``) is cancelled and
        the new one placed in the same request; a failed cancel places nothing (-2022), a new
        order refused after the cancel leaves the old one cancelled (-2021), each with what
        became of both parts in ``data``."""
        with self.lock:
            self.match()
            found = {"symbol": params.get("symbol", "")}
            if "cancelOrderId" in params:
                found["orderId"] = params["cancelOrderId"]
            else:
                found["origClientOrderId"] = params.get("cancelOrigClientOrderId", "")
            try:
                cancelled = self.cancel(found)
            except Refused as refused:
                return 400, {"code": -2022, "msg": "Order cancel-replace failed.", "data": {
                    "cancelResult": "FAILURE", "newOrderResult": "NOT_ATTEMPTED",
                    "cancelResponse": {"code": refused.code, "msg": refused.msg},
                    "newOrderResponse": None}}
            new = {k: v for k, v in params.items()
                   if not k.startswith("cancel") and k != "cancelReplaceMode"}
            try:
                placed = self.create(new)
            except Refused as refused:
                return 400, {"code": -2021, "msg": "Order cancel-replace partially failed.",
                             "data": {"cancelResult": "SUCCESS", "newOrderResult": "FAILURE",
                                      "cancelResponse": cancelled,
                                      "newOrderResponse": {"code": refused.code,
                                                           "msg": refused.msg}}}
            return 200, {"cancelResult": "SUCCESS", "newOrderResult": "SUCCESS",
                         "cancelResponse": cancelled, "newOrderResponse": placed}

    def open_orders(self, params: Mapping[str, str]) -> list[dict[str, Any]]:
        with self.lock:
            self.match()
            symbol = self._symbol(params) if "symbol" in params else None
            return [o.wire() for o in self.orders if o.status in OPEN and self._visible(o)
                    and (symbol is None or o.symbol == symbol)]

    def all_orders(self, params: Mapping[str, str]) -> list[dict[str, Any]]:
        with self.lock:
            self.match()
            symbol = self._symbol(params)
            start = int(params.get("startTime", "0"))
            limit = int(params.get("limit", "500"))
            found = [o.wire() for o in self.orders if o.symbol == symbol and self._visible(o)
                     and o.time_ms >= start]
            return found[-limit:]

    def my_trades(self, params: Mapping[str, str]) -> list[dict[str, Any]]:
        with self.lock:
            self.match()
            symbol = self._symbol(params)
            market_id = params["symbol"]
            limit = min(int(params.get("limit", "500")), 1000)
            found = [t for t in self.trades
                     if t["symbol"] == market_id and self._trade_visible(t)]
            if "fromId" in params:
                found = [t for t in found if t["id"] >= int(params["fromId"])]
                return found[:limit]
            if "startTime" in params:
                found = [t for t in found if t["time"] >= int(params["startTime"])]
                return found[:limit]
            if "orderId" in params:
                found = [t for t in found if str(t["orderId"]) == params["orderId"]]
            del symbol
            return found[-limit:]

    def account(self) -> dict[str, Any]:
        with self.lock:
            self.match()
            return {
                "makerCommission": 10, "takerCommission": 10, "buyerCommission": 0,
                "sellerCommission": 0, "canTrade": True, "canWithdraw": True,
                "canDeposit": True, "updateTime": self._now(), "accountType": "SPOT",
                "balances": [{"asset": a, "free": f"{v[0]:f}", "locked": f"{v[1]:f}"}
                             for a, v in sorted(self.balances.items())],
                "permissions": ["SPOT"],
            }
