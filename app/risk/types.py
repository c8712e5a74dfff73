"""What the Risk Guard judges: an order intent, a view of the account, and the decision.

The broker builds the ``RiskView`` from its ledger; the guard is pure and sees nothing else, so
every rule can be tested with plain values and no order can reach a broker without passing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from app.domain.trading import ExitKind, OrderType, Side


@dataclass(frozen=True, slots=True)
class OrderIntent:
    """An order an agent wants to place, before it reaches any broker.

    Attributes:
        reference_price: the last traded price, used to value market orders and check limit bands.
        reduces_position: true for reduce-only exits (TP/SL, close) and sells that only shrink a
            long; entry rules never block these.
    """

    agent_id: str
    symbol: str
    side: Side
    order_type: OrderType
    quantity: Decimal
    reference_price: Decimal
    price: Decimal | None = None
    stop_price: Decimal | None = None
    reduces_position: bool = False
    exit_kind: ExitKind = ExitKind.NONE

    @property
    def notional(self) -> Decimal:
        """Quote value of the order at its limit price, or at the reference price."""
        return self.quantity * (self.price if self.price is not None else self.reference_price)


@dataclass(frozen=True, slots=True)
class PositionView:
    size: Decimal
    avg_price: Decimal
    last_price: Decimal

    @property
    def value(self) -> Decimal:
        return self.size * self.last_price


@dataclass(frozen=True, slots=True)
class RiskView:
    """The account as the guard needs it at the moment of the decision.

    Attributes:
        day_start_equity: equity at the start of the current UTC day (of the market clock).
        peak_equity: the highest equity seen, for the drawdown halt.
        agent_committed: quote capital each agent has in positions (at cost) plus open buy orders.
        open_buy_notional: quote value reserved by all open buy orders.
    """

    now_ms: int
    quote_currency: str
    equity: Decimal
    cash: Decimal
    day_start_equity: Decimal
    peak_equity: Decimal
    positions: Mapping[str, PositionView] = field(default_factory=dict)
    open_orders: int = 0
    open_buy_notional: Decimal = Decimal(0)
    agent_committed: Mapping[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RiskDecision:
    """One decision of the guard, accepted or not, as the audit trail stores it."""

    now_ms: int
    agent_id: str
    symbol: str
    side: Side
    order_type: OrderType
    quantity: Decimal
    notional: Decimal
    accepted: bool
    rule: str = ""
    reason: str = ""
