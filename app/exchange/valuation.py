"""What the paper account is worth and what it reports: positions, account state, the risk view.

Valuation is one rule everywhere: a position is worth its size times the last visible close, so
the account an agent reads, the equity curve and the Risk Guard's view always agree. Plain
functions over a ``PaperAccount`` and the marks of this moment: nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Protocol

from app.domain.risk_view import PendingOrder, PositionView, RiskView
from app.domain.trading import AccountState, AssetBalance, Mode, Position, Side
from app.exchange.book import ZERO, quote_down
from app.exchange.paper_account import PaperAccount
from app.market.series import KlineSeries

_CENT = Decimal("0.01")


class PriceWindow(Protocol):
    """Where marks come from: the bar window (last visible close) or the live quote window."""

    def mark(
        self, symbol: str, bars: tuple[KlineSeries, int] | None = None
    ) -> Decimal | None: ...


def marks(
    account: PaperAccount,
    window: PriceWindow,
    bars: Mapping[str, tuple[KlineSeries, int]] | None = None,
) -> dict[str, Decimal]:
    """The mark of every open position; ``bars`` reuses a settle's reads of this moment."""
    out = {}
    for symbol, book in account.book.positions.items():
        if book.size > 0:
            seen = None if bars is None else bars.get(symbol)
            out[symbol] = window.mark(symbol, seen) or book.avg_price
    return out


def equity(account: PaperAccount, marks: Mapping[str, Decimal]) -> Decimal:
    value = ZERO
    positions = account.book.positions
    for symbol, price in marks.items():
        value += positions[symbol].size * price
    return quote_down(account.book.total(account.quote_currency) + value)


def positions(
    account: PaperAccount, marks: Mapping[str, Decimal], symbol: str | None = None
) -> list[Position]:
    total = equity(account, marks)
    out = []
    for sym, price in sorted(marks.items()):
        if symbol is not None and sym.upper() != symbol.upper():
            continue
        book = account.book.positions[sym]
        value = book.size * price
        out.append(Position(
            symbol=sym, size=book.size, avg_price=book.avg_price, current_price=price,
            unrealized_pnl=quote_down((price - book.avg_price) * book.size),
            weight_pct=(value / total * 100).quantize(_CENT) if total else ZERO,
        ))
    return out


def account_state(account: PaperAccount, marks: Mapping[str, Decimal], mode: Mode) -> AccountState:
    book, stats, quote = account.book, account.stats, account.quote_currency
    now_equity = equity(account, marks)
    assets = []
    for asset in sorted(book.balances):
        total = book.total(asset)
        if total == 0 and asset != quote:
            continue
        used = book.reserved.get(asset, ZERO)
        assets.append(AssetBalance(asset, total - used, used))
    peak = max(stats.peak_equity, now_equity)
    drawdown = (peak - now_equity) / peak * 100 if peak > 0 else ZERO
    max_dd = max(stats.max_drawdown_pct, drawdown).quantize(_CENT)
    return AccountState(
        mode=mode,
        quote_currency=quote,
        cash=book.total(quote),
        equity=now_equity,
        today_pnl=now_equity - stats.day_start_equity,
        total_pnl=now_equity - account.initial_cash,
        max_drawdown_pct=max_dd,
        assets=tuple(assets),
        positions=tuple(positions(account, marks)),
        open_orders=tuple(r.order for r in account.open.values()),
    )


def risk_view(account: PaperAccount, marks: Mapping[str, Decimal], now_ms: int) -> RiskView:
    book = account.book
    pending = tuple(
        PendingOrder(
            agent_id=r.order.agent_id, symbol=r.order.symbol, side=r.order.side,
            reserved_quote=r.reserved if r.order.side is Side.BUY else ZERO,
            exit=r.order.reduce_only,
        )
        for _id, r in sorted(account.open.items())
    )
    return RiskView(
        now_ms=now_ms,
        quote_currency=account.quote_currency,
        equity=equity(account, marks),
        cash=book.total(account.quote_currency),
        day_start_equity=account.stats.day_start_equity,
        peak_equity=account.stats.peak_equity,
        positions={
            s: PositionView(book.positions[s].size, book.positions[s].avg_price, p)
            for s, p in marks.items()
        },
        pending=pending,
        agent_cost=book.committed_by_agent(),
    )


def snapshot(account: PaperAccount) -> dict[str, Any]:
    """A comparable picture of the whole account, for tests and the crash-recovery check."""
    book = account.book
    return {
        "balances": {a: v for a, v in book.balances.items() if v != 0},
        "reserved": {a: v for a, v in book.reserved.items() if v != 0},
        "positions": {
            s: (b.size, b.avg_price, b.realized_pnl)
            for s, b in book.positions.items() if b.size != 0 or b.realized_pnl != 0
        },
        "open_orders": sorted(account.open),
        "orders": {oid: r.order.status.value for oid, r in account.records.items()},
        "cursor": dict(account.cursor_ms),
        "fills": account.fill_seq,
    }
