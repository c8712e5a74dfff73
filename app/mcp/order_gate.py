"""What an order from an external agent (``kestrel mcp-serve``) must pass before the trade tool.

Inside Kestrel the agent loop holds an order that the approval policy wants a person to see and
asks that person in the window. An external agent connected over MCP has no window: the process
serving it holds the workspace (one writer), so nobody could answer. Such an order is therefore
refused, as a Risk Guard refusal (``<status>rejected</status>``, rule ``human_approval_required``)
naming the policy setting that held it, and the refusal is recorded in the audit trail like every
call. Orders the policy lets through go on to the trade tool, whose Risk Guard decides as for any
agent.

``kill_switch`` is the kill switch's seam: a callable answering why trading is halted, or None
(``kestrel mcp-serve`` wires the workspace's switch; ``no_kill_switch`` answers None). While it
is tripped a new entry (a ``create_order`` BUY) is refused here, before the approval policy,
with the trip's when, why and who. Exits are not: closing a position, reduce-only take-profit
and stop-loss exits, a sell of what is held (the account is long-only) and cancelling go on to
the trade tool, whose Risk Guard refuses anything that is not a reduction, as for every agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Set
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.config.approval import ApprovalSettings
from app.domain.errors import RiskRejection
from app.domain.trading import Mode
from app.trading.approval import ORDER_TOOLS, approval_reason

# tools that place orders: served behind the gate
RISK_TOOLS = frozenset({"create_order", "set_position_tp_sl_orders", "close_position"})
APPROVAL_RULE = "human_approval_required"
KILL_SWITCH_RULE = "kill_switch"


def no_kill_switch() -> str | None:
    """The kill switch before it exists: never engaged."""
    return None


@dataclass
class OrderGate:
    """Checks one order tool call of an external agent before it runs.

    Args:
        approval: the workspace's approval policy (``[approval]`` settings).
        mode: the account's mode (PAPER for the replayed market).
        last_price: the symbol's last price, for the policy's notional limit.
        traded_symbols: the symbols the account ever traded (the new-symbol rule).
        kill_switch: why trading is halted now, or None (see the module docstring).
    """

    approval: ApprovalSettings
    mode: Mode
    last_price: Callable[[str], Awaitable[Decimal | None]]
    traded_symbols: Callable[[], Set[str]]
    kill_switch: Callable[[], str | None] = no_kill_switch

    async def check(self, tool: str, args: Mapping[str, Any]) -> None:
        """Raise ``RiskRejection`` when the call may not go ahead.

        Raises:
            RiskRejection: rule ``kill_switch`` or ``human_approval_required``, with the reason.
        """
        if _opens_risk(tool, args):
            halted = self.kill_switch()
            if halted is not None:
                raise RiskRejection(KILL_SWITCH_RULE, f"Trading is halted: {halted}.")
        if tool not in ORDER_TOOLS:
            return
        symbol = str(args.get("symbol", ""))
        price = await self.last_price(symbol) if symbol else None
        reason = approval_reason(
            self.approval, tool=tool, args=args, mode=self.mode, price=price,
            traded_symbols=self.traded_symbols,
        )
        if reason is not None:
            raise RiskRejection(
                APPROVAL_RULE,
                f"This order needs a person's approval because {reason}. An agent connected "
                "through kestrel mcp-serve cannot be approved (nobody is asked in this mode), so "
                "the order was not placed. Place it from the Kestrel window, or a person can "
                "change the approval settings.",
                {"tool": tool, "policy_reason": reason},
            )


def _opens_risk(tool: str, args: Mapping[str, Any]) -> bool:
    """An entry: an order that can add exposure (a sell of a long-only account only reduces)."""
    return tool == "create_order" and str(args.get("side", "")).upper() != "SELL"
