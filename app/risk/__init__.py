"""The Risk Guard: every order-creating tool passes it before any broker sees the order.

``build_guard(RiskConfig(), recorder)`` gives the guard (its limits, ``RiskConfig``, are settings:
``app.config.risk``); ``app.risk.types`` holds what it judges.
"""

from app.risk.config import build_guard
from app.risk.guard import (
    MemoryDecisionRecorder,
    RiskDecisionRecorder,
    RiskGuard,
    RiskRule,
    Violation,
)

__all__ = [
    "MemoryDecisionRecorder",
    "RiskDecisionRecorder",
    "RiskGuard",
    "RiskRule",
    "Violation",
    "build_guard",
]
