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

Mapped back, a value is put on the real market's grid: a price on the real tick (a buy's rounded
down, a sell's up: never paying more nor selling for less than asked, and a stop loss triggering
no later than asked), a quantity down to the real step. Why not give the model the blind tick and
step instead: they are odd numbers (a tick of 0.01 is 0.00032 blind, a step of 0.000001 is
0.00003125), a model rounds to the decimals it sees, and every such price would be refused; the
adjustment is less than one blind tick, the smallest step the disguised market shows anyway.

The Risk Guard judges a blind order in real terms (``BlindGuard``: the person's limits and the
audit trail are in real terms), and every message that comes back from the real side (the
broker's and the guard's refusals, their details, an order's reason) is retold in blind terms
(``BlindMap.retell``): names, times, prices and base quantities. Which number in an error is a
price or a quantity is said by its details, whose keys name each value's kind (``PRICE_KEYS``,
``QUANTITY_KEYS``; the broker's and the market rules' refusals list every price and quantity
their message quotes), and a number that follows "price" or "at" is a price. Quote amounts,
percentages and counts are the same in both worlds, and are left as they are: the values of the
call are not matched against the message, since an order's price may well equal the equity.
An order's reason holds the agent's own words (blind already) and what the broker added (the
order's own prices and quantities), so only the order's own values are rescaled there.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from app.domain.clock import ms_to_iso
from app.domain.errors import KestrelError, NotFoundError, RiskRejection, ToolError
from app.domain.market import BookLevel, OrderBook, Ticker
from app.domain.market_rules import MarketRules, fmt
from app.domain.risk_view import PositionView, RiskView
from app.domain.trading import AccountState, AssetBalance, Fill, Order, Position, Side
from app.events import Event, EventSink, OrderCancelled, OrderFilled, OrderPlaced, OrderRejected
from app.exchange.validation import check_request
from app.market.port import MarketData, PrefixSource
from app.market.series import KlineSeries
from app.risk.guard import Violation
from app.risk.types import OrderIntent
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

WEEK_MS = 7 * 86_400_000
# blind time of the first candle: 1971-01-07 (a whole number of weeks after the Unix epoch)
BLIND_START_MS = 53 * WEEK_MS
PRICE_FACTOR = Decimal("0.032")  # 4/125: prices x 0.032, base quantities x 31.25
QUOTE = "QUOTE"

# what the values of an error's details are, by key (the rest are quote amounts, percentages,
# counts, names or words, which the disguise leaves as they are or renames)
PRICE_KEYS = frozenset({
    "price", "stop_price", "last_price", "reference_price", "limit_price", "tick",
    "take_profit_price", "stop_loss_price", "fill_price",
})
QUANTITY_KEYS = frozenset({
    "quantity", "step", "min_amount", "held", "reserved", "size", "filled_quantity",
})
# base quantities, unless the details' ``asset`` is the quote currency
ASSET_AMOUNT_KEYS = frozenset({"needed", "free"})
# the value a rule was checked on, and its example: of the kind the details' ``field`` (or
# ``parameter``) names
FIELD_VALUE_KEYS = frozenset({"value", "example", "got"})
# a time (ISO 8601, or Unix milliseconds of this century's first decades), or a plain number
_TOKEN = re.compile(
    r"(?P<time>(?<![\w.:-])\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w:-]|\.\d))"
    r"|(?P<ms>(?<![\w.-])1\d{12}(?![\w]|\.\d))"
    r"|(?P<number>(?<![\w.-])-?\d+(?:\.\d+)?(?![\w%]|\.\d))"
)
# a number right after these words is a price ("last price 8444.01", "at about 7824.73")
_PRICED = re.compile(r"(?:\bprice|\bat|\babout)\s+$", re.IGNORECASE)


def _split(symbol: str) -> tuple[str, str]:
    base, _, quote = symbol.partition("/")
    return base, quote


def _trimmed(value: Decimal) -> Decimal:
    """The same number without trailing zeros and without an exponent (0.24279200000 ->
    0.242792, 10.000 -> 10): mapped back, a value reads in the ledger as one asked in real terms
    would."""
    exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)  # a finite number
    return value.quantize(Decimal(1).scaleb(min(0, exponent)))


def _number(value: Any) -> Decimal | None:
    """A finite Decimal from a detail's value (a Decimal or its text); None for anything else."""
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if not isinstance(value, str):
        return None
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


@dataclass(frozen=True, slots=True)
class Terms:
    """The real prices and base quantities a message may quote (the values its call involved),
    so that its numbers can be told apart from what is the same in both worlds."""

    prices: frozenset[Decimal] = frozenset()
    quantities: frozenset[Decimal] = frozenset()

    @classmethod
    def of(cls, prices: Iterable[Decimal | None] = (),
           quantities: Iterable[Decimal | None] = ()) -> Terms:
        return cls(frozenset(p for p in prices if p is not None and p.is_finite()),
                   frozenset(q for q in quantities if q is not None and q.is_finite()))

    def __or__(self, other: Terms) -> Terms:
        return Terms(self.prices | other.prices, self.quantities | other.quantities)


