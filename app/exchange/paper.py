"""``PaperBroker``: a simulated spot exchange over a ``MarketData`` cursor, durable in a ``Ledger``.

It serves backtests and paper trading alike. Orders fill only against candles that became visible
after the order was placed (see ``matching`` for the convention), fees and slippage are charged,
market rules are enforced, and every change is committed to the ledger before it counts, so a
restart (even after kill -9) rebuilds exactly the committed account.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from app.domain.agents import agent_key
from app.domain.clock import Clock
from app.domain.errors import (
    AccessDeniedError,
    InsufficientDataError,
    InsufficientFundsError,
    InvalidOrderError,
    NotFoundError,
    OperationalError,
)
from app.domain.trading import (
    Mode,
    Order,
    OrderStatus,
    OrderType,
    Side,
)
from app.exchange.book import ZERO, AccountBook, quote_up
from app.exchange.market_rules import MarketRules, default_rules, fmt
from app.exchange.matching import Bar, Match, match_order
from app.exchange.port import CheckedOrder, OrderRequest
from app.exchange.settlement import SettlementMixin
from app.exchange.validation import check_request, check_rules
from app.exchange.views import AccountViewsMixin
from app.market.port import MarketData
from app.market.series import KlineSeries, to_decimal
from app.store.ledger import Ledger, OrderRecord

DAY_MS = 86_400_000
BPS = Decimal("0.0001")


def split_symbol(symbol: str, default_quote: str) -> tuple[str, str]:
    """``BTC/USDT`` -> (BTC, USDT); ``XRP/USDT:USDT`` -> (XRP, USDT); ``GOOG`` -> (GOOG, quote)."""
    if "/" not in symbol:
        return symbol, default_quote
    base, _, rest = symbol.partition("/")
    return base, rest.split(":")[0]


class PaperBroker(SettlementMixin, AccountViewsMixin):
    """A simulated spot, long-only exchange account in one quote currency.

    Agent ids are case-insensitive (``agent_key``): an order belongs to its agent whatever the
    case its id is spelt in, for cancelling, client order ids and budgets alike.
    """

    def __init__(
        self,
        market: MarketData,
        clock: Clock,
        ledger: Ledger,
        *,
        initial_cash: Decimal,
        quote_currency: str | None = None,
        mode: Mode = Mode.BACKTEST,
        fee_maker: Decimal = Decimal("0.001"),
        fee_taker: Decimal = Decimal("0.001"),
        slippage_bps: Decimal = Decimal("2"),
        rules: Mapping[str, MarketRules] | None = None,
    ) -> None:
        symbols = market.symbols()
        if quote_currency is None:
            if not symbols:
                raise ValueError("the market has no symbols; give quote_currency explicitly")
            quote_currency = split_symbol(symbols[0], "USDT")[1]
        self.market = market
        self.clock = clock
        self.ledger = ledger
        self.mode = mode
        self.quote_currency = quote_currency
        self.fee_maker = fee_maker
        self.fee_taker = fee_taker
        self.slippage = slippage_bps * BPS
        self._rules = dict(rules or {})
        self._price_decimals: dict[str, int] = {}
        self._finest: dict[str, str] = {}
        self._book = AccountBook(quote_currency)
        self._records: dict[str, OrderRecord] = {}
        self._open: dict[str, OrderRecord] = {}
        self._by_client: dict[tuple[str, str], str] = {}
        self._cursor_ms: dict[str, int] = {}
        self._cursor_idx: dict[str, int] = {}
        self._order_seq = 0
        self._fill_seq = 0
        self.initial_cash = initial_cash
        self._stats: dict[str, Decimal] = {}
        self._day = -1
        self._last_settle_ms = -1
        self._trough: Decimal | None = None  # lowest equity since the peak (None: not known)
        self._restore_or_initialize(initial_cash)

    # -- start-up ------------------------------------------------------------------------------

    def _restore_or_initialize(self, initial_cash: Decimal) -> None:
        snap = self.ledger.load()
        if "initialized" not in snap.meta:
            self._book.balances[self.quote_currency] = initial_cash
            self._stats = {"peak_equity": initial_cash, "day_start_equity": initial_cash,
                           "max_drawdown_pct": ZERO, "last_equity": initial_cash}
            self.ledger.initialize(
                {self.quote_currency: initial_cash},
                {"quote_currency": self.quote_currency, "mode": self.mode.value,
                 "initial_cash": str(initial_cash)},
            )
            return
        meta = snap.meta
        if meta["quote_currency"] != self.quote_currency or meta["mode"] != self.mode.value:
            raise OperationalError(
                f"the ledger belongs to a {meta['mode']} account in {meta['quote_currency']}, "
                f"not a {self.mode.value} account in {self.quote_currency}"
            )
        self.initial_cash = Decimal(meta["initial_cash"])
        self._book.balances = dict(snap.balances)
        for symbol, pos in snap.positions.items():
            book = self._book.position(symbol)
            book.size, book.avg_price, book.realized_pnl = pos.size, pos.avg_price, pos.realized_pnl
        self._book.holdings = dict(snap.holdings)
        for record in snap.orders:
            self._index(record)
        self._order_seq = len(snap.orders)
        self._fill_seq = snap.fill_count
        self._stats = {
            key: Decimal(meta.get(key, str(self.initial_cash)))
            for key in ("peak_equity", "day_start_equity", "last_equity")
        }
        self._stats["max_drawdown_pct"] = Decimal(meta.get("max_drawdown_pct", "0"))
        self._day = int(meta.get("day", "-1"))
        self._last_settle_ms = int(meta.get("settled_ms", "-1"))
        for key, value in meta.items():
            if key.startswith("cursor:"):
                self._cursor_ms[key[len("cursor:"):]] = int(value)

    def _index(self, record: OrderRecord) -> None:
        order = record.order
        self._records[order.order_id] = record
        self._by_client[(agent_key(order.agent_id), order.client_order_id)] = order.order_id
        if order.status.is_open:
            self._open[order.order_id] = record
            if record.reserved:
                self._book.reserve(self._reserve_asset(order), record.reserved)

    def _reserve_asset(self, order: Order) -> str:
        if order.side is Side.BUY:
            return self.quote_currency
        return split_symbol(order.symbol, self.quote_currency)[0]

    @property
    def settled_ms(self) -> int:
        """The clock time of the last committed settle (-1 before the first): where a resumed
        loop continues."""
        return self._last_settle_ms

    # -- market access -------------------------------------------------------------------------

    def canonical_symbol(self, symbol: str) -> str:
        """The market's spelling of ``symbol``; NOT_FOUND or INVALID_ORDER when it cannot trade."""
        known = self.market.symbols()
        found = symbol if symbol in known else symbol.upper()
        if found not in known:
            raise NotFoundError(
                f"Unknown symbol {symbol!r}. Tradable symbols: {', '.join(known)}.",
                details={"parameter": "symbol", "symbol": symbol, "available": list(known)},
            )
        quote = split_symbol(found, self.quote_currency)[1]
        if quote != self.quote_currency:
            raise InvalidOrderError(
                f"{found} is quoted in {quote}, but this account holds {self.quote_currency}; "
                f"only {self.quote_currency} pairs can be traded.",
                details={"symbol": found, "quote": quote, "account_quote": self.quote_currency},
            )
        return found

    def market_rules(self, symbol: str) -> MarketRules:
        rules = self._rules.get(symbol)
        if rules is None:
            rules = default_rules(symbol, self._decimals(symbol))
            self._rules[symbol] = rules
        return rules

    def _decimals(self, symbol: str) -> int:
        """The symbol's price precision, asked once: the market rules are built on it too."""
        decimals = self._price_decimals.get(symbol)
        if decimals is None:
            decimals = self._price_decimals[symbol] = self.market.price_decimals(symbol)
        return decimals

    def _interval(self, symbol: str) -> str:
        """The finest interval of ``symbol``, asked once (settle needs it every bar)."""
        interval = self._finest.get(symbol)
        if interval is None:
            finest = getattr(self.market, "finest_interval", None)
            interval = finest(symbol) if finest is not None else self.market.intervals(symbol)[0]
            self._finest[symbol] = interval
        return interval

    def _bars(self, symbol: str) -> tuple[KlineSeries, int]:
        """The symbol's finest candles and how many of them are visible and complete now."""
        interval = self._interval(symbol)
        source = self.market.prefix_source(symbol, interval)
        if source is not None:
            return source.full, source.visible
        series_now = getattr(self.market, "series_now", None)
        if series_now is None:
            raise TypeError("PaperBroker needs a market with prefix_source or series_now")
        series: KlineSeries = series_now(symbol, interval)
        return series, len(series) if series.last_complete else len(series) - 1

    def _mark(
        self, symbol: str, bars: tuple[KlineSeries, int] | None = None
    ) -> Decimal | None:
        """The last visible close: the price positions are valued at and market orders refer to.

        Args:
            bars: ``_bars(symbol)`` when the caller has just computed it at the same clock time.
        """
        full, visible = self._bars(symbol) if bars is None else bars
        if visible <= 0:
            return None
        return to_decimal(full.close.item(visible - 1), self._decimals(symbol))

    async def last_price(self, symbol: str) -> Decimal:
        """The last traded price (the newest visible close, as ``market.ticker`` reports it)."""
        symbol = self.canonical_symbol(symbol)
        mark = self._mark(symbol)
        if mark is None:
            raise InsufficientDataError(
                f"No {symbol} price is visible yet; wait for the first candle to close.",
                details={"symbol": symbol},
            )
        return mark

    def quantity_for_quote(
        self, symbol: str, quote_amount: Decimal, price: Decimal, taker: bool = True
    ) -> Decimal:
        """The largest quantity whose cost plus fee at ``price`` stays within ``quote_amount``."""
        rate = self.fee_taker if taker else self.fee_maker
        return self.market_rules(symbol).floor_amount(quote_amount / (price * (1 + rate)))

    # -- orders --------------------------------------------------------------------------------

    def find_order(self, agent_id: str, client_order_id: str) -> Order | None:
        order_id = self._by_client.get((agent_key(agent_id), client_order_id))
        return None if order_id is None else self._records[order_id].order

    async def precheck(self, req: OrderRequest) -> CheckedOrder:
        """Every check ``create_order`` makes, without placing; what it would place and reserve.

        The tools call it before the Risk Guard so the guard only judges well-formed orders, and
        counts the quote the order will really hold back.
        """
        check_request(req)
        symbol = self.canonical_symbol(req.symbol)
        ref = await self.last_price(symbol)
        quantity, quote_amount = self.resolve_quantity(req, symbol, ref)
        check_rules(req, quantity, ref, self.market_rules(symbol))
        reserved = self._check_funds(req, symbol, quantity, quote_amount, ref)
        return CheckedOrder(symbol, quantity, ref, reserved if req.side is Side.BUY else ZERO)

    async def create_order(self, req: OrderRequest) -> Order:
        if req.client_order_id:
            existing = self.find_order(req.agent_id, req.client_order_id)
            if existing is not None:
                return existing
        check_request(req)
        symbol = self.canonical_symbol(req.symbol)
        ref = await self.last_price(symbol)
        quantity, quote_amount = self.resolve_quantity(req, symbol, ref)
        check_rules(req, quantity, ref, self.market_rules(symbol))
        reserved = self._check_funds(req, symbol, quantity, quote_amount, ref)
        self._order_seq += 1
        order_id = f"P{self._order_seq:08d}"
        now = self.clock.now_ms()
        order = Order(
            order_id=order_id, client_order_id=req.client_order_id or f"auto-{order_id}",
            agent_id=req.agent_id, symbol=symbol, side=req.side, order_type=req.order_type,
            quantity=quantity, created_ms=now, price=req.price, stop_price=req.stop_price,
            reduce_only=req.reduce_only, exit_kind=req.exit_kind, reason=req.reason,
            updated_ms=now, fee_currency=self.quote_currency,
        )
        record = OrderRecord(order, quote_amount, reserved)
        try:
            self.ledger.save_order(record)  # committed before it can have any effect
        except BaseException:
            self._order_seq -= 1
            raise
        self._index(record)
        return order

    def resolve_quantity(
        self, req: OrderRequest, symbol: str, ref: Decimal
    ) -> tuple[Decimal, Decimal | None]:
        """The order's base quantity, and the quote budget a MARKET BUY by quote amount keeps."""
        if req.quote_amount is None:
            return req.quantity, None
        if req.side is Side.BUY and req.order_type is OrderType.MARKET:
            estimate = self.quantity_for_quote(symbol, req.quote_amount, ref * (1 + self.slippage))
            return estimate, req.quote_amount
        at = req.price or req.stop_price or ref
        taker = req.order_type is not OrderType.LIMIT
        return self.quantity_for_quote(symbol, req.quote_amount, at, taker), None

    def _check_funds(
        self,
        req: OrderRequest,
        symbol: str,
        quantity: Decimal,
        quote_amount: Decimal | None,
        ref: Decimal,
    ) -> Decimal:
        """Refuse what the account cannot pay or deliver; return the amount to reserve."""
        base = split_symbol(symbol, self.quote_currency)[0]
        if req.side is Side.SELL:
            held = self._book.total(base)
            if held <= 0:
                raise InvalidOrderError(
                    f"You hold no {base}: this is a spot, long-only account, so a SELL can only "
                    "reduce a position you hold (short selling is not allowed).",
                    details={"field": "side", "asset": base, "held": "0"},
                )
            available = self._book.free(base) if not req.reduce_only else held
            if quantity > available:
                raise InsufficientFundsError(
                    f"Not enough {base} to sell: needed {fmt(quantity)}, free {fmt(available)} "
                    f"(held {fmt(held)}, reserved by open sell orders "
                    f"{fmt(held - self._book.free(base))}).",
                    details={"asset": base, "needed": fmt(quantity), "free": fmt(available)},
                )
            return ZERO if req.reduce_only else quantity
        if quote_amount is not None:
            needed = quote_amount
        elif req.order_type is OrderType.LIMIT:
            needed = quote_up(quantity * (req.price or ref) * (1 + self.fee_maker))
        elif req.order_type is OrderType.STOP_LIMIT:
            needed = quote_up(quantity * (req.price or ref) * (1 + self.fee_taker))
        else:
            at = req.stop_price if req.order_type is OrderType.STOP else ref
            needed = quote_up(quantity * (at or ref) * (1 + self.slippage) * (1 + self.fee_taker))
        free = self._book.free(self.quote_currency)
        if needed > free:
            raise InsufficientFundsError(
                f"Not enough {self.quote_currency}: the order needs {fmt(needed)} (quantity "
                f"{fmt(quantity)} at about {fmt(req.price or req.stop_price or ref)}, fee and "
                f"slippage included) but only {fmt(free)} is free.",
                details={"asset": self.quote_currency, "needed": fmt(needed), "free": fmt(free)},
            )
        return needed

    def _lookup(self, agent_id: str, symbol: str, order_id: str | None,
                client_order_id: str | None) -> OrderRecord:
        record = None
        if order_id:
            record = self._records.get(order_id)
        elif client_order_id:
            found = self._by_client.get((agent_key(agent_id), client_order_id))
            record = None if found is None else self._records[found]
        else:
            raise InvalidOrderError(
                "Give <order_id> or <client_order_id> to say which order.",
                details={"field": "order_id"},
            )
        wanted = order_id or client_order_id
        if record is None or record.order.symbol.upper() != symbol.upper():
            raise NotFoundError(
                f"No order {wanted!r} for {symbol} exists in this account.",
                details={"order_id": wanted, "symbol": symbol},
            )
        return record

    async def cancel_order(
        self,
        agent_id: str,
        symbol: str,
        order_id: str | None = None,
        client_order_id: str | None = None,
    ) -> Order:
        record = self._lookup(agent_id, symbol, order_id, client_order_id)
        order = record.order
        if agent_key(order.agent_id) != agent_key(agent_id):
            raise AccessDeniedError(
                f"Order {order.order_id} belongs to agent {order.agent_id!r}; an agent may only "
                "cancel its own orders.",
                details={"order_id": order.order_id, "owner": order.agent_id},
            )
        if not order.status.is_open:
            raise InvalidOrderError(
                f"Order {order.order_id} is already {order.status.value} and cannot be cancelled.",
                details={"order_id": order.order_id, "status": order.status.value},
            )
        self._close_order(record, OrderStatus.CANCELLED, "cancelled on request")
        self.ledger.save_order(record)
        return order

    def _close_order(self, record: OrderRecord, status: OrderStatus, why: str) -> None:
        """Take an order off the book in memory (the caller commits it) and free its reservation."""
        order = record.order
        order.status = status
        order.updated_ms = self.clock.now_ms()
        if why:
            order.reason = f"{order.reason}; {why}" if order.reason else why
        if record.reserved:
            self._book.release(self._reserve_asset(order), record.reserved)
            record.reserved = ZERO
        self._open.pop(order.order_id, None)

    async def get_order(self, agent_id: str, symbol: str, order_id: str) -> Order:
        return self._lookup(agent_id, symbol, order_id, None).order

    async def open_orders(
        self, agent_id: str | None = None, symbol: str | None = None
    ) -> list[Order]:
        wanted = None if symbol is None else self.canonical_symbol(symbol)
        owner = None if agent_id is None else agent_key(agent_id)
        return [
            r.order for r in self._open.values()
            if (owner is None or agent_key(r.order.agent_id) == owner)
            and (wanted is None or r.order.symbol == wanted)
        ]

    # used by SettlementMixin
    def _bar(self, full: KlineSeries, index: int, decimals: int) -> Bar:
        return Bar(
            full.timestamp_ms.item(index),
            to_decimal(full.open.item(index), decimals),
            to_decimal(full.high.item(index), decimals),
            to_decimal(full.low.item(index), decimals),
            to_decimal(full.close.item(index), decimals),
        )

    def _match(self, order: Order, bar: Bar) -> Match | None:
        return match_order(order, bar, self.slippage, self.market_rules(order.symbol))
