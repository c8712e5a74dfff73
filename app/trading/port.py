"""The ``Broker`` port: what order entry, the runtime and the panels ask of any broker.

``PaperBroker`` (backtests, paper trading) and ``CcxtBroker`` (a live account) implement it. Nothing
above a venue sees which one it talks to, except through ``mode``, which every agent can read, and
``abilities``: what a market can hold (a stop, a linked pair of exits), declared by the broker as
data, so order entry decides before anything is sent, never by trying.
A broker announces what happens to orders (``OrderPlaced``, ``OrderCancelled``, ``OrderFilled``,
and its own refusals as ``OrderRejected``) through the event sink it is built with; panels and the
agents' fill routing follow those events and read the rest through this port.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Protocol

from app.domain.errors import InvalidOrderError
from app.domain.market_rules import MarketRules
from app.domain.risk_view import RiskView
from app.domain.trading import AccountState, ExitKind, Fill, Mode, Order, OrderType, Position, Side

# how an order's reason starts when a broker sent a STOP as a stop-limit (the exchange lists no
# stop-market order there); the tools then show its limit and the trade-off
STOP_LIMIT_NOTE = "sent as a STOP_LIMIT"


def require_account_quote(symbol: str, quote: str, account_quote: str) -> None:
    """Refuse a pair quoted in another currency than the account's, in the same words on paper
    and live: the account's cash, equity and risk limits are all counted in ``account_quote``."""
    if quote != account_quote:
        raise InvalidOrderError(
            f"{symbol} is quoted in {quote}, but this account trades in {account_quote}; only "
            f"{account_quote} pairs can be traded.",
            details={"symbol": symbol, "quote": quote, "account_quote": account_quote},
        )


@dataclass(frozen=True, slots=True)
class OrderRequest:
    """An order as the tools hand it to a broker, after the Risk Guard accepted it.

    Attributes:
        quantity: base amount. For a MARKET BUY given ``quote_amount`` it is the estimate at the
            reference price; the broker re-computes it from the fill price so that the spend
            (fee included) never exceeds ``quote_amount``.
        quote_amount: spend at most this much quote currency, fee included (MARKET BUY only).
        client_order_id: empty means "generate one"; a repeated id returns the existing order.
    """

    agent_id: str
    symbol: str
    side: Side
    order_type: OrderType
    quantity: Decimal
    price: Decimal | None = None
    stop_price: Decimal | None = None
    client_order_id: str = ""
    reduce_only: bool = False
    exit_kind: ExitKind = ExitKind.NONE
    reason: str = ""
    quote_amount: Decimal | None = None


@dataclass(frozen=True, slots=True)
class CheckedOrder:
    """What a broker's precheck found an order to be, without placing it.

    Attributes:
        quantity: the base quantity (estimated from ``quote_amount`` when that was given).
        reference_price: the last price, which market orders are valued at.
        reserve: the quote amount the order will hold back (cost, fee and slippage of a buy); zero
            for a sell. The Risk Guard counts it as the order's exposure.
        note: how the broker will send it when that is not as asked (a STOP sent as a
            stop-limit, its limit and the trade-off); empty otherwise.
    """

    symbol: str
    quantity: Decimal
    reference_price: Decimal
    reserve: Decimal
    note: str = ""


@dataclass(frozen=True, slots=True)
class BrokerAbilities:
    """What one market of a broker can hold and do, as the broker declares it.

    Attributes:
        stop_market: it holds a stop that sells at market once touched.
        stop_limit: it holds a stop that places a limit order once touched (a STOP is sent so
            where no stop-market exists; its limit and the trade-off are said).
        oco: it holds a take profit and a stop loss as one linked list (one fills or triggers,
            the exchange cancels the other).
        exits_lock_coins: a resting sell holds its coins, so two separate exits of one position
            cannot rest together (a spot exchange); a paper account's exits share them.
        cancel_replace: an order can be replaced in one request, with no moment without it.
        grants: only agents the person allowed may trade here (a live account).
    """

    stop_market: bool = True
    stop_limit: bool = True
    oco: bool = False
    exits_lock_coins: bool = False
    cancel_replace: bool = False
    grants: bool = False

    @property
    def holds_stop(self) -> bool:
        return self.stop_market or self.stop_limit

    @property
    def holds_both_exits(self) -> bool:
        """A take profit and a stop loss can protect one position at once."""
        return self.oco or not self.exits_lock_coins


PAPER_ABILITIES = BrokerAbilities(cancel_replace=True)


class PlacementState(StrEnum):
    """What a broker knows of an order asked for under a client order id."""

    ABSENT = "absent"  # never booked (or certainly not on the exchange): it may be sent
    IN_FLIGHT = "in_flight"  # sent; its outcome is still being checked
    PLACED = "placed"  # booked: the order exists (open or done)
    NOT_PLACED = "not_placed"  # sent, its answer lost, and not found after every lookup


