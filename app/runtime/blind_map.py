"""The disguise of blind mode: real <-> blind symbols, assets, times, prices and quantities, and
messages retold from real terms into blind ones.

- each symbol becomes a neutral name (``ASSET1/QUOTE``; its assets ``ASSET1`` and ``QUOTE``);
- times are shifted by a whole number of weeks to a 1971 epoch (candles stay aligned to their
  intervals, gaps and bar offsets are unchanged);
- prices are multiplied by a fixed factor and base quantities divided by it, so every value in
  the quote currency (cash, equity, notional, P&L, fees) is unchanged and the Risk Guard's limits
  mean what they say.

The factor is a product of powers of 2 and 5, so both directions are exact in ``Decimal``.

Mapped back, a value is put on the real market's grid: a price on the real tick (a buy's rounded
down, a sell's up: never paying more nor selling for less than asked, and a stop loss triggering
no later than asked), a quantity down to the real step. Why not give the model the blind tick and
step instead: they are odd numbers (a tick of 0.01 is 0.00032 blind, a step of 0.000001 is
0.00003125), a model rounds to the decimals it sees, and every such price would be refused; the
adjustment is less than one blind tick, the smallest step the disguised market shows anyway.

Which number in a message from the real side is a price or a quantity is said by its details,
whose keys name each value's kind (``PRICE_KEYS``, ``QUANTITY_KEYS``; the broker's and the market
rules' refusals list every price and quantity their message quotes), and a number that follows
"price" or "at" is a price. Quote amounts, percentages and counts are the same in both worlds,
and are left as they are: the values of the call are not matched against the message, since an
order's price may well equal the equity. An order's reason holds the agent's own words (blind
already) and what the broker added (the order's own prices and quantities), so only the order's
own values are rescaled there.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from app.domain.clock import ms_to_iso
from app.domain.errors import KestrelError, NotFoundError, RiskRejection, ToolError
from app.domain.market_rules import MarketRules, fmt
from app.domain.trading import AssetBalance, Fill, Order, Position, Side
from app.events import Event, EventSink, OrderCancelled, OrderFilled, OrderPlaced, OrderRejected
from app.market.port import MarketData
from app.market.series import KlineSeries

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
