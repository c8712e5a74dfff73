"""Human approval: which agents' orders wait for the person before they reach the broker.

The Risk Guard refuses what must never happen; this policy holds back what a person wants to see
first (any live order, a large one, a symbol never traded), and order entry always holds an
agent's sell of more than its own lot (the rest belongs to the person or another agent). It
applies to every order an agent places through order entry, closes and sells included. It never
holds the person's own orders (the person decided them), nor the take-profit and stop-loss exits
an agent places for its own lot: holding those would leave a position unprotected while the
person decides. ``EXEMPTIONS`` says so wherever the settings are shown.

A held order is refused with ``ApprovalNeeded``: the agent's loop parks the task on it and asks
the person; the approved call comes back to order entry marked approved. A front that cannot ask
anyone (an external agent over ``kestrel mcp-serve``) gets the refusal with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from decimal import Decimal

from app.config.approval import ApprovalSettings
from app.domain.errors import APPROVAL_RULE, RiskRejection
from app.domain.trading import Mode

__all__ = ["APPROVAL_RULE", "EXEMPTIONS", "ApprovalNeeded", "approval_reason"]
EXEMPTIONS = (
    "Never held: your own orders, and the take-profit and stop-loss exits an agent places for "
    "its own position (holding them would leave it unprotected while you decide). Always held: "
    "an agent's sell of more than its own lot."
)


class ApprovalNeeded(RiskRejection):
    """An order the person must approve first; ``policy_reason`` says why in a clause."""

    def __init__(self, policy_reason: str, *, can_ask: bool = True) -> None:
        if can_ask:
            text = f"This order needs the person's approval because {policy_reason}."
        else:
            text = (
                f"This order needs a person's approval because {policy_reason}. An agent "
                "connected through kestrel mcp-serve cannot be approved (nobody is asked in this "
                "mode), so the order was not placed. Place it from the Kestrel window, or a "
                "person can change the approval settings."
            )
        super().__init__(APPROVAL_RULE, text, {"policy_reason": policy_reason,
                                               "can_ask": can_ask})
        self.policy_reason = policy_reason


def approval_reason(
    settings: ApprovalSettings,
    *,
    symbol: str,
    notional: Decimal | None,
    mode: Mode,
    traded_symbols: Callable[[], Set[str]],
) -> str | None:
    """Why an agent's order needs the person's approval, or None when it may go ahead.

    ``traded_symbols`` is asked only when the new-symbol rule applies: it reads the fills table,
    and this check runs on every order an agent places.
    """
    if settings.live_orders and mode is Mode.LIVE:
        return "every LIVE order needs your approval (setting approval.live_orders)"
    if settings.above_quote is not None and notional is not None \
            and notional > settings.above_quote:
        return (
            f"the order is worth about {notional:,.2f} in quote currency, above your limit "
            f"of {settings.above_quote:,} (setting approval.above_quote)"
        )
    if settings.new_symbols and symbol and symbol not in traded_symbols():
        return f"{symbol} has never been traded by this account (setting approval.new_symbols)"
    return None
