"""The ``[trading]`` settings section: how order entry protects positions on a given workspace."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TradingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kestrel_stops: bool = Field(
        default=False,
        description=(
            "Where the exchange can hold no stop-loss order, Kestrel holds the stop itself: "
            "its own market watch sells the position when the price reaches the stop. Such a "
            "stop protects only while Kestrel runs (closed, asleep or offline, nothing "
            "sells). Off: an agent may not open a position on such a market."
        ),
    )
