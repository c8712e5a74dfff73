"""Blind mode: the agents see a market they cannot recognise; their orders execute for real.

Why: a language model asked to trade BTC/USDT in October 2019 may remember what happened next. A
blind venue wraps a replay's ports so that everything above them (tools, task data, memory
stamps, prompts, events) sees one consistent disguise:

- each symbol becomes a neutral name (``ASSET1/QUOTE``; its assets ``ASSET1`` and ``QUOTE``);
- times are shifted by a whole number of weeks to a 1971 epoch (candles stay aligned to their
  intervals, gaps and bar offsets are unchanged);
- prices are multiplied by a fixed factor and base quantities divided by it, so every value in
  the quote currency (cash, equity, notional, P&L, fees) is unchanged and the Risk Guard's limits
  mean what they say.

Orders placed in blind terms are mapped back (symbol, quantity, prices) and executed by the real
paper broker, whose ledger keeps real terms, so the report of a blind backtest is in real terms.
The factor is a product of powers of 2 and 5, so both directions are exact in ``Decimal``.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from app.domain.errors import KestrelError, NotFoundError, ToolError
from app.domain.market import BookLevel, OrderBook, Ticker
from app.domain.market_rules import MarketRules
from app.domain.risk_view import PositionView, RiskView
from app.domain.trading import AccountState, AssetBalance, Fill, Order, Position
from app.events import Event, EventSink, OrderCancelled, OrderFilled, OrderPlaced, OrderRejected
from app.market.port import MarketData, PrefixSource
from app.market.series import KlineSeries
from app.trading.port import (
    BrokerAbilities,
    CheckedOrder,
    EquityPoint,
    OrderRequest,
    OwnedLot,
    Placement,
    TradingBroker,
)

WEEK_MS = 7 * 86_400_000
# blind time of the first candle: 1971-01-07 (a whole number of weeks after the Unix epoch)
BLIND_START_MS = 53 * WEEK_MS
PRICE_FACTOR = Decimal("0.032")  # 4/125: prices x 0.032, base quantities x 31.25
QUOTE = "QUOTE"


def _split(symbol: str) -> tuple[str, str]:
    base, _, quote = symbol.partition("/")
    return base, quote


@dataclass
class BlindMap:
    """The disguise: real <-> blind symbols, assets, times, prices and quantities.

    ``bind`` fills it from the real market once it is open (events can only come after).
    """

    factor: Decimal = PRICE_FACTOR
    shift_ms: int = 0
    symbols: dict[str, str] = dataclasses.field(default_factory=dict)  # real -> blind
    assets: dict[str, str] = dataclasses.field(default_factory=dict)  # real -> blind

    def bind(self, market: MarketData, start_ms: int) -> None:
        self.shift_ms = (start_ms // WEEK_MS) * WEEK_MS - BLIND_START_MS
        for number, real in enumerate(sorted(market.symbols()), start=1):
            base, quote = _split(real)
            self.assets.setdefault(quote, QUOTE)
            self.assets.setdefault(base, f"ASSET{number}")
            self.symbols[real] = f"{self.assets[base]}/{self.assets[quote]}"

    @property
    def price_digits(self) -> int:
        return max(-self.factor.as_tuple().exponent, 0)  # type: ignore[operator]

    # -- real -> blind -------------------------------------------------------------------------

    def symbol(self, real: str) -> str:
        return self.symbols.get(real, real)

    def asset(self, real: str) -> str:
        return self.assets.get(real, real)

    def time(self, real_ms: int) -> int:
        return real_ms - self.shift_ms

    def price(self, real: Decimal) -> Decimal:
        return real * self.factor

    def qty(self, real: Decimal) -> Decimal:
        return real / self.factor

    def text(self, text: str) -> str:
        """Real symbol and asset names in a message (an error's) replaced by the blind ones."""
        for real, blind in sorted(self.symbols.items(), key=lambda kv: -len(kv[0])):
            (base, quote), (shown_base, shown_quote) = _split(real), _split(blind)
            for joint in ("/", "-", "_", ""):  # BTC/USDT, BTC-USDT, BTC_USDT, BTCUSDT
                text = text.replace(f"{base}{joint}{quote}", f"{shown_base}{joint}{shown_quote}")
        for real, blind in sorted(self.assets.items(), key=lambda kv: -len(kv[0])):
            text = re.sub(rf"\b{re.escape(real)}\b", blind, text)
        return text

    # -- blind -> real -------------------------------------------------------------------------

    def real_symbol(self, blind: str) -> str:
        """The real symbol of a blind name (any case); NOT_FOUND lists the blind names."""
        wanted = blind.strip().upper()
        for real, shown in self.symbols.items():
            if shown == wanted:
                return real
        raise NotFoundError(
            f"Unknown symbol {blind!r}. Tradable symbols: {', '.join(self.symbols.values())}.",
            details={"parameter": "symbol", "symbol": blind,
                     "available": list(self.symbols.values())},
        )

    def real_time(self, blind_ms: int) -> int:
        return blind_ms + self.shift_ms

    def real_price(self, blind: Decimal | None) -> Decimal | None:
        return None if blind is None else blind / self.factor

    def real_qty(self, blind: Decimal) -> Decimal:
        return blind * self.factor

    # -- domain values -------------------------------------------------------------------------

    def series(self, s: KlineSeries) -> KlineSeries:
        f = float(self.factor)
        return KlineSeries(
            symbol=self.symbol(s.symbol), interval=s.interval,
            timestamp_ms=s.timestamp_ms - self.shift_ms, open=s.open * f, high=s.high * f,
            low=s.low * f, close=s.close * f, volume=s.volume / f, last_complete=s.last_complete,
        )

    def order(self, o: Order) -> Order:
        blind = replace(o)  # Order is mutable: never change the broker's own
        blind.symbol = self.symbol(o.symbol)
        blind.quantity = self.qty(o.quantity)
        blind.filled_quantity = self.qty(o.filled_quantity)
        blind.price = None if o.price is None else self.price(o.price)
        blind.stop_price = None if o.stop_price is None else self.price(o.stop_price)
        blind.average_price = None if o.average_price is None else self.price(o.average_price)
        blind.fee_currency = self.asset(o.fee_currency)
        blind.fee = self.qty(o.fee) if o.fee_currency != self._quote_real() else o.fee
        blind.created_ms = self.time(o.created_ms)
        blind.updated_ms = self.time(o.updated_ms) if o.updated_ms else 0
        blind.reason = self.text(o.reason)
        return blind

    def fill(self, f: Fill) -> Fill:
        return replace(
            f, symbol=self.symbol(f.symbol), quantity=self.qty(f.quantity),
            price=self.price(f.price), fee_currency=self.asset(f.fee_currency),
            fee=self.qty(f.fee) if f.fee_currency != self._quote_real() else f.fee,
            time_ms=self.time(f.time_ms),
        )

    def position(self, p: Position) -> Position:
        return replace(p, symbol=self.symbol(p.symbol), size=self.qty(p.size),
                       avg_price=self.price(p.avg_price), current_price=self.price(p.current_price))

    def balance(self, b: AssetBalance) -> AssetBalance:
        if b.currency == self._quote_real():
            return replace(b, currency=QUOTE)
        return replace(b, currency=self.asset(b.currency), free=self.qty(b.free),
                       used=self.qty(b.used))

    def _quote_real(self) -> str:
        return next((real for real, blind in self.assets.items() if blind == QUOTE), "")

    def event(self, event: Event) -> Event:
        """An order event as the agents' world sees it; other events unchanged."""
        if isinstance(event, OrderFilled):
            return replace(event, fill=self.fill(event.fill), order=self.order(event.order))
        if isinstance(event, OrderPlaced | OrderCancelled):
            return replace(event, order=self.order(event.order))
        if isinstance(event, OrderRejected):
            return replace(event, symbol=self.symbol(event.symbol),
                           quantity=self.qty(event.quantity), reason=self.text(event.reason),
                           time_ms=self.time(event.time_ms))
        return event

    def sink(self, inner: EventSink | None) -> EventSink | None:
        if inner is None:
            return None

        def publish(event: Event) -> None:
            inner(self.event(event))

        return publish


class ShiftedClock:
    """The venue's clock as the agents see it: the same instant, shifted to the blind epoch."""

    def __init__(self, inner: Any, blind: BlindMap) -> None:
        self._inner = inner
        self._blind = blind

    def now_ms(self) -> int:
        return self._blind.time(self._inner.now_ms())


class BlindDriver:
    """The real driver (it moves the real clock with real times); the services it runs after
    each settle (the scheduler) are told the blind time, as their clock says."""

    def __init__(self, inner: Any, blind: BlindMap) -> None:
        self._inner = inner
        self._blind = blind

    @property
    def speed(self) -> float:
        return float(self._inner.speed)

    @speed.setter
    def speed(self, value: float) -> None:
        self._inner.speed = value

    @property
    def paused(self) -> bool:
        return bool(self._inner.paused)

    @paused.setter
    def paused(self, value: bool) -> None:
        self._inner.paused = value

    def on_advance(self, service: Callable[[int], object]) -> None:
        self._inner.on_advance(lambda now_ms: service(self._blind.time(now_ms)))

    def advance_to(self, now_ms: int) -> int:
        return int(self._inner.advance_to(now_ms))

    def set_speed(self, speed: float) -> None:
        self._inner.set_speed(speed)

    def step_once(self, step_ms: int) -> int:
        return int(self._inner.step_once(step_ms))

    async def run_paced(
        self, end_ms: int | None = None, *, tick_s: float = 0.1, max_step_ms: int | None = None
    ) -> None:
        await self._inner.run_paced(end_ms, tick_s=tick_s, max_step_ms=max_step_ms)


def _renamed(blind: BlindMap, exc: KestrelError) -> KestrelError:
    """A tool error of the real broker or market with the real names replaced by blind ones
    (and its list of real symbols left out); other errors are not shown to agents as written."""
    if not isinstance(exc, ToolError):
        return exc
    clone = copy.copy(exc)
    clone.message = blind.text(exc.message)
    clone.args = (clone.message,)
    clone.details = {
        key: blind.text(value) if isinstance(value, str) else value
        for key, value in exc.details.items() if key != "available"
    }
    return clone


class BlindMarket:
    """``MarketData`` in blind terms over the real one."""

    def __init__(self, inner: MarketData, blind: BlindMap) -> None:
        self._inner = inner
        self._blind = blind

    def now_ms(self) -> int:
        return self._blind.time(self._inner.now_ms())

    def symbols(self) -> tuple[str, ...]:
        return tuple(self._blind.symbol(s) for s in self._inner.symbols())

    def intervals(self, symbol: str) -> tuple[str, ...]:
        return self._inner.intervals(self._blind.real_symbol(symbol))

    def price_decimals(self, symbol: str) -> int:
        real = self._inner.price_decimals(self._blind.real_symbol(symbol))
        return real + self._blind.price_digits

    async def series(self, symbol: str, interval: str) -> KlineSeries:
        real = await self._call(self._inner.series(self._blind.real_symbol(symbol), interval))
        return self._blind.series(real)

    async def ticker(self, symbol: str) -> Ticker:
        t = await self._call(self._inner.ticker(self._blind.real_symbol(symbol)))
        b = self._blind
        return replace(t, symbol=b.symbol(t.symbol), timestamp_ms=b.time(t.timestamp_ms),
                       last_price=b.price(t.last_price), high_24h=b.price(t.high_24h),
                       low_24h=b.price(t.low_24h), volume_24h=b.qty(t.volume_24h))

    async def order_book(self, symbol: str, limit: int) -> OrderBook:
        book = await self._call(self._inner.order_book(self._blind.real_symbol(symbol), limit))
        b = self._blind

        def levels(side: tuple[BookLevel, ...]) -> tuple[BookLevel, ...]:
            return tuple(BookLevel(b.price(x.price), b.qty(x.quantity)) for x in side)

        return replace(book, symbol=b.symbol(book.symbol), timestamp_ms=b.time(book.timestamp_ms),
                       bids=levels(book.bids), asks=levels(book.asks))

    def prefix_source(self, symbol: str, interval: str) -> PrefixSource | None:
        return None  # the indicator engine then computes on the (blind) visible series

    async def _call(self, pending: Any) -> Any:
        try:
            return await pending
        except KestrelError as exc:
            raise _renamed(self._blind, exc) from None


class BlindBroker:
    """``TradingBroker`` in blind terms over the real paper broker: what it answers is
    disguised, what it is asked (orders, cancels, lookups) is mapped back first."""

    def __init__(self, inner: TradingBroker, blind: BlindMap) -> None:
        self._inner = inner
        self._b = blind
        self.mode = inner.mode

    @property
    def quote_currency(self) -> str:
        return self._b.asset(self._inner.quote_currency)

    def _real(self, symbol: str | None) -> str | None:
        return None if symbol is None else self._b.real_symbol(symbol)

    def _request(self, req: OrderRequest) -> OrderRequest:
        b = self._b
        return replace(req, symbol=b.real_symbol(req.symbol), quantity=b.real_qty(req.quantity),
                       price=b.real_price(req.price), stop_price=b.real_price(req.stop_price))

    async def _call(self, pending: Any) -> Any:
        try:
            return await pending
        except KestrelError as exc:
            raise _renamed(self._b, exc) from None

    def _sync(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except KestrelError as exc:
            raise _renamed(self._b, exc) from None

    async def create_order(self, req: OrderRequest) -> Order:
        return self._b.order(await self._call(self._inner.create_order(self._request(req))))

    async def cancel_order(
        self, agent_id: str, symbol: str, order_id: str | None = None,
        client_order_id: str | None = None,
    ) -> Order:
        real = self._b.real_symbol(symbol)
        order = await self._call(self._inner.cancel_order(agent_id, real, order_id,
                                                          client_order_id))
        return self._b.order(order)

    async def get_order(self, agent_id: str, symbol: str, order_id: str) -> Order:
        real = self._b.real_symbol(symbol)
        return self._b.order(await self._call(self._inner.get_order(agent_id, real, order_id)))

    async def open_orders(
        self, agent_id: str | None = None, symbol: str | None = None
    ) -> list[Order]:
        orders = await self._call(self._inner.open_orders(agent_id, self._real(symbol)))
        return [self._b.order(o) for o in orders]

    async def account(self) -> AccountState:
        a = await self._call(self._inner.account())
        b = self._b
        return replace(a, quote_currency=b.asset(a.quote_currency),
                       assets=tuple(b.balance(x) for x in a.assets),
                       positions=tuple(b.position(p) for p in a.positions),
                       open_orders=tuple(b.order(o) for o in a.open_orders))

    async def positions(self, symbol: str | None = None) -> list[Position]:
        found = await self._call(self._inner.positions(self._real(symbol)))
        return [self._b.position(p) for p in found]

    async def trades(self, symbol: str | None = None, limit: int | None = 20) -> list[Fill]:
        found = await self._call(self._inner.trades(self._real(symbol), limit))
        return [self._b.fill(f) for f in found]

    async def equity_curve(self, from_ms: int = -1) -> list[EquityPoint]:
        start = from_ms if from_ms < 0 else self._b.real_time(from_ms)
        points = await self._call(self._inner.equity_curve(start))
        return [replace(p, time_ms=self._b.time(p.time_ms)) for p in points]

    def risk_view(self) -> RiskView:
        v = self._inner.risk_view()
        b = self._b
        return replace(
            v, now_ms=b.time(v.now_ms), quote_currency=b.asset(v.quote_currency),
            positions={b.symbol(s): PositionView(b.qty(p.size), b.price(p.avg_price),
                                                 b.price(p.last_price))
                       for s, p in v.positions.items()},
            pending=tuple(replace(p, symbol=b.symbol(p.symbol)) for p in v.pending),
        )

    def canonical_symbol(self, symbol: str) -> str:
        real = self._b.real_symbol(symbol)
        return self._b.symbol(self._sync(lambda: self._inner.canonical_symbol(real)))

    def market_rules(self, symbol: str) -> MarketRules:
        rules = self._sync(lambda: self._inner.market_rules(self._b.real_symbol(symbol)))
        b = self._b
        return replace(rules, symbol=b.symbol(rules.symbol), tick=b.price(rules.tick),
                       step=b.qty(rules.step), min_amount=b.qty(rules.min_amount))

    async def last_price(self, symbol: str) -> Decimal:
        real = self._b.real_symbol(symbol)
        return self._b.price(await self._call(self._inner.last_price(real)))

    def find_order(self, agent_id: str, client_order_id: str) -> Order | None:
        found = self._inner.find_order(agent_id, client_order_id)
        return None if found is None else self._b.order(found)

    def position_size(self, symbol: str) -> Decimal:
        return self._b.qty(self._inner.position_size(self._b.real_symbol(symbol)))

    async def precheck(self, req: OrderRequest, *, released: Decimal = Decimal(0)) -> CheckedOrder:
        checked = await self._call(self._inner.precheck(
            self._request(req), released=self._b.real_qty(released)))
        b = self._b
        return replace(checked, symbol=b.symbol(checked.symbol), quantity=b.qty(checked.quantity),
                       reference_price=b.price(checked.reference_price))

    def abilities(self, symbol: str) -> BrokerAbilities:
        return self._sync(lambda: self._inner.abilities(self._b.real_symbol(symbol)))

    async def placement(self, agent_id: str, client_order_id: str) -> Placement:
        found = await self._call(self._inner.placement(agent_id, client_order_id))
        order = None if found.order is None else self._b.order(found.order)
        return replace(found, order=order, detail=self._b.text(found.detail))

    async def lots(self, symbol: str) -> list[OwnedLot]:
        found = await self._call(self._inner.lots(self._b.real_symbol(symbol)))
        return [replace(lot, symbol=self._b.symbol(lot.symbol), size=self._b.qty(lot.size))
                for lot in found]

    def check_oco(self, take_profit: OrderRequest, stop_loss: OrderRequest) -> None:
        self._sync(lambda: self._inner.check_oco(self._request(take_profit),
                                                 self._request(stop_loss)))

    async def create_oco(
        self, take_profit: OrderRequest, stop_loss: OrderRequest
    ) -> tuple[Order, Order]:
        tp, sl = await self._call(self._inner.create_oco(self._request(take_profit),
                                                         self._request(stop_loss)))
        return self._b.order(tp), self._b.order(sl)


__all__ = ["BlindBroker", "BlindDriver", "BlindMap", "BlindMarket", "ShiftedClock"]


def blind_venue(open_inner: Callable[[EventSink | None], Any], events: EventSink | None) -> Any:
    """Open the real venue (its broker announcing through the disguise) and wrap its ports."""
    from app.runtime.venue import Venue

    blind = BlindMap()
    real = open_inner(blind.sink(events))
    history = real.history
    if history is None:
        raise ValueError("blind mode runs on a replay's history")
    blind.bind(history, history.start_ms())
    return Venue(
        real.kind, f"{real.label} (blind)", ShiftedClock(real.clock, blind),
        BlindMarket(real.market, blind), BlindBroker(real.broker, blind),
        BlindDriver(real.driver, blind), end_ms=real.end_ms, bar_ms=real.bar_ms,
        history=history, closers=real.closers, reconfigure=real.reconfigure,
        account=real.broker, blind=blind,
    )
