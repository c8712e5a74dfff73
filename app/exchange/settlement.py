"""Settlement of the paper broker: running open orders against newly visible candles.

``settle()`` is called after each clock advance. It walks every candle that became visible since the
last settle, in time order across symbols, fills what the candle allows, and commits each fill with
its balance change in one ledger transaction; then it commits the settle cursor and an equity point.
Re-running a settle over candles already seen (after a crash between a fill and the cursor commit)
gives the same result, because filled orders are no longer open and the rest match identically.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from app.domain.trading import ExitKind, Fill, Mode, OrderStatus, OrderType, Side
from app.exchange.book import ZERO, quote_down, quote_up
from app.exchange.market_rules import fmt
from app.exchange.matching import Bar, Match, priority

if TYPE_CHECKING:
    from app.exchange.paper import PaperBroker
    from app.market.series import KlineSeries
    from app.store.ledger import OrderRecord

DAY_MS = 86_400_000
_EXITS = (ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS)


class SettlementMixin:
    """The settle half of ``PaperBroker`` (split off to keep each module to one job)."""

    def settle(self: PaperBroker) -> list[Fill]:
        """Process every candle visible since the last settle; return the fills it produced."""
        now = self.clock.now_ms()
        open_symbols = {r.order.symbol for r in self._open.values()} if self._open else ()
        events: list[tuple[int, str, int]] = []
        sources: dict[str, KlineSeries] = {}
        seen: dict[str, tuple[KlineSeries, int]] = {}
        for symbol in self.market.symbols():
            full, visible = self._bars(symbol)
            if visible <= 0:
                continue
            seen[symbol] = (full, visible)
            if symbol in open_symbols:
                cursor = self._cursor_ms.get(symbol)
                start = 0 if cursor is None else int(
                    full.timestamp_ms.searchsorted(cursor, side="right")
                )
                sources[symbol] = full
                events.extend((int(full.timestamp_ms[i]), symbol, i) for i in range(start, visible))
            self._cursor_ms[symbol] = full.timestamp_ms.item(visible - 1)
        events.sort()
        fills: list[Fill] = []
        for _ts, symbol, index in events:
            fills.extend(self._settle_bar(symbol, sources[symbol], index))
        if fills or now != self._last_settle_ms:
            self._record_point(now, seen)
        return fills

    def _settle_bar(self: PaperBroker, symbol: str, full: KlineSeries, index: int) -> list[Fill]:
        bar: Bar | None = None
        bar_open = int(full.timestamp_ms[index])
        candidates: list[tuple[tuple[int, int], str, OrderRecord, Match]] = []
        for record in list(self._open.values()):
            order = record.order
            if order.symbol != symbol or order.created_ms > bar_open:
                continue
            if bar is None:
                bar = self._bar(full, index, self._decimals(symbol))
            match = self._match(order, bar)
            if match is not None:
                candidates.append((priority(order, match), order.order_id, record, match))
        candidates.sort(key=lambda item: (item[0], item[1]))
        fills = []
        for _prio, order_id, record, match in candidates:
            if order_id not in self._open:
                continue  # cancelled by an exit that filled earlier in this bar
            if match.triggered_only:
                record.order.triggered = True
                record.order.updated_ms = bar_open
                self.ledger.save_order(record)
                continue
            assert bar is not None
            fill = self._execute(record, match, bar)
            if fill is not None:
                fills.append(fill)
        return fills

    def _execute(self: PaperBroker, record: OrderRecord, match: Match, bar: Bar) -> Fill | None:
        order = record.order
        rules = self.market_rules(order.symbol)
        base = self._reserve_asset_base(order.symbol)
        price = match.price
        assert price is not None
        rate = self.fee_taker if match.taker else self.fee_maker
        quote = self.quote_currency
        if order.side is Side.BUY:
            available = self._book.free(quote) + record.reserved
            budget = available if record.quote_amount is None else min(
                record.quote_amount, available
            )
            affordable = rules.floor_amount(budget / (price * (1 + rate)))
            # a quote-amount order buys what its budget allows at the fill price; a quantity
            # order buys its quantity, or less only when the funds at the fill price fall short
            qty = affordable if record.quote_amount is not None else min(
                order.remaining, affordable
            )
            while qty > 0 and _buy_cost(qty, price, rate) > budget:
                qty -= rules.step  # the 8-decimal rounding of cost and fee can tip it over
            if qty <= 0 or qty < rules.min_amount:
                needed = _buy_cost(max(order.remaining, rules.min_amount), price, rate)
                self._expire(record, f"not filled: at the fill price {fmt(price)} it needs "
                                     f"{fmt(needed)} {quote} but only {fmt(budget)} is available")
                return None
        else:
            held = self._book.total(base)
            if order.reduce_only:
                qty = min(order.remaining, held - self._book.reserved.get(base, ZERO))
            else:
                qty = order.remaining
            if qty <= 0:
                self._close_order(record, OrderStatus.CANCELLED,
                                  f"nothing left to sell: no free {base} when it triggered")
                self.ledger.save_order(record)
                return None
        notional = quote_up(qty * price) if order.side is Side.BUY else quote_down(qty * price)
        fee = quote_up(notional * rate)
        whole = qty == order.remaining or record.quote_amount is not None
        why = "" if whole else (
            f"filled {fmt(qty)} of {fmt(order.quantity)}; the rest was cancelled for lack of "
            "funds at the fill price"
        )
        self._close_order(record, OrderStatus.FILLED if whole else OrderStatus.CANCELLED, why)
        if order.side is Side.BUY:
            holdings = self._book.apply_buy(order.agent_id, order.symbol, base, qty, notional, fee)
            realized = ZERO
        else:
            realized, holdings = self._book.apply_sell(
                order.agent_id, order.symbol, base, qty, notional, fee, price
            )
        if record.quote_amount is not None:
            order.quantity = qty
        order.average_price = price
        order.filled_quantity += qty
        order.fee += fee
        order.fee_currency = quote
        order.updated_ms = bar.open_ms
        self._fill_seq += 1
        fill = Fill(
            fill_id=f"F{self._fill_seq:09d}", order_id=order.order_id, agent_id=order.agent_id,
            symbol=order.symbol, side=order.side, quantity=qty, price=price, fee=fee,
            fee_currency=quote, time_ms=bar.open_ms, realized_pnl=realized,
            is_maker=not match.taker,
        )
        changed = [record] + self._cancel_siblings(order.symbol, order.exit_kind, order.side)
        self.ledger.commit_fill(
            fill, changed, {quote: self._book.total(quote), base: self._book.total(base)},
            self._book.position_record(order.symbol), holdings,
        )
        return fill

    def _reserve_asset_base(self: PaperBroker, symbol: str) -> str:
        from app.exchange.paper import split_symbol

        return split_symbol(symbol, self.quote_currency)[0]

    def _expire(self: PaperBroker, record: OrderRecord, why: str) -> None:
        self._close_order(record, OrderStatus.EXPIRED, why)
        self.ledger.save_order(record)

    def _cancel_siblings(
        self: PaperBroker, symbol: str, kind: ExitKind, side: Side
    ) -> list[OrderRecord]:
        """One-cancels-other: a filled exit cancels the other exits; a flat position cancels all."""
        if side is not Side.SELL:
            return []
        flat = self._book.position(symbol).size == 0
        out = []
        for record in list(self._open.values()):
            other = record.order
            if other.symbol != symbol or not other.reduce_only:
                continue
            if flat or (kind in _EXITS and other.exit_kind in _EXITS):
                why = "position closed" if flat else f"the other exit ({kind.value}) filled"
                self._close_order(record, OrderStatus.CANCELLED, f"OCO: {why}")
                out.append(record)
        return out

    def _record_point(
        self: PaperBroker, now: int, bars: dict[str, tuple[KlineSeries, int]] | None = None
    ) -> None:
        equity = self._equity(self._marks(bars))
        day = now // DAY_MS
        stats = self._stats
        if day != self._day:
            if self._day != -1:
                # at exactly midnight the candles closing now belong to yesterday, so the equity
                # after settling them is the day's opening value; otherwise the last one before
                on_boundary = now % DAY_MS == 0
                stats["day_start_equity"] = equity if on_boundary else stats["last_equity"]
            self._day = day
        peak = stats["peak_equity"]
        if equity > peak:
            stats["peak_equity"] = equity  # a new high: no drawdown, the maximum stands
            self._trough = equity
        elif equity < peak and peak > 0 and (self._trough is None or equity < self._trough):
            # under one peak the drawdown only grows as equity falls, so the deepest one is at the
            # lowest equity since that peak: a higher low cannot raise the maximum
            self._trough = equity
            drawdown = ((peak - equity) / peak * 100).quantize(_DD_STEP)
            stats["max_drawdown_pct"] = max(stats["max_drawdown_pct"], drawdown)
        stats["last_equity"] = equity
        self._last_settle_ms = now
        # immutable values (ints, Decimals); the ledger writes each as str() when it commits them
        meta: dict[str, object] = {f"cursor:{s}": ms for s, ms in self._cursor_ms.items()}
        meta.update(stats)
        meta["day"] = day
        meta["settled_ms"] = now
        self.ledger.record_settle(
            now, equity, self._book.total(self.quote_currency), meta,
            defer=self.mode is Mode.BACKTEST,  # the next order or fill commits it (see Ledger)
        )


_DD_STEP = Decimal("0.0001")


def _buy_cost(qty: Decimal, price: Decimal, rate: Decimal) -> Decimal:
    notional = quote_up(qty * price)
    return notional + quote_up(notional * rate)


__all__ = ["SettlementMixin", "OrderType"]
