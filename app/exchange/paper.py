"""``PaperBroker``: a simulated spot exchange over a ``MarketData`` cursor, durable in a ``Ledger``.

It serves backtests and paper trading alike. Orders fill only against candles that became visible
after the order was placed (see ``matching`` for the convention), fees and slippage are charged,
market rules are enforced, and every change is committed to the ledger before it counts, so a
restart (even after kill -9) rebuilds exactly the committed account.

The broker is order entry and the port's answers; what it works on is split along its seams: the
account's state (``paper_account``), the candles it sees (``bar_window``), filling orders against
them (``settlement``) and valuing the account (``valuation``). Orders placed, cancelled, filled and
refused are announced through the event sink it is given (``app.events``), after their commit.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path

from app.domain.agents import PERSON_ID, agent_key
from app.domain.clock import Clock
from app.domain.errors import (
    AccessDeniedError,
    InsufficientDataError,
    InsufficientFundsError,
    InvalidOrderError,
    NotFoundError,
    OperationalError,
    ToolError,
)
from app.domain.market import split_symbol
from app.domain.market_rules import MarketRules, default_rules, fmt
from app.domain.risk_view import RiskView
from app.domain.trading import (
    AccountState,
    Fill,
    Mode,
    Order,
    OrderStatus,
    OrderType,
    Position,
    Side,
)
from app.events import EventSink, OrderCancelled, OrderPlaced, OrderRejected
from app.exchange import valuation
from app.exchange.bar_window import BarWindow
from app.exchange.book import ZERO, quote_up
from app.exchange.paper_account import PaperAccount, out_of_range_error, stored_money_problems
from app.exchange.quote_settlement import QuoteSettlement
from app.exchange.quotes import QuoteFeed, QuoteWindow
from app.exchange.settlement import Costs, Settlement
from app.exchange.validation import check_request, check_rules
from app.market.port import MarketData
from app.store.ledger import Ledger, OrderRecord
from app.trading.port import (
    PAPER_ABILITIES,
    BrokerAbilities,
    CheckedOrder,
    EquityPoint,
    OrderRequest,
    OwnedLot,
    Placement,
    PlacementState,
    require_account_quote,
)

__all__ = ["Costs", "PaperBroker", "venue_name"]

# a paper account's take profit and stop loss are two reduce-only orders that share the coins
_NO_OCO = ("The paper account holds a take profit and a stop loss as two separate orders; it "
           "takes no OCO list.")


def venue_name(venue: str) -> str:
    """How an account's venue reads in a sentence: "the offline replay", "live quotes of
    binance"."""
    kind, _, exchange = venue.partition(":")
    if kind == "replay":
        return "the offline replay"
    if kind == "live-paper":
        return f"live quotes of {exchange}"
    return f"{kind} ({exchange})" if exchange else kind