NO_TERMS = Terms()


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
            # an underscore separates too: a job named BTC_1h_analysis
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(real)}(?![A-Za-z0-9])", blind, text)
        return text

    def retell(self, text: str, terms: Terms = NO_TERMS, *, by_wording: bool = True) -> str:
        """A message of the real side in blind terms: names renamed, times shifted, and each
        price and base quantity ``terms`` holds rescaled, and with ``by_wording`` each number
        that follows "price" or "at" too. An order's reason goes without ``by_wording``: it
        holds the agent's own words, in blind terms already."""
        text = self.text(text)

        def blind(match: re.Match[str]) -> str:
            token = match.group(0)
            if match.group("time"):
                return self._shifted_iso(token)
            if match.group("ms"):
                return str(self.time(int(token)))
            value = Decimal(token)
            worded = by_wording and _PRICED.search(text, max(0, match.start() - 12),
                                                   match.start())
            if value in terms.prices or worded:
                return fmt(self.price(value))
            if value in terms.quantities:
                return fmt(self.qty(value))
            return token

        return _TOKEN.sub(blind, text)

    def _shifted_iso(self, token: str) -> str:
        try:
            moment = datetime.fromisoformat(token.replace("Z", "+00:00"))
        except ValueError:
            return token
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        shown = ms_to_iso(self.time(int(moment.timestamp() * 1000)))
        return shown if "T" in token else shown[:10]

    def retold_details(self, details: Mapping[str, Any], terms: Terms) -> dict[str, Any]:
        """An error's details in blind terms (their list of real symbols left out)."""
        shown: dict[str, Any] = {}
        for key, value in details.items():
            if key == "available":
                continue
            kind = self._kind(key, details)
            number = _number(value) if kind else None
            if number is not None:
                rescaled = self.price(number) if kind == "price" else self.qty(number)
                shown[key] = fmt(rescaled) if isinstance(value, str) else rescaled
            elif isinstance(value, str):
                shown[key] = self.retell(value, terms)
            elif isinstance(value, Mapping):
                shown[key] = self.retold_details(value, terms)
            elif isinstance(value, list | tuple):
                shown[key] = [self.retell(v, terms) if isinstance(v, str) else v for v in value]
            else:
                shown[key] = value
        return shown

    def declared(self, details: Mapping[str, Any]) -> Terms:
        """The prices and base quantities an error's details name by their keys."""
        prices: list[Decimal | None] = []
        quantities: list[Decimal | None] = []
        for key, value in details.items():
            kind = self._kind(key, details)
            if kind == "price":
                prices.append(_number(value))
            elif kind == "quantity":
                quantities.append(_number(value))
        return Terms.of(prices, quantities)

    def _kind(self, key: str, details: Mapping[str, Any]) -> str | None:
        """"price", "quantity" or None (a value the disguise leaves as it is) for a detail."""
        if key in PRICE_KEYS:
            return "price"
        if key in QUANTITY_KEYS:
            return "quantity"
        if key in ASSET_AMOUNT_KEYS:
            asset = details.get("asset")
            return "quantity" if asset in self.assets and asset != self._quote_real() else None
        if key in FIELD_VALUE_KEYS:
            field = details.get("field", details.get("parameter"))
            if field == "quantity":
                return "quantity"
            return "price" if field in PRICE_KEYS else None
        return None

    def retold(self, exc: KestrelError) -> KestrelError:
        """A refusal of the real side (a tool error, the Risk Guard's) in blind terms, its
        numbers told apart by its details (module docstring). Other errors are not shown to
        agents as written, and are left as they are."""
        if isinstance(exc, RiskRejection):
            known = self.declared(exc.details)
            return RiskRejection(exc.rule, self.retell(exc.reason, known),
                                 self.retold_details(exc.details, known))
        if not isinstance(exc, ToolError):
            return exc
        known = self.declared(exc.details)
        clone = copy.copy(exc)
        clone.message = self.retell(exc.message, known)
        clone.args = (clone.message,)
        clone.details = self.retold_details(exc.details, known)
        return clone

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

    def real_price_on(self, blind: Decimal | None, rules: MarketRules, side: Side
                      ) -> Decimal | None:
        """The real price of a blind one on the real tick: a buy's rounded down, a sell's up.
        A price already on the tick is sent as it is; one no grid can hold (not a positive
        finite number, or under one tick) too, for the broker to refuse in words."""
        real = self.real_price(blind)
        if real is None or not real.is_finite() or real <= 0:
            return real
        if real % rules.tick == 0:
            return _trimmed(real)
        on_tick = rules.round_price(real, up=side is Side.SELL)
        return _trimmed(on_tick) if on_tick > 0 else real

    def real_qty_on(self, blind: Decimal, rules: MarketRules) -> Decimal:
        """The real quantity of a blind one, down to the real step (already on the step, or
        under one step: as it is, the latter for the broker to refuse in words)."""
        real = self.real_qty(blind)
        if not real.is_finite() or real <= 0:
            return real
        if real % rules.step == 0:
            return _trimmed(real)
        on_step = rules.floor_amount(real)
        return _trimmed(on_step) if on_step > 0 else real

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
        blind.reason = self.retell(o.reason, Terms.of(
            (o.price, o.stop_price, o.average_price),
            (o.quantity, o.filled_quantity, o.remaining)), by_wording=False)
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
                           quantity=self.qty(event.quantity),
                           reason=self.retell(event.reason, Terms.of((), (event.quantity,))),
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


__all__ = ["BlindBroker", "BlindDriver", "BlindGuard", "BlindMap", "BlindMarket",
           "ShiftedClock", "Terms"]


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
