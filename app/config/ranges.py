"""The range of every money setting, and why each bound is where it is.

A money setting (a cash amount, a limit in the quote currency) is more than nothing or at least
nothing, at most ``MAX_MONEY`` and has at most ``MONEY_PLACES`` decimals; each field says why its
bounds are there (``why_low``, ``why_high``), and a refusal quotes that reason
(``app.config.settings_from_mapping``), so a person reads why, not only that, a value is refused.
The bounds stay ordinary field constraints, which the settings dialog shows beside each field.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import Field

from app.domain.numbers import MAX_MONEY, MONEY_LIMIT_REASON, MONEY_PLACES

WHY_LOW = "why_low"
WHY_HIGH = "why_high"


def money(
    default: Decimal | None, *, positive: bool, why_low: str, description: str | None = None
) -> Any:
    """A money field: more than 0 (``positive``) or at least 0, at most ``MAX_MONEY``, with at
    most ``MONEY_PLACES`` decimals."""
    return Field(
        default=default, gt=0 if positive else None, ge=None if positive else 0, le=MAX_MONEY,
        decimal_places=MONEY_PLACES, description=description,
        json_schema_extra={WHY_LOW: why_low, WHY_HIGH: MONEY_LIMIT_REASON},
    )


def money_values(*, why_low: str) -> Any:
    """A mapping whose values are money of at least 0 (per-agent allotments); the values carry
    the bounds (``MONEY_BOUNDS``), the mapping the reasons."""
    return Field(default_factory=dict,
                 json_schema_extra={WHY_LOW: why_low, WHY_HIGH: MONEY_LIMIT_REASON})


MONEY_BOUNDS = Field(ge=0, le=MAX_MONEY, decimal_places=MONEY_PLACES)


def ranged(default: Any, *, why_low: str, why_high: str, description: str | None = None,
           **bounds: Any) -> Any:
    """A bounded field (a rate, a share) with the reason for each bound."""
    return Field(default=default, description=description,
                 json_schema_extra={WHY_LOW: why_low, WHY_HIGH: why_high}, **bounds)
