"""The ``[approval]`` settings section: which orders wait for the person before the broker.

Only the model lives here, below everything that reads it; the policy that applies it is
``app.trading.approval``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.config.ranges import money
from app.domain.numbers import PlainDecimal


class ApprovalSettings(BaseModel):
    """Which of the agents' orders wait for the person. Never held: the person's own orders,
    and the take-profit and stop-loss exits an agent places for its own position. Always held:
    an agent's sell of more than its own lot."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    live_orders: bool = Field(
        default=True,
        description="Every order an agent places in LIVE mode waits for your approval."
    )
    above_quote: PlainDecimal | None = money(
        None, positive=True,
        description=("An agent's order worth more than this (quote currency), a close or a "
                     "sell included, waits for approval; empty: none."),
        why_low="every order is worth more than nothing; to hold every agent order, hold them "
        "by another rule, and leave this empty for no quote limit",
    )
    new_symbols: bool = Field(
        default=False, description="The first order in a symbol never traded before waits."
    )