class PaperBroker:
    """A simulated spot, long-only exchange account in one quote currency.

    Agent ids are case-insensitive (``agent_key``): an order belongs to its agent whatever the
    case its id is spelt in, for cancelling, client order ids and budgets alike.

    Args:
        events: where orders placed, cancelled, filled and refused are announced (the runtime
            hands in its bus's ``publish_nowait``); None announces nothing.
        quotes: fill against these live quotes (the touch of the exchange's book, refreshed by
            the live driver) instead of candles, and take the ticker's last price as the
            reference (``quote_settlement``); None: candles (a replay).
        venue: what the account trades on ("replay", "live-paper:binance"); kept in the ledger,
            so an account is never continued on another market (its prices and times would
            not follow on).
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
        events: EventSink | None = None,
        quotes: QuoteFeed | None = None,
        venue: str = "replay",
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
        self._events = events
        self.venue = venue
        self._rules = dict(rules or {})
        self._account = PaperAccount(quote_currency, initial_cash)
        self._feed = quotes
        costs = Costs(fee_maker, fee_taker, slippage_bps)
        self._window: BarWindow | QuoteWindow
        self._settlement: Settlement
        if quotes is None:
            self._window = BarWindow(market)
            self._settlement = Settlement(self._account, self._window, ledger, clock,
                                          self.market_rules, costs, mode, events)
        else:
            self._window = QuoteWindow(market, quotes.board)
            self._settlement = QuoteSettlement(self._account, self._window, ledger, clock,
                                               self.market_rules, costs, mode, events)
            quotes.follow(self.symbols_in_play)
        self._restore_or_initialize()

    # -- start-up ------------------------------------------------------------------------------

    def _restore_or_initialize(self) -> None:
        account = self._account
        snap = self.ledger.load()
        if "initialized" not in snap.meta:
            account.fund()
            self.ledger.initialize(
                {self.quote_currency: account.initial_cash},
                {"quote_currency": self.quote_currency, "mode": self.mode.value,
                 "initial_cash": str(account.initial_cash), "venue": self.venue},
            )
            return
        meta = snap.meta
        traded_on = meta.get("venue", "replay")  # accounts from before venues were replays
        if traded_on != self.venue:
            raise OperationalError(
                f"this workspace's paper account trades on {venue_name(traded_on)}; it cannot "
                f"continue on {venue_name(self.venue)} (its prices and times would not follow "
                "on). Open another workspace for that market (kestrel --workspace DIR)."
            )
        if meta["quote_currency"] != self.quote_currency or meta["mode"] != self.mode.value:
            raise OperationalError(
                f"the ledger belongs to a {meta['mode']} account in {meta['quote_currency']}, "
                f"not a {self.mode.value} account in {self.quote_currency}"
            )
        problems = stored_money_problems(snap)
        if problems:  # valuing it would fail in every command: say what and how to go on
            path = self.ledger.path
            db = Path(path) if isinstance(path, str | Path) and str(path) != ":memory:" else None
            raise out_of_range_error(snap, problems, db)
        account.restore(snap)

    @property
    def initial_cash(self) -> Decimal:
        return self._account.initial_cash

    @property
    def settled_ms(self) -> int:
        """The clock time of the last settle (-1 before the first): where a resumed loop
        continues once the ledger has committed it. In a backtest a settle's point waits for
        the next transaction, so this may be ahead of the database, which is what a resumed run
        reads; a settle the ledger refused leaves the account, and this, as the ledger holds."""
        return self._account.stats.settled_ms

    # -- costs ---------------------------------------------------------------------------------

    @property
    def costs(self) -> Costs:
        return self._settlement.costs

    def set_costs(self, costs: Costs) -> None:
        """Charge ``costs`` from now on: orders placed and fills made after this call."""
        self._settlement.costs = costs

    @property
    def fee_maker(self) -> Decimal:
        return self._settlement.costs.fee_maker

    @property
    def fee_taker(self) -> Decimal:
        return self._settlement.costs.fee_taker

    @property
    def slippage(self) -> Decimal:
        return self._settlement.costs.slippage

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
        require_account_quote(found, split_symbol(found, self.quote_currency)[1],
                              self.quote_currency)
        return found

    def market_rules(self, symbol: str) -> MarketRules:
        rules = self._rules.get(symbol)
        if rules is None:
            rules = default_rules(symbol, self._window.decimals(symbol))
            self._rules[symbol] = rules
        return rules

    async def last_price(self, symbol: str) -> Decimal:
        """The last traded price (the newest visible close, as ``market.ticker`` reports it; on
        live quotes the exchange's ticker)."""
        symbol = self.canonical_symbol(symbol)
        if self._feed is not None:
            return await self._feed.last_price(symbol)
        mark = self._window.mark(symbol)
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
        return self._account.find(agent_id, client_order_id)

    def abilities(self, symbol: str) -> BrokerAbilities:
        """A paper account holds stops of both kinds, and its exits share the coins they sell
        (each is reduce-only), so a take profit and a stop loss rest side by side."""
        self.canonical_symbol(symbol)
        return PAPER_ABILITIES

    async def replace_order(
        self, agent_id: str, symbol: str, order_id: str, req: OrderRequest
    ) -> Order:
        """Cancel the open order and place ``req`` at once: the new one is checked first, with
        what the old one holds counted as free, so a refusal leaves the old one as it was."""
        record = self._account.lookup(symbol, order_id, None, agent_id)
        old = record.order
        if agent_key(old.agent_id) != agent_key(agent_id):
            raise AccessDeniedError(
                f"Order {old.order_id} belongs to agent {old.agent_id!r}; an agent may only "
                "replace its own orders.", details={"order_id": old.order_id,
                                                     "owner": old.agent_id})
        if not old.status.is_open:
            raise InvalidOrderError(
                f"Order {old.order_id} is already {old.status.value} and cannot be moved.",
                details={"order_id": old.order_id, "status": old.status.value})
        released = old.remaining if old.side is Side.SELL else record.reserved
        try:
            await self._check(req, released)
        except ToolError as exc:
            self._rejected(req, exc)
            raise
        await self.cancel_order(agent_id, symbol, order_id)
        return await self.create_order(req)

    async def placement(self, agent_id: str, client_order_id: str) -> Placement:
        """Booked, or never: a paper order has no outcome to wait for."""
        found = self.find_order(agent_id, client_order_id)
        if found is None:
            return Placement(PlacementState.ABSENT)
        return Placement(PlacementState.PLACED, found)

    async def lots(self, symbol: str) -> list[OwnedLot]:
        """Each owner's holding of ``symbol`` as the book keeps it (the sells taken by the
        ``app.trading.lots`` rule); what no holding accounts for is the person's."""
        symbol = self.canonical_symbol(symbol)
        book = self._account.book
        lots = [OwnedLot(owner, symbol, size, cost)
                for (owner, held_symbol), (size, cost) in sorted(book.holdings.items())
                if held_symbol == symbol and size > 0]
        rest = book.position(symbol).size - sum((lot.size for lot in lots), ZERO)
        if rest > 0:
            lots.append(OwnedLot(PERSON_ID, symbol, rest))
        return lots

    def check_oco(self, take_profit: OrderRequest, stop_loss: OrderRequest) -> None:
        raise InvalidOrderError(_NO_OCO, details={"needs": "oco"})

    async def create_oco(
        self, take_profit: OrderRequest, stop_loss: OrderRequest
    ) -> tuple[Order, Order]:
        raise InvalidOrderError(_NO_OCO, details={"needs": "oco"})

    async def precheck(self, req: OrderRequest, *, released: Decimal = ZERO) -> CheckedOrder:
        """Every check ``create_order`` makes, without placing; what it would place and reserve.

        The tools call it before the Risk Guard so the guard only judges well-formed orders, and
        counts the quote the order will really hold back. A refusal is announced
        (``OrderRejected``).
        """
        try:
            symbol, quantity, _quote_amount, reserved, ref = await self._check(req, released)
        except ToolError as exc:
            self._rejected(req, exc)
            raise
        return CheckedOrder(symbol, quantity, ref, reserved if req.side is Side.BUY else ZERO)

    async def _check(
        self, req: OrderRequest, released: Decimal = ZERO
    ) -> tuple[str, Decimal, Decimal | None, Decimal, Decimal]:
        """Symbol, quantity, quote budget, reservation and reference price of a valid order."""
        check_request(req)
        symbol = self.canonical_symbol(req.symbol)
        ref = await self.last_price(symbol)
        quantity, quote_amount = self.resolve_quantity(req, symbol, ref)
        check_rules(req, quantity, ref, self.market_rules(symbol))
        reserved = self._check_funds(req, symbol, quantity, quote_amount, ref, released)
        return symbol, quantity, quote_amount, reserved, ref

    async def create_order(self, req: OrderRequest) -> Order:
        if req.client_order_id:
            existing = self.find_order(req.agent_id, req.client_order_id)
            if existing is not None:
                return existing
        try:
            symbol, quantity, quote_amount, reserved, _ref = await self._check(req)
        except ToolError as exc:
            self._rejected(req, exc)
            raise
        account = self._account
        account.order_seq += 1
        order_id = f"P{account.order_seq:08d}"
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
            account.order_seq -= 1
            raise
        account.index(record)
        if self._events is not None:
            self._events(OrderPlaced(copy.copy(order)))
        return order

    def _rejected(self, req: OrderRequest, exc: ToolError) -> None:
        if self._events is not None:
            self._events(OrderRejected(
                agent_id=req.agent_id, symbol=req.symbol, side=req.side.value,
                order_type=req.order_type.value, quantity=req.quantity, source="broker",
                rule=exc.code.value, reason=exc.message, time_ms=self.clock.now_ms(),
            ))

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
        released: Decimal = ZERO,
    ) -> Decimal:
        """Refuse what the account cannot pay or deliver; return the amount to reserve."""
        base = split_symbol(symbol, self.quote_currency)[0]
        if req.side is Side.SELL:
            held = self._account.book.total(base)
            if held <= 0:
                raise InvalidOrderError(
                    f"You hold no {base}: this is a spot, long-only account, so a SELL can only "
                    "reduce a position you hold (short selling is not allowed).",
                    details={"field": "side", "asset": base, "held": "0"},
                )
            available = (min(held, self._account.book.free(base) + released)
                         if not req.reduce_only else held)
            if quantity > available:
                raise InsufficientFundsError(
                    f"Not enough {base} to sell: needed {fmt(quantity)}, free {fmt(available)} "
                    f"(held {fmt(held)}, reserved by open sell orders "
                    f"{fmt(held - self._account.book.free(base))}).",
                    details={"asset": base, "needed": fmt(quantity), "free": fmt(available),
                             "held": fmt(held),
                             "reserved": fmt(held - self._account.book.free(base))},
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
        free = self._account.book.free(self.quote_currency) + released  # a replaced buy's hold
        if needed > free:
            raise InsufficientFundsError(
                f"Not enough {self.quote_currency}: the order needs {fmt(needed)} (quantity "
                f"{fmt(quantity)} at about {fmt(req.price or req.stop_price or ref)}, fee and "
                f"slippage included) but only {fmt(free)} is free.",
                details={"asset": self.quote_currency, "needed": fmt(needed), "free": fmt(free),
                         "quantity": fmt(quantity),
                         "price": fmt(req.price or req.stop_price or ref)},
            )
        return needed

    async def cancel_order(
        self,
        agent_id: str,
        symbol: str,
        order_id: str | None = None,
        client_order_id: str | None = None,
    ) -> Order:
        record = self._account.lookup(symbol, order_id, client_order_id, agent_id)
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
        self._account.close_order(record, OrderStatus.CANCELLED, "cancelled on request",
                                  self.clock.now_ms())
        try:
            self.ledger.save_order(record)
        except Exception:  # not cancelled: the order stays open, as the ledger holds it
            self._account.back_to(self.ledger)
            raise
        if self._events is not None:
            self._events(OrderCancelled(copy.copy(order)))
        return order

    async def get_order(self, agent_id: str, symbol: str, order_id: str) -> Order:
        return self._account.lookup(symbol, order_id, None, agent_id).order

    async def open_orders(
        self, agent_id: str | None = None, symbol: str | None = None
    ) -> list[Order]:
        wanted = None if symbol is None else self.canonical_symbol(symbol)
        owner = None if agent_id is None else agent_key(agent_id)
        return [
            r.order for r in self._account.open.values()
            if (owner is None or agent_key(r.order.agent_id) == owner)
            and (wanted is None or r.order.symbol == wanted)
        ]

    # -- settling and reading the account ------------------------------------------------------

    def settle(self) -> list[Fill]:
        """Fill what the candles visible since the last settle allow; commit an equity point."""
        return self._settlement.settle()

    def position_size(self, symbol: str) -> Decimal:
        return self._account.book.position(symbol).size

    def symbols_in_play(self) -> set[str]:
        """Symbols with an open order or a held position: the ones a live settle needs quotes
        of."""
        account = self._account
        held = {s for s, p in account.book.positions.items() if p.size > 0}
        return held | {r.order.symbol for r in account.open.values()}

    def free(self, asset: str) -> Decimal:
        return self._account.book.free(asset)

    async def positions(self, symbol: str | None = None) -> list[Position]:
        return valuation.positions(self._account, self._marks(), symbol)

    async def account(self) -> AccountState:
        return valuation.account_state(self._account, self._marks(), self.mode)

    async def trades(self, symbol: str | None = None, limit: int | None = 20) -> list[Fill]:
        wanted = None if symbol is None else self.canonical_symbol(symbol)
        fills = self.ledger.fills(wanted, limit)
        return fills if limit is not None else fills[::-1]  # the ledger gives all oldest first

    async def equity_curve(self, from_ms: int = -1) -> list[EquityPoint]:
        """The account's equity after each settle at or after ``from_ms``, oldest first."""
        return [EquityPoint(t, e) for t, e, _cash in self.ledger.equity_curve(from_ms)]

    def risk_view(self) -> RiskView:
        return valuation.risk_view(self._account, self._marks(), self.clock.now_ms())

    def snapshot(self) -> dict[str, object]:
        """A comparable picture of the whole account, for tests and the crash-recovery check."""
        return valuation.snapshot(self._account)

    def _marks(self) -> dict[str, Decimal]:
        return valuation.marks(self._account, self._window)
