"""``CcxtBroker``: the ``Broker`` port over a real exchange through ccxt, with an order journal.

Placing an order, in order:

1. Checks that need no exchange (fields, symbol, precision, minimums): ccxt would silently
   truncate a quantity to the exchange's step, so an order off the step is refused here, as the
   paper broker refuses it.
2. The intent is committed to the journal (NEW), with the client order id derived from the tool
   call (``client_ids``), then marked SENDING in a second commit: both before the request leaves.
3. The request is sent once, carrying that client id, and its outcome sorted once
   (``OrderSender`` in ``sending``). UNKNOWN orders are resolved by the ``Reconciler``, by client
   id, never by sending again.

A tool call repeated after a crash carries the same client id: the journal answers it (the order
it placed, a lookup if its outcome is unknown or it was given up as NOT_PLACED), and only an order
certainly never booked (never sent, or refused) may be sent again. Reads (orders, balances,
trades) are retried with backoff.

Reading orders and trades into the journal is ``OrderSync``'s job (``broker.sync``), shared with
the ``Reconciler``. Balances and positions come from the exchange; prices and rules from
``CcxtMarketData``. The sync
parts of the port (``risk_view``, ``position_size``) read what the last async call fetched:
``precheck`` refreshes it before the Risk Guard judges an order.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from decimal import Decimal
from typing import Any

from app.ccxt import account as views
from app.ccxt import oco, replace
from app.ccxt.announce import Announcer
from app.ccxt.client import build_exchange
from app.ccxt.client_ids import derive, rules_for
from app.ccxt.credentials import ApiKeys
from app.ccxt.errors import RetryPolicy, Sleep, retry_read
from app.ccxt.live_grants import PERSON, LiveGrants
from app.ccxt.market import CcxtMarketData
from app.ccxt.order_sync import OrderSync
from app.ccxt.orders import ZERO, average_cost, to_fills, to_order
from app.ccxt.outcome import check_answer
from app.ccxt.sending import OrderSender, StepHook
from app.ccxt.stops import DEFAULT_BAND, as_stop_limit, needs_stop_limit, stop_kinds
from app.config.exchanges import ExchangeSettings
from app.domain.agents import agent_key
from app.domain.clock import Clock, WallClock, ms_to_iso
from app.domain.errors import (
    AccessDeniedError,
    ExchangeError,
    InsufficientFundsError,
    InvalidOrderError,
    NotFoundError,
    ToolError,
)
from app.domain.market_rules import MarketRules, fmt
from app.domain.risk_view import PendingOrder, PositionView, RiskView
from app.domain.trading import (
    AccountState,
    AssetBalance,
    Fill,
    Mode,
    Order,
    OrderStatus,
    OrderType,
    Position,
    Side,
)
from app.events import EventSink
from app.exchange.validation import check_request, check_rules
from app.store.order_journal import JournalEntry, JournalFill, JournalState, OrderJournal
from app.trading.lots import lot_book
from app.trading.port import (
    STOP_LIMIT_NOTE,
    BrokerAbilities,
    CheckedOrder,
    EquityPoint,
    OrderRequest,
    OwnedLot,
    Placement,
    PlacementState,
    require_account_quote,
)

# ccxt options the broker's exchange object needs, per exchange: no margin pairs or currency
# lists (private calls Kestrel's spot trading does not need), open orders of every symbol at once.
BROKER_OPTIONS: Mapping[str, Mapping[str, Any]] = {
    "binance": {"fetchCurrencies": False, "fetchMargins": False,
                "warnOnFetchOpenOrdersWithoutSymbol": False},
}
DAY_MS = 86_400_000


def build_broker_exchange(
    exchange_id: str, settings: ExchangeSettings | None, keys: ApiKeys
) -> Any:
    """A ccxt exchange with the keys set on the object (never in a config dict that is logged)."""
    exchange = build_exchange(exchange_id, settings)
    for name, value in keys.to_ccxt().items():
        setattr(exchange, name, value)
    exchange.options.update(dict(BROKER_OPTIONS.get(exchange_id, {})))
    return exchange


class CcxtBroker:
    """A live spot account on one exchange; implements ``Broker`` and ``TradingBroker``.

    Args:
        exchange: a ccxt async exchange with keys (``build_broker_exchange``), markets loaded.
        market: the exchange's public data (prices, rules).
        journal: the workspace's order journal.
        quote_currency: the account's currency; only pairs quoted in it are traded.
        on_step: awaited at "journaled" and "sending" (crash tests stop the process there).
        balance_fresh_s: how long fetched balances serve ``precheck`` and ``risk_view``.
        events: where orders placed, cancelled, filled and refused are announced (the runtime
            hands in its bus's ``publish_nowait``), with orders whose outcome is unknown and
            each reading of the balances; None announces nothing.
        grants: which agents the person allows to trade live here; an order of any other agent
            is refused before anything is journaled or sent. None: every agent (tests of the
            broker alone).
        stop_limit_band: on a market that lists no stop-market order, a STOP is sent as a
            stop-limit whose limit lies this fraction beyond the stop (``app.ccxt.stops``).
    """

    mode = Mode.LIVE

    def __init__(
        self,
        exchange: Any,
        market: CcxtMarketData,
        journal: OrderJournal,
        *,
        quote_currency: str = "USDT",
        clock: Clock | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen
        sleep: Sleep = asyncio.sleep,
        on_step: StepHook | None = None,
        balance_fresh_s: float = 2.0,
        taker_fee: Decimal = Decimal("0.001"),
        monotonic: Callable[[], float] = time.monotonic,
        events: EventSink | None = None,
        grants: LiveGrants | None = None,
        stop_limit_band: Decimal = DEFAULT_BAND,
    ) -> None:
        self.exchange = exchange
        self.stop_limit_band = stop_limit_band
        self.grants = grants
        self.market = market
        self.journal = journal
        self.venue = str(exchange.id)
        self.quote_currency = quote_currency
        self.clock = clock or WallClock()
        self.id_rules = rules_for(self.venue)
        self._retry = retry
        self._sleep = sleep
        self._fresh_s = balance_fresh_s
        self._taker = taker_fee
        self._mono = monotonic
        self._balances: dict[str, AssetBalance] = {}
        self._balances_mono: float | None = None
        self._prices: dict[str, Decimal] = {}
        self.announce = Announcer(journal, self.venue, quote_currency, self._base, events)
        self.sync = OrderSync(exchange, journal, self.id_rules, self.clock, self._read,
                              on_fills=self._filled)
        self.sending = OrderSender(exchange, journal, self.sync, self.announce, self.id_rules,
                                   self.clock, self._read, on_step)

    @property
    def unknown_run(self) -> int:
        """Consecutive sends whose outcome was unknown (the kill switch)."""
        return self.sending.unknown_run

    def _filled(self, entry: JournalEntry, new: list[JournalFill]) -> None:
        """New fills change the balances: the next reading asks the exchange again."""
        if new:
            self._balances_mono = None
        self.announce.filled(entry, new)

    async def close(self) -> None:
        """Close the exchange's session (on the loop that opened it); the market is the
        caller's."""
        await self.exchange.close()

    # -- symbols, rules, prices ----------------------------------------------------------------

    def canonical_symbol(self, symbol: str) -> str:
        found = self.market.rules(symbol).symbol
        require_account_quote(found, found.split("/")[1].split(":")[0], self.quote_currency)
        return found

    def market_rules(self, symbol: str) -> MarketRules:
        return self.market.rules(symbol)

    async def last_price(self, symbol: str) -> Decimal:
        symbol = self.canonical_symbol(symbol)
        price = (await self.market.ticker(symbol)).last_price
        self._prices[symbol] = price
        return price

    def _base(self, symbol: str) -> str:
        return symbol.split("/")[0]

    def _as_sent(self, req: OrderRequest, symbol: str) -> OrderRequest:
        """The request as it will be sent: a STOP on a market without a stop-market order
        becomes a stop-limit (``app.ccxt.stops``), checked and journaled as such."""
        if req.order_type is not OrderType.STOP:
            return req
        markets = getattr(self.exchange, "markets", None) or {}
        market = markets.get(symbol)
        if market is None or not needs_stop_limit(self.venue, market):
            return req
        return as_stop_limit(req, self.venue, self.market_rules(symbol), self.stop_limit_band)

    def abilities(self, symbol: str) -> BrokerAbilities:
        """What ``symbol``'s market holds, from the exchange's market data: the stop types it
        lists, whether it takes an OCO list; a spot exchange locks a resting sell's coins, so
        two separate exits of one position cannot both rest; an order is moved in one request
        where Kestrel knows the exchange's cancel-replace."""
        symbol = self.canonical_symbol(symbol)
        market = (getattr(self.exchange, "markets", None) or {}).get(symbol) or {}
        stop_market, stop_limit = stop_kinds(self.venue, market)
        return BrokerAbilities(
            stop_market=stop_market, stop_limit=stop_limit,
            oco=oco.oco_allowed(self.exchange, symbol), exits_lock_coins=True,
            cancel_replace=replace.cancel_replace_allowed(self.exchange),
            grants=self.grants is not None,
        )

    async def replace_order(
        self, agent_id: str, symbol: str, order_id: str, req: OrderRequest
    ) -> Order:
        """Cancel ``order_id`` and place ``req`` in one request (``app.ccxt.replace``)."""
        try:
            return await replace.replace(self, agent_id, symbol, order_id, req)
        except (InvalidOrderError, InsufficientFundsError, NotFoundError,
                AccessDeniedError) as exc:
            self.announce.rejected(req, exc, self.clock.now_ms())
            raise

    def entry_of(self, agent_id: str, symbol: str, order_id: str) -> JournalEntry:
        """The journal's entry of an order, found by its id (NOT_FOUND otherwise)."""
        return self._entry(agent_id, symbol, order_id, None)

    def as_sent(self, req: OrderRequest, symbol: str) -> OrderRequest:
        return self._as_sent(req, symbol)

    def forget_balances(self) -> None:
        """The balances changed on the exchange (an order cancelled): read them afresh."""
        self._balances_mono = None

    def check_oco(self, take_profit: OrderRequest, stop_loss: OrderRequest) -> None:
        """Every check of an OCO list that needs no balance (fields, rules, prices), so a
        caller replacing a position's exits knows the new pair is valid before the old goes."""
        oco.checked_legs(self, take_profit, stop_loss)

    async def create_oco(
        self, take_profit: OrderRequest, stop_loss: OrderRequest
    ) -> tuple[Order, Order]:
        """Place a position's take profit and stop loss as one OCO list (``app.ccxt.oco``);
        both legs come back as orders (a stop as the stop-limit it is sent as)."""
        try:
            return await oco.place(self, take_profit, stop_loss)
        except (InvalidOrderError, InsufficientFundsError, NotFoundError,
                AccessDeniedError) as exc:
            self.announce.rejected(take_profit, exc, self.clock.now_ms())
            raise

    # -- placing -------------------------------------------------------------------------------

    def find_order(self, agent_id: str, client_order_id: str) -> Order | None:
        """The order a tool call with this client id placed, when it is known to exist."""
        entry = self.journal.by_agent_order_id(self.venue, agent_id, client_order_id)
        if entry is None or entry.state.in_flight or entry.state.may_send or (
            entry.state is JournalState.NOT_PLACED
        ):
            return None
        return to_order(entry)

    async def placement(self, agent_id: str, client_order_id: str) -> Placement:
        """The journal's word on the order, an in-flight one looked up by client id first
        (never sent again: the reconciler keeps looking while it is not found)."""
        entry = self.journal.by_agent_order_id(self.venue, agent_id, client_order_id)
        if entry is None or entry.state.may_send:
            return Placement(PlacementState.ABSENT)
        if entry.state.in_flight:
            try:
                found = await self.sync.lookup(entry)
            except ToolError:
                found = None  # the lookup failed: still unknown, not absent
            if found is not None:
                return Placement(PlacementState.PLACED, to_order(await self.sync.apply(entry,
                                                                                   found)))
            sent = ms_to_iso(entry.sent_ms or entry.created_ms)
            return Placement(PlacementState.IN_FLIGHT, to_order(entry), (
                f"it was sent to {self.venue} at {sent} and its answer was lost "
                f"({entry.reason or 'no answer'}); it is looked up by client id until it is "
                "found"))
        if entry.state is JournalState.NOT_PLACED:
            return Placement(PlacementState.NOT_PLACED, to_order(entry), (
                f"it was sent to {self.venue} once, its answer was lost, and it was not found "
                f"there ({entry.reason}); the person has been told"))
        return Placement(PlacementState.PLACED, to_order(entry))

    async def lots(self, symbol: str) -> list[OwnedLot]:
        """Each agent's lot from its own journal fills (``app.trading.lots``), no more than the
        exchange holds now; the rest of the balance (the person's orders, adopted orders,
        deposits, coins from before) is the person's."""
        symbol = self.canonical_symbol(symbol)
        balances = await self.refresh_balances(max_age_s=self._fresh_s)
        held = balances.get(self._base(symbol))
        total = ZERO if held is None else held.total
        journal_fills = self.journal.fills(self.venue, symbol, limit=None)
        agents = {e.client_order_id: e.agent_id for e in self.journal.entries(self.venue)}
        fills = to_fills(journal_fills, agents, {symbol: self._base(symbol)},
                         self.quote_currency)
        lots = []
        left = total
        for lot in lot_book(fills).open_lots(symbol):
            if agent_key(lot.owner) == PERSON or left <= 0:
                continue
            size = min(lot.size, left)
            left -= size
            lots.append(OwnedLot(lot.owner, symbol, size, lot.cost * size / lot.size))
        if left > 0:
            lots.append(OwnedLot(PERSON, symbol, left))
        return lots

    async def precheck(self, req: OrderRequest, *, released: Decimal = ZERO) -> CheckedOrder:
        """Every check before the Risk Guard: fields, rules, and funds on fresh balances; what
        the order would place and the quote it would hold back (a buy's cost with its fee).
        An agent the person has not allowed to trade live is refused first."""
        if self.grants is not None:
            self.grants.check(req.agent_id)
        check_request(req)
        symbol = self.canonical_symbol(req.symbol)
        sent = self._as_sent(req, symbol)
        # a stop sent as a stop-limit: the preview says so before anything is placed
        note = "" if sent is req else sent.reason[sent.reason.index(STOP_LIMIT_NOTE):]
        req = sent
        ref = await self.last_price(symbol)
        quantity = self._quantity(req, symbol, ref)
        check_rules(req, quantity, ref, self.market_rules(symbol))
        balances = await self.refresh_balances(max_age_s=self._fresh_s)
        base = self._base(symbol)
        if req.side is Side.SELL:
            held = balances.get(base)
            if held is None or held.total <= 0:
                raise InvalidOrderError(
                    f"You hold no {base}: this is a spot, long-only account, so a SELL can only "
                    "reduce a position you hold (short selling is not allowed).",
                    details={"field": "side", "asset": base, "held": "0"},
                )
            free = min(held.total, held.free + released)  # the replaced exits' coins too
            if quantity > free:
                raise InsufficientFundsError(
                    f"Not enough {base} to sell: needed {fmt(quantity)}, free {fmt(free)} "
                    f"(held {fmt(held.total)}).",
                    details={"asset": base, "needed": fmt(quantity), "free": fmt(free)},
                )
        else:
            at = req.price or req.stop_price or ref
            needed = req.quote_amount if req.quote_amount is not None else (
                quantity * at * (1 + self._taker))
            cash = balances.get(self.quote_currency)
            free = (ZERO if cash is None else cash.free) + released  # a replaced buy's hold
            if needed > free:
                raise InsufficientFundsError(
                    f"Not enough {self.quote_currency}: the order needs about {fmt(needed)} "
                    f"but only {fmt(free)} is free on {self.venue}.",
                    details={"asset": self.quote_currency, "needed": fmt(needed),
                             "free": fmt(free)},
                )
            return CheckedOrder(symbol, quantity, ref, needed, note)
        return CheckedOrder(symbol, quantity, ref, ZERO, note)

    def _quantity(self, req: OrderRequest, symbol: str, ref: Decimal) -> Decimal:
        if req.quote_amount is None:
            return req.quantity
        at = req.price or req.stop_price or ref
        return self.market_rules(symbol).floor_amount(req.quote_amount / (at * (1 + self._taker)))

    async def create_order(self, req: OrderRequest) -> Order:
        try:
            return await self._create(req)
        except (InvalidOrderError, InsufficientFundsError, NotFoundError,
                AccessDeniedError) as exc:
            self.announce.rejected(req, exc, self.clock.now_ms())
            raise

    async def _create(self, req: OrderRequest) -> Order:
        if self.grants is not None:
            self.grants.check(req.agent_id)
        check_request(req)
        symbol = self.canonical_symbol(req.symbol)
        req = self._as_sent(req, symbol)
        ref = self._prices.get(symbol) or await self.last_price(symbol)
        quantity = self._quantity(req, symbol, ref)
        check_rules(req, quantity, ref, self.market_rules(symbol))
        agent_order_id = req.client_order_id or f"auto-{uuid.uuid4().hex[:16]}"
        now = self.clock.now_ms()
        intent = JournalEntry(
            venue=self.venue, client_order_id=derive(self.venue, req.agent_id, agent_order_id),
            agent_id=req.agent_id, agent_order_id=agent_order_id, symbol=symbol, side=req.side,
            order_type=req.order_type, quantity=quantity, created_ms=now, price=req.price,
            stop_price=req.stop_price, quote_amount=req.quote_amount,
            reduce_only=req.reduce_only, exit_kind=req.exit_kind, note=req.reason,
            updated_ms=now,
        )
        entry = self.journal.by_agent_order_id(self.venue, req.agent_id, agent_order_id)
        if entry is not None:
            if not entry.same_intent(intent):
                raise InvalidOrderError(
                    f"client_order_id {agent_order_id!r} was already used for another order "
                    f"({entry.side.value} {fmt(entry.quantity)} {entry.symbol}); use a new id.",
                    details={"client_order_id": agent_order_id},
                )
            if entry.state.in_flight:
                return await self.sending.settle_now(
                    entry, None, "an earlier attempt's outcome is still being checked")
            if entry.state is JournalState.NOT_PLACED:
                found = await self.sync.lookup(entry)  # it may have turned up since
                if found is not None:
                    return to_order(await self.sync.apply(entry, found))
                raise ExchangeError(
                    f"The order with client_order_id {agent_order_id!r} was sent once, its "
                    f"outcome was lost, and it was {entry.reason or 'not found'}. The person "
                    "has been told; it is not sent again under this id. Check get_open_orders, "
                    "then decide anew.",
                    details={"client_order_id": agent_order_id, "state": entry.state.value},
                )
            if not entry.state.may_send:
                return to_order(entry)
        else:
            entry = self.journal.record(intent)
        await self.sending.step("journaled", entry)
        entry = self.journal.update(
            entry, state=JournalState.SENDING, attempts=entry.attempts + 1,
            sent_ms=self.clock.now_ms(), updated_ms=self.clock.now_ms(), reason="", checks=0,
        )
        await self.sending.step("sending", entry)
        return await self.sending.send(entry)

    async def refresh_balances(self, max_age_s: float = 0.0) -> dict[str, AssetBalance]:
        if self._balances_mono is not None and self._mono() - self._balances_mono <= max_age_s:
            return self._balances
        raw = await self._read(self.exchange.fetch_balance, "reading the account's balances")
        self._balances = views.balances_from(raw)
        self._balances_mono = self._mono()
        self.announce.account_read(self.clock.now_ms())
        return self._balances

    async def _read[T](self, call: Callable[[], Awaitable[T]], what: str) -> T:
        return await retry_read(
            call, self.venue, what=what, policy=self._retry, sleep=self._sleep,
            response_headers=lambda: getattr(self.exchange, "last_response_headers", None),
        )

    # -- orders --------------------------------------------------------------------------------

    def _entry(self, agent_id: str, symbol: str, order_id: str | None,
               client_order_id: str | None) -> JournalEntry:
        if not order_id and not client_order_id:
            raise InvalidOrderError("Give <order_id> or <client_order_id> to say which order.",
                                    details={"field": "order_id"})
        entry = None
        if order_id:
            entry = self.journal.by_exchange_id(self.venue, order_id) or self.journal.get(
                self.venue, order_id)
        elif client_order_id:
            entry = self.journal.by_agent_order_id(self.venue, agent_id, client_order_id)
        wanted = order_id or client_order_id
        if entry is None or entry.symbol.upper() != symbol.upper():
            raise NotFoundError(f"No order {wanted!r} for {symbol} exists in this account.",
                                details={"order_id": wanted, "symbol": symbol})
        return entry

    async def cancel_order(
        self,
        agent_id: str,
        symbol: str,
        order_id: str | None = None,
        client_order_id: str | None = None,
    ) -> Order:
        entry = self._entry(agent_id, symbol, order_id, client_order_id)
        if agent_key(entry.agent_id) != agent_key(agent_id):
            raise AccessDeniedError(
                f"Order {order_id or client_order_id} belongs to agent {entry.agent_id!r}; an "
                "agent may only cancel its own orders.",
                details={"order_id": order_id or client_order_id, "owner": entry.agent_id})
        if entry.state.in_flight:
            entry = await self._refresh(entry)
        if not entry.state.on_exchange_open or entry.exchange_order_id is None:
            order = to_order(entry)
            raise InvalidOrderError(
                f"Order {order.order_id} is {order.status.value} and cannot be cancelled.",
                details={"order_id": order.order_id, "status": order.status.value})
        try:
            raw = await self._read(
                lambda: self.exchange.cancel_order(entry.exchange_order_id, entry.symbol),
                f"cancelling order {entry.exchange_order_id}")
        except ToolError:
            entry = await self._refresh(entry)  # filled or gone meanwhile, or a lost answer
            if entry.state.on_exchange_open:
                raise
            order = to_order(entry)
            raise InvalidOrderError(
                f"Order {order.order_id} is already {order.status.value} and cannot be "
                "cancelled.", details={"order_id": order.order_id, "status": order.status.value}
            ) from None
        if not check_answer(raw, entry.client_order_id).ok or raw.get("status") is None:
            entry = await self._refresh(entry)
        else:
            entry = await self.sync.apply(entry, raw)
        order = to_order(entry)
        if order.status is OrderStatus.CANCELLED:
            # what it held is free again: the next order's check must not read the old balance
            self._balances_mono = None
            self.announce.cancelled(order)
            other = oco.sibling(self, entry)
            if other is not None and other.state.on_exchange_open:
                # the exchange cancels the whole list with one leg: its other leg says so
                other = await self._refresh(other)
                if not other.state.on_exchange_open:
                    self.announce.cancelled(to_order(other))
        return order

    async def _refresh(self, entry: JournalEntry) -> JournalEntry:
        raw = await self.sync.fetch_by_id(entry)
        return entry if raw is None else await self.sync.apply(entry, raw)

    async def get_order(self, agent_id: str, symbol: str, order_id: str) -> Order:
        entry = self._entry(agent_id, symbol, order_id, None)
        if not entry.state.final:
            entry = await self._refresh(entry)
        return to_order(entry)

    async def open_orders(
        self, agent_id: str | None = None, symbol: str | None = None
    ) -> list[Order]:
        wanted = None if symbol is None else self.canonical_symbol(symbol)
        seen = set()
        for raw in await self.sync.fetch_open(wanted):
            entry = self.sync.entry_for(raw)
            if entry is not None:
                seen.add(entry.client_order_id)
                await self.sync.apply(entry, raw)
        states = [s for s in JournalState if s.on_exchange_open]
        for entry in self.journal.entries(self.venue, states, wanted):
            if entry.client_order_id not in seen:
                await self._refresh(entry)  # closed since it was last seen
        return [to_order(e) for e in self.journal.entries(self.venue, states, wanted)
                if agent_id is None or agent_key(e.agent_id) == agent_key(agent_id)]

    # -- account -------------------------------------------------------------------------------

    async def positions(self, symbol: str | None = None) -> list[Position]:
        balances = await self.refresh_balances(max_age_s=self._fresh_s)
        out, _equity = await self._valued(balances)
        return [p for p in out if symbol is None or p.symbol.upper() == symbol.upper()]

    async def _valued(
        self, balances: Mapping[str, AssetBalance]
    ) -> tuple[list[Position], Decimal]:
        held = self._holdings(balances)
        prices = {h.symbol: await self.last_price(h.symbol) for h in held}
        cash = balances.get(self.quote_currency)
        return views.positions(held, prices, ZERO if cash is None else cash.total)

    def _holdings(self, balances: Mapping[str, AssetBalance]) -> list[views.Holding]:
        symbols = set(self.market.symbols())
        fills_of = {s: self.journal.fills(self.venue, s) for s in self.journal.symbols(self.venue)}
        return views.holdings(balances, self.quote_currency, symbols, fills_of)

    async def account(self) -> AccountState:
        balances = await self.refresh_balances()
        positions, equity = await self._valued(balances)
        stats = self._account_stats(equity)
        self.journal.record_equity(self.venue, self.clock.now_ms(), equity)
        cash = balances.get(self.quote_currency)
        states = [s for s in JournalState if s.on_exchange_open]
        return AccountState(
            mode=self.mode, quote_currency=self.quote_currency,
            cash=ZERO if cash is None else cash.total, equity=equity,
            today_pnl=equity - stats["day_start_equity"],
            total_pnl=equity - stats["initial_equity"],
            max_drawdown_pct=stats["max_drawdown_pct"],
            assets=tuple(balances.values()), positions=tuple(positions),
            open_orders=tuple(to_order(e) for e in self.journal.entries(self.venue, states)),
        )

    def _account_stats(self, equity: Decimal) -> dict[str, Decimal]:
        """Initial, day-start and peak equity and the deepest drawdown, kept in the journal."""
        keys = ("initial_equity", "day_start_equity", "peak_equity", "max_drawdown_pct", "day")
        stored = {k: self.journal.meta(self.venue, k) for k in keys}
        day = self.clock.now_ms() // DAY_MS
        stats = {k: Decimal(v) for k, v in stored.items() if v is not None}
        stats.setdefault("initial_equity", equity)
        stats.setdefault("peak_equity", equity)
        stats.setdefault("max_drawdown_pct", ZERO)
        if stats.get("day") != day:
            stats["day"], stats["day_start_equity"] = Decimal(day), equity
        stats["peak_equity"] = max(stats["peak_equity"], equity)
        if stats["peak_equity"] > 0:
            drawdown = (stats["peak_equity"] - equity) / stats["peak_equity"] * 100
            stats["max_drawdown_pct"] = max(stats["max_drawdown_pct"],
                                            drawdown.quantize(Decimal("0.01")))
        self.journal.set_meta(self.venue, {k: str(v) for k, v in stats.items()})
        return stats

    async def trades(self, symbol: str | None = None, limit: int | None = 20) -> list[Fill]:
        wanted = None if symbol is None else self.canonical_symbol(symbol)
        for sym in [wanted] if wanted is not None else self.journal.symbols(self.venue):
            assert sym is not None
            await self.sync.catch_up_trades(sym)
        fills = self.journal.fills(self.venue, wanted, limit=None)
        agents = {e.client_order_id: e.agent_id for e in self.journal.entries(self.venue)}
        bases = {f.symbol: self._base(f.symbol) for f in fills}
        out = to_fills(fills, agents, bases, self.quote_currency)[::-1]  # newest first
        return out[:limit] if limit is not None else out

    async def equity_curve(self, from_ms: int = -1) -> list[EquityPoint]:
        """The equity of each account reading at or after ``from_ms`` (kept in the journal)."""
        return [EquityPoint(t, e) for t, e in self.journal.equity_points(self.venue, from_ms)]

    def position_size(self, symbol: str) -> Decimal:
        balance = self._balances.get(self._base(symbol))
        return ZERO if balance is None else balance.total

    def risk_view(self) -> RiskView:
        """The account as last fetched (``precheck`` refreshes it before every order)."""
        held = self._holdings(self._balances)
        cash_balance = self._balances.get(self.quote_currency)
        cash = ZERO if cash_balance is None else cash_balance.total
        views_ = {}
        for h in held:
            price = self._prices.get(h.symbol) or h.avg_price or ZERO
            views_[h.symbol] = PositionView(h.size, h.avg_price or price, price)
        equity = cash + sum((v.value for v in views_.values()), ZERO)
        open_entries = self.journal.entries(
            self.venue, [s for s in JournalState if s.on_exchange_open or s.in_flight])
        pending = []
        for e in open_entries:
            reserved = ZERO
            if e.side is Side.BUY:
                at = e.price or e.stop_price or self._prices.get(e.symbol) or ZERO
                reserved = e.quote_amount or ((e.quantity - e.filled_quantity) * at)
            pending.append(PendingOrder(e.agent_id, e.symbol, e.side, reserved, e.reduce_only))
        day_start = self.journal.meta(self.venue, "day_start_equity")
        peak = self.journal.meta(self.venue, "peak_equity")
        return RiskView(
            now_ms=self.clock.now_ms(), quote_currency=self.quote_currency, equity=equity,
            cash=cash, day_start_equity=Decimal(day_start) if day_start else equity,
            peak_equity=max(Decimal(peak), equity) if peak else equity, positions=views_,
            pending=tuple(pending), agent_cost=self._agent_cost(),
        )

    def _agent_cost(self) -> dict[str, Decimal]:
        """Quote capital each agent has in positions at cost, from its own journal fills by the
        average-cost rule, keyed by ``agent_key`` (the agent-budget rule's view)."""
        agents = {e.client_order_id: e.agent_id for e in self.journal.entries(self.venue)}
        by_agent: dict[tuple[str, str], list[JournalFill]] = {}
        for fill in self.journal.fills(self.venue, None, limit=None):
            owner = agents.get(fill.client_order_id)
            if owner is not None:
                by_agent.setdefault((agent_key(owner), fill.symbol), []).append(fill)
        out: dict[str, Decimal] = {}
        for (key, symbol), fills in by_agent.items():
            size, avg, _ = average_cost(fills, self._base(symbol), self.quote_currency)
            if size > 0:
                out[key] = out.get(key, ZERO) + size * avg
        return out
