"""The live account as Kestrel reports it: balances from the exchange, prices, journal fills.

Pure functions over what the broker fetched, so ``account``, ``positions`` and the Risk Guard's
``risk_view`` value the account by one rule. Spot positions are the exchange's balances of base
assets that trade against the account's quote currency (free plus locked: an open sell order still
holds its coins); their average price comes from the journal's fills by the average-cost rule
(``orders.average_cost``). Holdings the journal cannot explain (bought before Kestrel, or outside
it) are valued at the current price, so their unrealized PnL is zero rather than invented; the
reconciler reports them as a mismatch with the journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from app.ccxt.orders import average_cost, dec
from app.domain.trading import AssetBalance, Position
from app.store.order_journal import JournalFill

ZERO = Decimal(0)
PCT = Decimal("0.01")


def balances_from(raw: Mapping[str, object]) -> dict[str, AssetBalance]:
    """ccxt's ``fetch_balance`` answer as Kestrel's balances (assets with anything in them)."""
    free = raw.get("free") or {}
    used = raw.get("used") or {}
    out = {}
    assert isinstance(free, Mapping) and isinstance(used, Mapping)
    for asset in sorted(set(free) | set(used)):
        f, u = dec(free.get(asset)) or ZERO, dec(used.get(asset)) or ZERO
        if f != 0 or u != 0:
            out[str(asset)] = AssetBalance(str(asset), f, u)
    return out


@dataclass(frozen=True, slots=True)
class Holding:
    """One spot position before valuation: its size on the exchange and journal average."""

    symbol: str
    base: str
    size: Decimal
    avg_price: Decimal | None  # None: the journal explains none of it


def holdings(
    balances: Mapping[str, AssetBalance],
    quote: str,
    tradable: set[str],
    fills_of: Mapping[str, list[JournalFill]],
) -> list[Holding]:
    """Positions of every base asset held that trades against ``quote``, by symbol."""
    out = []
    for asset, balance in sorted(balances.items()):
        symbol = f"{asset}/{quote}"
        if asset == quote or symbol not in tradable or balance.total <= 0:
            continue
        size_j, avg, _ = average_cost(fills_of.get(symbol, []), asset, quote)
        out.append(Holding(symbol, asset, balance.total, avg if size_j > 0 else None))
    return out


def positions(
    held: list[Holding], prices: Mapping[str, Decimal], cash: Decimal
) -> tuple[list[Position], Decimal]:
    """Valued positions and the account's equity (cash plus positions at their prices)."""
    equity = cash + sum((h.size * prices[h.symbol] for h in held), ZERO)
    out = []
    for h in held:
        price = prices[h.symbol]
        avg = h.avg_price if h.avg_price is not None else price
        value = h.size * price
        out.append(Position(
            symbol=h.symbol, size=h.size, avg_price=avg, current_price=price,
            unrealized_pnl=((price - avg) * h.size).quantize(Decimal("1e-8")),
            weight_pct=(value / equity * 100).quantize(PCT) if equity > 0 else ZERO,
        ))
    return out, equity
