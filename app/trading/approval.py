"""Human approval: which orders wait for the person before they reach the broker.

The Risk Guard rejects what must never happen; this policy holds back what a person wants to see
first (any live order, a large one, a symbol never traded). The agent's loop turns such an order
into an approval question; the answer, approve or refuse, is recorded with the order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from decimal import Decimal
from typing import Any

from app.config.approval import ApprovalSettings
from app.domain.trading import Mode

ORDER_TOOLS = frozenset({"create_order"})
APPROVE_WORDS = frozenset({"approve", "approved", "yes", "ok", "go", "confirm", "y"})
APPROVE_REPLY = "Approve"
REFUSE_REPLY = "Refuse"


def approval_reason(
    settings: ApprovalSettings,
    *,
    tool: str,
    args: Mapping[str, Any],
    mode: Mode,
    price: Decimal | None,
    traded_symbols: Callable[[], Set[str]],
) -> str | None:
    """Why this call needs the person's approval, or None when it may go ahead.

    ``traded_symbols`` is asked only when the new-symbol rule applies: it reads the fills table,
    and this check runs on every order an agent places.
    """
    if tool not in ORDER_TOOLS:
        return None
    symbol = str(args.get("symbol", ""))
    if settings.live_orders and mode is Mode.LIVE:
        return "every LIVE order needs your approval (setting approval.live_orders)"
    if settings.above_quote is not None:
        notional = order_notional(args, price)
        if notional is not None and notional > settings.above_quote:
            return (
                f"the order is worth about {notional:,.2f} in quote currency, above your limit "
                f"of {settings.above_quote:,} (setting approval.above_quote)"
            )
    if settings.new_symbols and symbol and symbol not in traded_symbols():
        return f"{symbol} has never been traded by this account (setting approval.new_symbols)"
    return None


def order_notional(args: Mapping[str, Any], price: Decimal | None) -> Decimal | None:
    quote = args.get("quote_amount")
    if isinstance(quote, Decimal):
        return quote
    quantity = args.get("quantity")
    limit = args.get("price")
    at = limit if isinstance(limit, Decimal) else price
    if isinstance(quantity, Decimal) and at is not None:
        return quantity * at
    return None


def is_approval(answer: str) -> bool:
    return answer.strip().strip(".!").casefold() in APPROVE_WORDS
