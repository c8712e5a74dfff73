"""What the window and the CLI may reach of a live exchange account beyond the ports.

A live venue carries one ``LiveAccount`` (``Venue.live``): the exchange's id, its reconciliation
(balances compared with the journal, the person's "the exchange is right" decision) and the
person's per-agent grants to trade live. Fronts hold these protocols and the plain records below;
the ccxt adapter implements them, and only the runtime names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from app.domain.clock import ms_to_iso
from app.domain.market_rules import fmt

ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class ExchangeOrder:
    """An order on the exchange that the journal does not know."""

    exchange_order_id: str
    client_order_id: str
    symbol: str
    side: str
    order_type: str
    amount: Decimal
    price: Decimal | None
    filled: Decimal
    status: str
    raw: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def describe(self) -> str:
        price = "market" if self.price is None else f"at {fmt(self.price)}"
        filled = f", {fmt(self.filled)} filled" if self.filled else ""
        client = f", client id {self.client_order_id}" if self.client_order_id else ""
        return (f"{self.side} {fmt(self.amount)} {self.symbol} {self.order_type} {price}"
                f"{filled} (exchange id {self.exchange_order_id}{client})")


@dataclass(frozen=True, slots=True)
class BalanceMismatch:
    asset: str
    expected: Decimal
    actual: Decimal

    @property
    def difference(self) -> Decimal:
        return self.actual - self.expected

    def describe(self) -> str:
        return (f"{self.asset}: the journal explains {fmt(self.expected)}, the exchange holds "
                f"{fmt(self.actual)} (difference {fmt(self.difference)})")


@dataclass(frozen=True, slots=True)
class BalanceCheck:
    """One reading of the exchange's balances against the journal: what the person is shown
    before accepting, and what becomes the baseline if they do (with the fills stored by then)."""

    actual: Mapping[str, Decimal]
    mismatches: tuple[BalanceMismatch, ...]
    fill_mark: int
    exchange_ms: int


class Reconciliation(Protocol):
    """The journal kept in line with the exchange, as far as a person acts on it."""

    @property
    def venue(self) -> str: ...

    @property
    def mismatches(self) -> tuple[BalanceMismatch, ...]:
        """The last balance check's differences (empty: none, or not checked yet)."""
        ...

    async def balance_check(self) -> BalanceCheck | None:
        """The exchange's balances read now against the journal; None when this reading became
        the first baseline."""
        ...

    def accept_balances(self, check: BalanceCheck | None = None, by: str = "person") -> None:
        """The person's decision: the exchange is right, start from ``check``."""
        ...


PERSON = "person"


@dataclass(frozen=True, slots=True)
class LiveGrant:
    """The person's permission for one agent to place real orders on one exchange."""

    agent_id: str
    by: str
    granted_ms: int

    def describe(self) -> str:
        return f"allowed by {self.by} at {ms_to_iso(self.granted_ms)}"


class Grants(Protocol):
    """Which agents the person allows to trade live on one exchange account."""

    @property
    def venue(self) -> str: ...

    def grant(self, agent_id: str, by: str, now_ms: int) -> LiveGrant: ...

    def revoke(self, agent_id: str) -> None: ...

    def get(self, agent_id: str) -> LiveGrant | None: ...


@dataclass(frozen=True, slots=True)
class LiveAccount:
    """A live venue's account as the fronts reach it (``Venue.live``).

    ``startup``: what the reconciliation before the agents found and did, in words (None until
    it has run).
    """

    exchange: str
    reconciliation: Reconciliation
    grants: Grants
    startup: Callable[[], str | None] = lambda: None
