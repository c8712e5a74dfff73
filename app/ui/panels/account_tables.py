"""Column definitions of the account panel's tables: positions, open orders and fills.

Kept apart from the panel so the panel reads as layout and behaviour, and so every number is printed
by one rule: prices with the market's decimals, money with the account currency's, sizes with the
decimals they have, P&L and sides coloured.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from app.domain.trading import Fill, Order, Position, Side
from app.ui.names import AgentNames
from app.ui.panels.record_model import Column
from app.ui.panels.style import (
    COLORS,
    format_fixed,
    format_pct,
    format_quantity,
    format_time,
    pnl_color,
)

Decimals = Callable[[str], int]


def side_color(side: Side) -> str:
    return COLORS["up"] if side is Side.BUY else COLORS["down"]


def position_columns(price_decimals: Decimals, money: int) -> list[Column[Position]]:
    def price(p: Position, value: Decimal) -> str:
        return format_fixed(value, price_decimals(p.symbol))

    return [
        Column("Symbol", lambda p: p.symbol),
        Column("Size", lambda p: format_quantity(p.size), numeric=True, key=lambda p: p.size),
        # the buys' fees included (as on the exchange): selling there breaks even before its fee
        Column("Avg cost", lambda p: price(p, p.avg_price), numeric=True,
               key=lambda p: p.avg_price),
        Column("Last", lambda p: price(p, p.current_price), numeric=True,
               key=lambda p: p.current_price),
        Column("Value", lambda p: format_fixed(p.size * p.current_price, money), numeric=True,
               key=lambda p: p.size * p.current_price),
        Column("Unrealized P&L", lambda p: format_fixed(p.unrealized_pnl, money, sign=True),
               numeric=True, color=lambda p: pnl_color(p.unrealized_pnl),
               key=lambda p: p.unrealized_pnl),
        Column("P&L %", lambda p: format_pct(_pnl_pct(p), sign=True), numeric=True,
               color=lambda p: pnl_color(p.unrealized_pnl), key=_pnl_pct),
        Column("Weight", lambda p: format_pct(p.weight_pct), numeric=True,
               key=lambda p: p.weight_pct),
        Column("", lambda p: ""),  # the Close button's cell
    ]


def _pnl_pct(p: Position) -> Decimal:
    cost = p.avg_price * p.size
    return p.unrealized_pnl / cost * 100 if cost else Decimal(0)


def _order_price(o: Order, decimals: int) -> str:
    parts = []
    if o.price is not None:  # a stop-limit's limit is named: it is where it may stop filling
        limit = "limit " if o.stop_price is not None else ""
        parts.append(limit + format_fixed(o.price, decimals))
    if o.stop_price is not None:
        parts.append(f"stop {format_fixed(o.stop_price, decimals)}")
    return " / ".join(parts) if parts else "market"


def order_columns(price_decimals: Decimals, *, live: bool = False,
                  names: AgentNames | None = None) -> list[Column[Order]]:
    """The open orders' columns; on a LIVE account (real money) every row's status says so.
    Whose order it is shows by name (``names``), its id in the tooltip."""
    tag = "LIVE · " if live else ""
    who = names or AgentNames()
    return [
        Column("Time", lambda o: format_time(o.created_ms), key=lambda o: o.created_ms),
        Column("Agent", lambda o: who.name(o.agent_id), tooltip=lambda o: who.tooltip(o.agent_id),
               key=lambda o: who.name(o.agent_id).casefold()),
        Column("Symbol", lambda o: o.symbol),
        Column("Side", lambda o: o.side.value, color=lambda o: side_color(o.side)),
        Column("Type", lambda o: o.order_type.value
               + ("" if o.exit_kind.value == "NONE" else f" · {o.exit_kind.value}")),
        Column("Quantity", lambda o: format_quantity(o.quantity), numeric=True,
               key=lambda o: o.quantity),
        Column("Filled", lambda o: format_quantity(o.filled_quantity), numeric=True,
               key=lambda o: o.filled_quantity),
        Column("Price", lambda o: _order_price(o, price_decimals(o.symbol)), numeric=True,
               key=lambda o: o.price or o.stop_price or Decimal(0)),
        Column("Status", lambda o: tag + o.status.value),
        Column("Order id", lambda o: o.order_id, tooltip=lambda o: o.reason or o.order_id),
        Column("", lambda o: ""),  # the Cancel button's cell
    ]


def fill_columns(price_decimals: Decimals, money: int,
                 names: AgentNames | None = None) -> list[Column[Fill]]:
    who = names or AgentNames()
    return [
        Column("Time", lambda f: format_time(f.time_ms), key=lambda f: f.time_ms),
        Column("Agent", lambda f: who.name(f.agent_id), tooltip=lambda f: who.tooltip(f.agent_id),
               key=lambda f: who.name(f.agent_id).casefold()),
        Column("Symbol", lambda f: f.symbol),
        Column("Side", lambda f: f.side.value, color=lambda f: side_color(f.side)),
        Column("Quantity", lambda f: format_quantity(f.quantity), numeric=True,
               key=lambda f: f.quantity),
        Column("Price", lambda f: format_fixed(f.price, price_decimals(f.symbol)), numeric=True,
               key=lambda f: f.price),
        Column("Value", lambda f: format_fixed(f.quantity * f.price, money), numeric=True,
               key=lambda f: f.quantity * f.price),
        Column("Fee", lambda f: f"{format_fixed(f.fee, money + 2)} {f.fee_currency}", numeric=True,
               key=lambda f: f.fee),
        Column("Realized P&L", lambda f: format_fixed(f.realized_pnl, money, sign=True)
               if f.realized_pnl else "—", numeric=True, color=lambda f: pnl_color(f.realized_pnl),
               key=lambda f: f.realized_pnl),
        Column("Liquidity", lambda f: "maker" if f.is_maker else "taker"),
        Column("Order id", lambda f: f.order_id),
    ]