@dataclass(frozen=True, slots=True)
class Placement:
    """A broker's word about one client order id: its state, the order when it exists, and in
    words what is being checked (an in-flight order) or why it is taken as not placed."""

    state: PlacementState
    order: Order | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class OwnedLot:
    """The part of a position one owner holds: an agent, or the person (which includes coins
    Kestrel never bought, such as a deposit). ``cost``: what it cost, buy fees included."""

    owner: str
    symbol: str
    size: Decimal
    cost: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class EquityPoint:
    """The account's equity (quote currency) at one moment of its history."""

    time_ms: int
    equity: Decimal


class Broker(Protocol):
    mode: Mode

    async def create_order(self, req: OrderRequest) -> Order:
        """Place an order, or return the existing one with the same client order id.

        Raises:
            InvalidOrderError, InsufficientFundsError, NotFoundError: naming the field and numbers.
        """
        ...

    async def cancel_order(
        self,
        agent_id: str,
        symbol: str,
        order_id: str | None = None,
        client_order_id: str | None = None,
    ) -> Order:
        ...

    async def get_order(self, agent_id: str, symbol: str, order_id: str) -> Order:
        ...

    async def open_orders(
        self, agent_id: str | None = None, symbol: str | None = None
    ) -> list[Order]:
        ...

    async def account(self) -> AccountState:
        ...

    async def positions(self, symbol: str | None = None) -> list[Position]:
        ...

    async def trades(self, symbol: str | None = None, limit: int | None = 20) -> list[Fill]:
        """The account's newest ``limit`` fills (None: all of them), newest first."""
        ...

    async def equity_curve(self, from_ms: int = -1) -> list[EquityPoint]:
        """The account's equity history at or after ``from_ms``, oldest first (the last point
        may be revised: it is the newest value of the latest moment)."""
        ...

    def risk_view(self) -> RiskView:
        ...


class TradingBroker(Broker, Protocol):
    """What the account and trading tools need beyond ``Broker``: symbols, rules, prices, checks."""

    @property
    def quote_currency(self) -> str:
        """The account's currency; read-only here, so a wrapper may translate it."""
        ...

    def canonical_symbol(self, symbol: str) -> str:
        """The broker's spelling of a symbol; NOT_FOUND when it is unknown."""
        ...

    def market_rules(self, symbol: str) -> MarketRules:
        ...

    async def last_price(self, symbol: str) -> Decimal:
        ...

    def find_order(self, agent_id: str, client_order_id: str) -> Order | None:
        ...

    def position_size(self, symbol: str) -> Decimal:
        ...

    async def precheck(self, req: OrderRequest, *, released: Decimal = Decimal(0)) -> CheckedOrder:
        """Validate without placing; say what the order would be and hold back.

        ``released``: what an open order holds now that goes before this order is sent: base
        coins for a sell (the exits a new exit replaces), quote for a buy (the buy it replaces);
        they count as free, since an exchange that locks a resting order's funds would
        otherwise refuse every move of a stop or a limit.
        """
        ...

    async def replace_order(
        self, agent_id: str, symbol: str, order_id: str, req: OrderRequest
    ) -> Order:
        """Cancel the open order ``order_id`` of ``agent_id`` and place ``req`` in its place in
        one request, with no moment without either (only where
        ``abilities(symbol).cancel_replace``).

        Raises:
            InvalidOrderError: the order is not open, or the new one is refused (its message
                says whether the old one was cancelled: ``details["old_cancelled"]``).
        """
        ...

    def abilities(self, symbol: str) -> BrokerAbilities:
        """What ``symbol``'s market can hold (from the exchange's static market data)."""
        ...

    async def placement(self, agent_id: str, client_order_id: str) -> Placement:
        """What became of the order ``agent_id`` asked for under ``client_order_id``; an order
        whose outcome is unknown is looked up once first."""
        ...

    async def lots(self, symbol: str) -> list[OwnedLot]:
        """Who holds which part of the ``symbol`` position (``app.trading.lots``), read fresh;
        what no agent bought is the person's. Empty when nothing is held."""
        ...

    def check_oco(self, take_profit: OrderRequest, stop_loss: OrderRequest) -> None:
        """Every check of an OCO list that needs no balance, so a caller replacing a
        position's exits knows the pair is valid before the old exits go. Only called where
        ``abilities(symbol).oco``."""
        ...

    async def create_oco(
        self, take_profit: OrderRequest, stop_loss: OrderRequest
    ) -> tuple[Order, Order]:
        """Place a take profit and a stop loss as one OCO list. Only called where
        ``abilities(symbol).oco``."""
        ...
