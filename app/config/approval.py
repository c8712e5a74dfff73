"""The ``[approval]`` settings section: which orders wait for the person before the broker.

Only the model lives here, below everything that reads it; the policy that applies it is
``app.trading.approval``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.domain.numbers import PlainDecimal


class ApprovalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    live_orders: bool = Field(
        default=True, description="Every order in LIVE mode waits for the person's approval."
    )
    above_quote: PlainDecimal | None = Field(
        default=None, gt=0,
        description="Orders worth more than this (quote currency) wait for approval; empty: none.",
    )
    new_symbols: bool = Field(
        default=False, description="The first order in a symbol never traded before waits."
    )
