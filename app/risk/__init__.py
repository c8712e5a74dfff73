"""The Risk Guard: every order-creating tool passes it before any broker sees the order.

``build_guard(RiskConfig(), recorder)`` gives the guard; ``app.risk.types`` holds what it judges.
"""

from app.risk.config import RiskConfig, all_in_backtest_config, build_guard
from app.risk.guard import (
    MemoryDecisionRecorder,
    RiskDecisionRecorder,
    RiskGuard,
    RiskRule,
    Violation,
)

__all__ = [
    "MemoryDecisionRecorder",
    "RiskConfig",
    "RiskDecisionRecorder",
    "RiskGuard",
    "RiskRule",
    "Violation",
    "all_in_backtest_config",
    "build_guard",
]
