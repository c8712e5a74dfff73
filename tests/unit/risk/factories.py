"""Plain-value builders for risk tests: an intent and an account view with sensible defaults."""

from __future__ import annotations

from decimal import Decimal

from app.domain.trading import OrderType, Side
from app.risk.types import OrderIntent, PendingOrder, PositionView, RiskView

D = Decimal
NOON_MS = 1_700_049_600_000  # 2023-11-15 12:00 UTC


def intent(
    *,
    symbol: str = "BTC/USDT",
    side: Side = Side.BUY,
    order_type: OrderType = OrderType.MARKET,
    quantity: str = "0.1",
    reference_price: str = "40000",
    price: str | None = None,
    stop_price: str | None = None,
    agent_id: str = "trader-1",
    reduces_position: bool = False,
) -> OrderIntent:
    return OrderIntent(
        agent_id=agent_id,
        symbol=symbol,
        side=side,
        order_type=order_type,
        quantity=D(quantity),
        reference_price=D(reference_price),
        price=None if price is None else D(price),
        stop_price=None if stop_price is None else D(stop_price),
        reduces_position=reduces_position,
    )


def pending_buy(
    symbol: str = "BTC/USDT", reserved: str = "0", agent_id: str = "other-agent"
) -> PendingOrder:
    return PendingOrder(agent_id, symbol, Side.BUY, D(reserved))


def pending_exit(symbol: str = "BTC/USDT", agent_id: str = "other-agent") -> PendingOrder:
    return PendingOrder(agent_id, symbol, Side.SELL, exit=True)


def view(
    *,
    equity: str = "100000",
    cash: str = "100000",
    day_start_equity: str | None = None,
    peak_equity: str | None = None,
    positions: dict[str, tuple[str, str, str]] | None = None,
    open_orders: int = 0,
    pending: tuple[PendingOrder, ...] = (),
    agent_cost: dict[str, str] | None = None,
    now_ms: int = NOON_MS,
) -> RiskView:
    """``positions`` maps symbol -> (size, avg_price, last_price); ``open_orders`` adds that many
    pending exits (orders that hold back no quote) to ``pending``."""
    return RiskView(
        now_ms=now_ms,
        quote_currency="USDT",
        equity=D(equity),
        cash=D(cash),
        day_start_equity=D(day_start_equity or equity),
        peak_equity=D(peak_equity or equity),
        positions={
            s: PositionView(D(size), D(avg), D(last))
            for s, (size, avg, last) in (positions or {}).items()
        },
        pending=pending + tuple(pending_exit() for _ in range(open_orders)),
        agent_cost={a: D(v) for a, v in (agent_cost or {}).items()},
    )
