"""What the Risk Guard judges: an order intent, a view of the account, and the decision.

The broker builds the ``RiskView`` (``app.domain.risk_view``, re-exported here) from its ledger; the
guard is pure and sees nothing else, so every rule can be tested with plain values and no order can
reach a broker without passing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from app.domain.risk_view import PendingOrder, PositionView, RiskView
from app.domain.trading import ExitKind, OrderType, Side

__all__ = ["OrderIntent", "PendingOrder", "PositionView", "RiskDecision", "RiskView"]


@dataclass(frozen=True, slots=True)
class OrderIntent:
    """An order an agent wants to place, before it reaches any broker.

    Attributes:
        reference_price: the last traded price, used to value market orders and check limit bands.
        reduces_position: true for reduce-only exits (TP/SL, close) and sells that only shrink a
            long; entry rules never block these.
        reserve: the quote amount the broker will hold back for a buy (fee and slippage
            included), as its precheck computed it; ``None`` means the notional. Exposure limits
            count this, since it is what the order can spend.
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
    reserve: Decimal | None = None

    @property
    def notional(self) -> Decimal:
        """Quote value of the order at its limit price, or at the reference price."""
        return self.quantity * (self.price if self.price is not None else self.reference_price)

    @property
    def commitment(self) -> Decimal:
        """The quote this order adds to exposure: a buy's reserve (or notional); zero for a sell."""
        if self.side is not Side.BUY:
            return Decimal(0)
        return self.reserve if self.reserve is not None else self.notional

    def as_pending(self) -> PendingOrder:
        """This order as the guard counts it between its acceptance and the broker's answer."""
        return PendingOrder(self.agent_id, self.symbol, self.side, self.commitment,
                            exit=self.reduces_position)


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
