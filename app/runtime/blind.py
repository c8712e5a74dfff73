"""Blind mode: the agents see a market they cannot recognise; their orders execute for real.

Why: a language model asked to trade BTC/USDT in October 2019 may remember what happened next. A
blind venue wraps a replay's ports (clock, driver, market data, broker) so that everything above
them (tools, task data, memory stamps, prompts, events) sees one consistent disguise, the one
``app.runtime.blind_map`` defines: neutral names, shifted times, rescaled prices and quantities.

Orders placed in blind terms are mapped back (symbol, quantity, prices) and executed by the real
paper broker, whose ledger keeps real terms, so the report of a blind backtest is in real terms.

The Risk Guard judges a blind order in real terms (``BlindGuard``: the person's limits and the
audit trail are in real terms), and every message that comes back from the real side (the
broker's and the guard's refusals, their details, an order's reason) is retold in blind terms.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from app.domain.errors import KestrelError, RiskRejection
from app.domain.market import BookLevel, OrderBook, Ticker
from app.domain.market_rules import MarketRules
from app.domain.risk_view import PositionView, RiskView
from app.domain.trading import AccountState, Fill, Order, Position
from app.events import EventSink
from app.exchange.validation import check_request
from app.market.port import MarketData, PrefixSource
from app.market.series import KlineSeries
from app.risk.guard import Violation
from app.risk.types import OrderIntent
from app.runtime.blind_map import BlindMap, Terms
from app.trading.entry import Guard
from app.trading.port import (
    BrokerAbilities,
    CheckedOrder,
    EquityPoint,
    OrderRequest,
    OwnedLot,
    Placement,
    TradingBroker,
)

if TYPE_CHECKING:
    from app.runtime.venue import Venue


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

    @property
    def last_error(self) -> str | None:
        failed: str | None = self._inner.last_error
        return failed

    @property
    def held(self) -> str | None:
        held: str | None = self._inner.held
        return held

    def on_advance(self, service: Callable[[int], object]) -> None:
        self._inner.on_advance(lambda now_ms: service(self._blind.time(now_ms)))

    def advance_to(self, now_ms: int) -> int:
        return int(self._inner.advance_to(now_ms))

    def set_speed(self, speed: float) -> None:
        self._inner.set_speed(speed)

    def step_once(self, step_ms: int) -> int:
        return int(self._inner.step_once(step_ms))

    async def run_paced(
        self, end_ms: int | None = None, *, tick_s: float = 0.1, max_step_ms: int | None = None,
        settle: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        await self._inner.run_paced(end_ms, tick_s=tick_s, max_step_ms=max_step_ms,
                                    settle=settle)


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

    async def _call[T](self, pending: Awaitable[T]) -> T:
        try:
            return await pending
        except KestrelError as exc:
            raise self._blind.retold(exc) from None


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
        """``req`` in real terms on the real market's grid (module docstring). Its numbers and
        fields are checked first, as asked: a refusal then quotes the agent's own values."""
        check_request(req)
        b = self._b
        symbol = b.real_symbol(req.symbol)
        rules = self._sync(lambda: self._inner.market_rules(symbol))
        quantity = req.quantity if req.quote_amount is not None else b.real_qty_on(
            req.quantity, rules)
        return replace(req, symbol=symbol, quantity=quantity,
                       price=b.real_price_on(req.price, rules, req.side),
                       stop_price=b.real_price_on(req.stop_price, rules, req.side))

    async def _call[T](self, pending: Awaitable[T]) -> T:
        try:
            return await pending
        except KestrelError as exc:
            raise self._b.retold(exc) from None

    def _sync[T](self, call: Callable[[], T]) -> T:
        try:
            return call()
        except KestrelError as exc:
            raise self._b.retold(exc) from None

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
        real = self._request(req)
        checked = await self._call(self._inner.precheck(
            real, released=self._b.real_qty(released)))
        b = self._b
        # a note says how the order will be sent (a stop as a stop-limit, at what limit)
        told = b.retell(checked.note, Terms.of(
            (real.price, real.stop_price, checked.reference_price), (checked.quantity,)))
        return replace(checked, symbol=b.symbol(checked.symbol), quantity=b.qty(checked.quantity),
                       reference_price=b.price(checked.reference_price), note=told)

    def abilities(self, symbol: str) -> BrokerAbilities:
        return self._sync(lambda: self._inner.abilities(self._b.real_symbol(symbol)))

    async def placement(self, agent_id: str, client_order_id: str) -> Placement:
        found = await self._call(self._inner.placement(agent_id, client_order_id))
        order = None if found.order is None else self._b.order(found.order)
        return replace(found, order=order, detail=self._b.retell(found.detail))

    async def lots(self, symbol: str) -> list[OwnedLot]:
        found = await self._call(self._inner.lots(self._b.real_symbol(symbol)))
        return [replace(lot, symbol=self._b.symbol(lot.symbol), size=self._b.qty(lot.size))
                for lot in found]

    async def replace_order(
        self, agent_id: str, symbol: str, order_id: str, req: OrderRequest
    ) -> Order:
        real = self._b.real_symbol(symbol)
        return self._b.order(await self._call(self._inner.replace_order(
            agent_id, real, order_id, self._request(req))))

    def check_oco(self, take_profit: OrderRequest, stop_loss: OrderRequest) -> None:
        tp, sl = self._request(take_profit), self._request(stop_loss)
        self._sync(lambda: self._inner.check_oco(tp, sl))

    async def create_oco(
        self, take_profit: OrderRequest, stop_loss: OrderRequest
    ) -> tuple[Order, Order]:
        tp, sl = self._request(take_profit), self._request(stop_loss)
        placed = await self._call(self._inner.create_oco(tp, sl))
        return self._b.order(placed[0]), self._b.order(placed[1])


