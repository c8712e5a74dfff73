"""Trading types: orders, fills, positions and the account state, with their enums.

Money and quantities are ``Decimal``: these values cross into the ledger, the tools' XML and the UI,
where float noise would be a defect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum


class Mode(StrEnum):
    """Which runtime an account belongs to; always visible to agents and the person."""

    BACKTEST = "BACKTEST"
    PAPER = "PAPER"
    LIVE = "LIVE"


class Side(StrEnum):
    BUY = "BUY"
    SELL = "SELL"


class OrderType(StrEnum):
    MARKET = "MARKET"
    LIMIT = "LIMIT"
    STOP = "STOP"
    STOP_LIMIT = "STOP_LIMIT"


class OrderStatus(StrEnum):
    SUBMITTED = "SUBMITTED"
    PARTIALLY_FILLED = "PARTIALLY_FILLED"
    FILLED = "FILLED"
    CANCELLED = "CANCELLED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"

    @property
    def is_open(self) -> bool:
        return self in (OrderStatus.SUBMITTED, OrderStatus.PARTIALLY_FILLED)


class ExitKind(StrEnum):
    """Why an order exists beyond a plain entry: reduce-only exits are never blocked by entry
    rules."""

    NONE = "NONE"
    TAKE_PROFIT = "TAKE_PROFIT"
    STOP_LOSS = "STOP_LOSS"
    CLOSE = "CLOSE"


@dataclass(slots=True)
class Order:
    """An order as the broker knows it; mutable status fields change as it fills."""

    order_id: str
    client_order_id: str
    agent_id: str
    symbol: str
    side: Side
    order_type: OrderType
    quantity: Decimal
    created_ms: int
    price: Decimal | None = None
    stop_price: Decimal | None = None
    reduce_only: bool = False
    exit_kind: ExitKind = ExitKind.NONE
    status: OrderStatus = OrderStatus.SUBMITTED
    filled_quantity: Decimal = Decimal(0)
    average_price: Decimal | None = None
    fee: Decimal = Decimal(0)
    fee_currency: str = ""
    reason: str = ""
    updated_ms: int = 0
    triggered: bool = False

    @property
    def remaining(self) -> Decimal:
        return self.quantity - self.filled_quantity


@dataclass(frozen=True, slots=True)
class Fill:
    """One execution of (part of) an order."""

    fill_id: str
    order_id: str
    agent_id: str
    symbol: str
    side: Side
    quantity: Decimal
    price: Decimal
    fee: Decimal
    fee_currency: str
    time_ms: int
    realized_pnl: Decimal = Decimal(0)
    is_maker: bool = False


@dataclass(frozen=True, slots=True)
class Position:
    """An open spot position in one symbol, valued at ``current_price``."""

    symbol: str
    size: Decimal
    avg_price: Decimal
    current_price: Decimal
    unrealized_pnl: Decimal
    weight_pct: Decimal


@dataclass(frozen=True, slots=True)
class AssetBalance:
    currency: str
    free: Decimal
    used: Decimal

    @property
    def total(self) -> Decimal:
        return self.free + self.used


@dataclass(frozen=True, slots=True)
class AccountState:
    """The full account status an agent sees (the Chinese design's account.status)."""

    mode: Mode
    quote_currency: str
    cash: Decimal
    equity: Decimal
    today_pnl: Decimal
    total_pnl: Decimal
    max_drawdown_pct: Decimal
    assets: tuple[AssetBalance, ...] = ()
    positions: tuple[Position, ...] = ()
    open_orders: tuple[Order, ...] = field(default_factory=tuple)
