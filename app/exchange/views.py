"""Read-side of ``PaperBroker``: positions, account status, risk view and a comparable snapshot.

Valuation is one rule everywhere: a position is worth its size times the last visible close, so
the account an agent reads, the equity curve and the Risk Guard's view always agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from app.domain.risk_view import PendingOrder, PositionView, RiskView
from app.domain.trading import AccountState, AssetBalance, Fill, Position, Side
from app.exchange.book import ZERO, quote_down

if TYPE_CHECKING:
    from app.exchange.paper import PaperBroker
    from app.market.series import KlineSeries


class AccountViewsMixin:
    """What the broker reports about the account (split off to keep each module to one job)."""

    def position_size(self: PaperBroker, symbol: str) -> Decimal:
        return self._book.position(symbol).size

    def _marks(
        self: PaperBroker, bars: Mapping[str, tuple[KlineSeries, int]] | None = None
    ) -> dict[str, Decimal]:
        """The mark of every open position; ``bars`` reuses a settle's ``_bars`` of this moment."""
        marks = {}
        for symbol, book in self._book.positions.items():
            if book.size > 0:
                seen = None if bars is None else bars.get(symbol)
                marks[symbol] = self._mark(symbol, seen) or book.avg_price
        return marks

    def _equity(self: PaperBroker, marks: Mapping[str, Decimal]) -> Decimal:
        value = ZERO
        positions = self._book.positions
        for symbol, price in marks.items():
            value += positions[symbol].size * price
        return quote_down(self._book.total(self.quote_currency) + value)

    async def positions(self: PaperBroker, symbol: str | None = None) -> list[Position]:
        marks = self._marks()
        equity = self._equity(marks)
        out = []
        for sym, price in sorted(marks.items()):
            if symbol is not None and sym.upper() != symbol.upper():
                continue
            book = self._book.positions[sym]
            value = book.size * price
            out.append(Position(
                symbol=sym, size=book.size, avg_price=book.avg_price, current_price=price,
                unrealized_pnl=quote_down((price - book.avg_price) * book.size),
                weight_pct=(value / equity * 100).quantize(Decimal("0.01")) if equity else ZERO,
            ))
        return out

    async def account(self: PaperBroker) -> AccountState:
        marks = self._marks()
        equity = self._equity(marks)
        assets = []
        for asset in sorted(self._book.balances):
            total = self._book.total(asset)
            if total == 0 and asset != self.quote_currency:
                continue
            used = self._book.reserved.get(asset, ZERO)
            assets.append(AssetBalance(asset, total - used, used))
        peak = max(self._stats["peak_equity"], equity)
        drawdown = (peak - equity) / peak * 100 if peak > 0 else ZERO
        max_dd = max(self._stats["max_drawdown_pct"], drawdown).quantize(Decimal("0.01"))
        return AccountState(
            mode=self.mode,
            quote_currency=self.quote_currency,
            cash=self._book.total(self.quote_currency),
            equity=equity,
            today_pnl=equity - self._stats["day_start_equity"],
            total_pnl=equity - self.initial_cash,
            max_drawdown_pct=max_dd,
            assets=tuple(assets),
            positions=tuple(await self.positions()),
            open_orders=tuple(r.order for r in self._open.values()),
        )

    async def trades(self: PaperBroker, symbol: str | None = None, limit: int = 20) -> list[Fill]:
        wanted = None if symbol is None else self.canonical_symbol(symbol)
        return self.ledger.fills(wanted, limit)

    def risk_view(self: PaperBroker) -> RiskView:
        marks = self._marks()
        pending = tuple(
            PendingOrder(
                agent_id=r.order.agent_id, symbol=r.order.symbol, side=r.order.side,
                reserved_quote=r.reserved if r.order.side is Side.BUY else ZERO,
                exit=r.order.reduce_only,
            )
            for _id, r in sorted(self._open.items())
        )
        return RiskView(
            now_ms=self.clock.now_ms(),
            quote_currency=self.quote_currency,
            equity=self._equity(marks),
            cash=self._book.total(self.quote_currency),
            day_start_equity=self._stats["day_start_equity"],
            peak_equity=self._stats["peak_equity"],
            positions={
                s: PositionView(self._book.positions[s].size, self._book.positions[s].avg_price, p)
                for s, p in marks.items()
            },
            pending=pending,
            agent_cost=self._book.committed_by_agent(),
        )

    def free(self: PaperBroker, asset: str) -> Decimal:
        return self._book.free(asset)

    def snapshot(self: PaperBroker) -> dict[str, Any]:
        """A comparable picture of the whole account, for tests and the crash-recovery check."""
        return {
            "balances": {a: v for a, v in self._book.balances.items() if v != 0},
            "reserved": {a: v for a, v in self._book.reserved.items() if v != 0},
            "positions": {
                s: (b.size, b.avg_price, b.realized_pnl)
                for s, b in self._book.positions.items() if b.size != 0 or b.realized_pnl != 0
            },
            "open_orders": sorted(self._open),
            "orders": {oid: r.order.status.value for oid, r in self._records.items()},
            "cursor": dict(self._cursor_ms),
            "fills": self._fill_seq,
        }