class BlindGuard:
    """The Risk Guard in front of a blind venue's order entry: it judges each order in real
    terms, against the real account, and its refusals reach the agent in blind terms.

    Why real terms: the person's limits are written for the real market (an allowed symbol is
    a real name), and the audit trail of decisions is read beside the real ledger. Order entry
    hands this guard the blind intent and view; the intent is mapped back as its order will be
    (the same grid, ``BlindBroker``), and the view is the real broker's own.
    """

    def __init__(self, inner: Guard, blind: BlindMap, account: TradingBroker) -> None:
        self._inner = inner
        self._b = blind
        self._account = account

    def _real(self, intent: OrderIntent) -> OrderIntent:
        b = self._b
        symbol = b.real_symbol(intent.symbol)
        rules = self._account.market_rules(symbol)
        return replace(
            intent, symbol=symbol, quantity=b.real_qty_on(intent.quantity, rules),
            reference_price=intent.reference_price / b.factor,
            price=b.real_price_on(intent.price, rules, intent.side),
            stop_price=b.real_price_on(intent.stop_price, rules, intent.side),
        )

    @contextlib.contextmanager
    def admit(self, intent: OrderIntent, view: RiskView) -> Iterator[None]:
        real = self._real(intent)
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(self._inner.admit(real, self._account.risk_view()))
            except RiskRejection as exc:
                raise self._b.retold(exc) from None
            yield

    def preview(self, intent: OrderIntent, view: RiskView) -> tuple[str, Violation] | None:
        real = self._real(intent)
        verdict = self._inner.preview(real, self._account.risk_view())
        if verdict is None:
            return None
        rule, violation = verdict
        told = self._b.retold(RiskRejection(rule, violation.reason, violation.details))
        assert isinstance(told, RiskRejection)
        return rule, Violation(told.reason, told.details)

    def refuse(self, intent: OrderIntent, view: RiskView, rule: str, reason: str) -> None:
        self._inner.refuse(self._real(intent), self._account.risk_view(), rule, reason)


__all__ = ["BlindBroker", "BlindDriver", "BlindGuard", "BlindMarket", "ShiftedClock"]


def blind_venue(open_inner: Callable[[EventSink | None], Venue], events: EventSink | None
                ) -> Venue:
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
