"""The paper account's running statistics: peak and day-start equity, the deepest drawdown.

A value object updated once per settle (``record``) and written to the ledger's meta with the
equity point, so a restart restores them (``restore``). Kept out of the broker so the arithmetic
of a drawdown and of a day's start is stated once and can be tested with plain numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

DAY_MS = 86_400_000
_DD_STEP = Decimal("0.0001")
ZERO = Decimal(0)


@dataclass(slots=True)
class AccountStats:
    """What the account reports beyond its balances, as of the last settle.

    Attributes:
        day: the UTC day (``now // DAY_MS``) of the last settle; -1 before the first.
        settled_ms: the clock time of the last settle; -1 before the first.
        trough: the lowest equity since the current peak (None: not known since a restart).
    """

    peak_equity: Decimal
    day_start_equity: Decimal
    max_drawdown_pct: Decimal
    last_equity: Decimal
    day: int = -1
    settled_ms: int = -1
    trough: Decimal | None = None

    @classmethod
    def fresh(cls, initial_cash: Decimal) -> AccountStats:
        return cls(initial_cash, initial_cash, ZERO, initial_cash)

    @classmethod
    def restore(cls, meta: Mapping[str, str], initial_cash: Decimal) -> AccountStats:
        """The statistics a ledger's meta holds (defaults for the ones it lacks)."""
        default = str(initial_cash)
        return cls(
            peak_equity=Decimal(meta.get("peak_equity", default)),
            day_start_equity=Decimal(meta.get("day_start_equity", default)),
            max_drawdown_pct=Decimal(meta.get("max_drawdown_pct", "0")),
            last_equity=Decimal(meta.get("last_equity", default)),
            day=int(meta.get("day", "-1")),
            settled_ms=int(meta.get("settled_ms", "-1")),
        )

    def record(self, now_ms: int, equity: Decimal) -> None:
        """Take the equity after a settle at ``now_ms`` into the statistics."""
        day = now_ms // DAY_MS
        if day != self.day:
            if self.day != -1:
                # at exactly midnight the candles closing now belong to yesterday, so the equity
                # after settling them is the day's opening value; otherwise the last one before
                on_boundary = now_ms % DAY_MS == 0
                self.day_start_equity = equity if on_boundary else self.last_equity
            self.day = day
        peak = self.peak_equity
        if equity > peak:
            self.peak_equity = equity  # a new high: no drawdown, the maximum stands
            self.trough = equity
        elif equity < peak and peak > 0 and (self.trough is None or equity < self.trough):
            # under one peak the drawdown only grows as equity falls, so the deepest one is at the
            # lowest equity since that peak: a higher low cannot raise the maximum
            self.trough = equity
            drawdown = ((peak - equity) / peak * 100).quantize(_DD_STEP)
            if drawdown > self.max_drawdown_pct:
                self.max_drawdown_pct = drawdown
        self.last_equity = equity
        self.settled_ms = now_ms

    def meta(self) -> dict[str, object]:
        """The values the ledger keeps (immutable: it writes each as ``str()`` when it commits)."""
        return {
            "peak_equity": self.peak_equity, "day_start_equity": self.day_start_equity,
            "max_drawdown_pct": self.max_drawdown_pct, "last_equity": self.last_equity,
            "day": self.day, "settled_ms": self.settled_ms,
        }
