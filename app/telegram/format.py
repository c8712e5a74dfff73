"""Telegram's wording of what the app produced once: alerts by kind, command answers, buttons.

Pure functions from domain data (fills, orders, questions, the account) to plain text and button
rows. Plain text, no Markdown or HTML: agent and market text needs no escaping then, and nothing an
agent writes can restyle or hide part of a message. The bot only sends what these return; the
other channels (the window, the tray, e-mail) word the same data their own way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from app.domain.agents import AgentInfo, AgentState, Notification, Question, QuestionKind
from app.domain.clock import ms_to_iso
from app.domain.numbers import plain
from app.domain.trading import AccountState, Fill, Order, Position

MAX_TEXT = 4000  # Telegram refuses messages over 4096 characters
MAX_ROWS = 25  # list items shown before "… and N more"
MAX_BUTTON = 40  # characters of a reply shown on its button
REF_LENGTH = 8
_REF = re.compile(r"\bref ([0-9a-f]{8})\b")

# callback data: "<kind>|<argument>|<argument>", at most 64 bytes (a question id is 36)
ANSWER = "q"
KILL = "k"


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    data: str


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to send: its text and its inline buttons (rows of buttons)."""

    text: str
    buttons: tuple[tuple[Button, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class AgentCounts:
    total: int = 0
    by_state: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Overview:
    """What ``/status`` and the daily summary show, gathered once by the commands."""

    market_ms: int
    account: AccountState
    agents: Sequence[AgentInfo]
    approvals_waiting: int
    questions_waiting: int
    kill_switch: str  # "armed", "TRIPPED" or "not available in this version"
    refused: int = 0
    fills_24h: Sequence[Fill] = ()


# -- small pieces ------------------------------------------------------------------------------

def ref(question_id: str) -> str:
    """The short reference printed under a question (``ref 1a2b3c4d``), found again in a reply."""
    return question_id.replace("-", "")[:REF_LENGTH]


def ref_in(text: str) -> str | None:
    """The question reference in a message the person replied to, if any."""
    found = _REF.search(text or "")
    return found.group(1) if found else None


def when(ms: int) -> str:
    return ms_to_iso(ms)[:16].replace("T", " ") + " UTC"


def number(value: Decimal) -> str:
    return plain(value)


def money(value: Decimal, currency: str = "") -> str:
    text = f"{value.quantize(Decimal('0.01'), ROUND_HALF_UP):,}"
    return f"{text} {currency}".rstrip()


def signed(value: Decimal) -> str:
    return ("+" if value > 0 else "") + money(value)


def clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _listed(lines: Sequence[str], empty: str) -> list[str]:
    if not lines:
        return [empty]
    shown = list(lines[:MAX_ROWS])
    if len(lines) > MAX_ROWS:
        shown.append(f"… and {len(lines) - MAX_ROWS} more")
    return shown


def _join(*parts: str | Iterable[str]) -> str:
    lines: list[str] = []
    for part in parts:
        lines.extend([part] if isinstance(part, str) else part)
    return clip("\n".join(lines))


# -- alerts by kind ----------------------------------------------------------------------------

def fill_alert(payload: Mapping[str, Any], agent: str) -> Outgoing:
    """An ORDER_FILLED payload (what the agent itself is told) as a message."""
    exit_kind = str(payload.get("exit_kind") or "NONE")
    title = {"TAKE_PROFIT": "🎯 Take-profit hit", "STOP_LOSS": "🛑 Stop-loss hit"}.get(
        exit_kind, "✅ Order filled")
    fee = f" (fee {payload.get('fee')} {payload.get('fee_currency', '')})".rstrip()
    line = (f"{payload.get('side')} {payload.get('quantity')} {payload.get('symbol')} at "
            f"{payload.get('price')}{fee if payload.get('fee') else ''}")
    pnl = Decimal(str(payload.get("realized_pnl") or 0))
    lines = [f"{title} · {agent}", line]
    if pnl:
        lines.append(f"Realized P&L {signed(pnl)}")
    if payload.get("time"):
        lines.append(f"at {str(payload['time'])[:16].replace('T', ' ')} UTC")
    return Outgoing(_join(lines))


def rejection_alert(agent: str, rule: str, reason: str) -> Outgoing:
    return Outgoing(_join(f"⛔ The Risk Guard refused an order · {agent}", f"Rule: {rule}",
                          reason))


def error_alert(agent: str, reason: str) -> Outgoing:
    return Outgoing(_join(f"⚠️ {agent} stopped on an error", reason or "(no reason given)",
                          "Send /resume " + agent + " to run it again."))


def notification_alert(n: Notification, agent: str) -> Outgoing:
    head = f"🔔 {n.subject}" if n.subject else "🔔 Notification"
    return Outgoing(_join(head, n.message, f"— {agent} · {n.urgency.value.lower()} urgency"))


def order_words(params: Mapping[str, str]) -> str:
    """An order call's parameters as one line (``BUY BTC/USDT MARKET, spend 1000``)."""
    parts = [params.get("side", "?"), params.get("symbol", "?"), params.get("order_type", "")]
    head = " ".join(p for p in parts if p)
    extra = []
    for key, label in (("quantity", "quantity"), ("quote_amount", "spend"), ("price", "price"),
                       ("stop_price", "stop")):
        if params.get(key):
            extra.append(f"{label} {params[key]}")
    return head + (", " + ", ".join(extra) if extra else "")


def question_message(
    question: Question, agent: str, *, order: str = "", expiry_s: int | None = None,
    live: str = "",
) -> Outgoing:
    """A clarification with its suggested replies as buttons, or an approval with Approve and
    Refuse; the reference lets a reply in the person's own words find the question again.

    ``live``: the live account's label when the order would go to an exchange with real money;
    then the approval says so first, as every other place that shows a live order does.
    """
    if question.kind is QuestionKind.APPROVAL:
        head = f"🔴 {live} · Approval needed" if live else "🟡 Approval needed"
        lines = [f"{head} · {agent}", question.text]
        if order:
            lines.append(f"Order: {order}")
        if expiry_s is not None:
            lines.append(f"The buttons work for {_duration(expiry_s)}; /approve sends fresh ones.")
    else:
        lines = [f"❓ {agent} asks", question.text]
        if question.format_hint and question.format_hint != "TEXT":
            lines.append(f"Expected: {question.format_hint.replace('_', ' ').lower()}")
        lines.append("Tap a reply, or reply to this message in your own words.")
    lines.append(f"ref {ref(question.question_id)}")
    buttons = tuple(
        (Button(_button_label(reply), f"{ANSWER}|{question.question_id}|{index}"),)
        for index, reply in enumerate(question.suggested_replies)
    )
    if question.kind is QuestionKind.APPROVAL and len(buttons) == 2:
        buttons = (buttons[0] + buttons[1],)  # Approve and Refuse side by side
    return Outgoing(_join(lines), buttons)


def answered_text(original: str, answer: str, by: str = "") -> str:
    who = f" by {by}" if by else ""
    return clip(f"{original}\n\n✔ Answered{who}: {answer}")


def expired_text(original: str) -> str:
    return clip(f"{original}\n\n⌛ These buttons expired. Send /approve for fresh ones.")


def _button_label(reply: str) -> str:
    return reply if len(reply) <= MAX_BUTTON else reply[: MAX_BUTTON - 1] + "…"


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


# -- command answers ---------------------------------------------------------------------------

def _agent_counts(agents: Sequence[AgentInfo]) -> str:
    counts: dict[str, int] = {}
    for info in agents:
        counts[info.state.value] = counts.get(info.state.value, 0) + 1
    if not agents:
        return "no agents"
    order = [s.value for s in AgentState]
    parts = [f"{counts[s]} {s.replace('_', ' ')}" for s in order if s in counts]
    return f"{len(agents)} ({', '.join(parts)})"


def status_text(o: Overview) -> str:
    a = o.account
    lines = [
        f"Kestrel · {a.mode.value} · market time {when(o.market_ms)}",
        f"Equity {money(a.equity, a.quote_currency)}, cash {money(a.cash)}; "
        f"P&L today {signed(a.today_pnl)}, total {signed(a.total_pnl)}",
        f"Positions {len(a.positions)}, open orders {len(a.open_orders)}",
        f"Agents: {_agent_counts(o.agents)}",
        f"Waiting for you: {o.approvals_waiting} approval(s), {o.questions_waiting} question(s)",
        f"Kill switch: {o.kill_switch}",
    ]
    lines.append(f"Refused Telegram senders since start: {o.refused}")
    return _join(lines)


def summary_text(o: Overview) -> str:
    a = o.account
    realized = sum((f.realized_pnl for f in o.fills_24h), Decimal(0))
    positions = [_position_line(p) for p in a.positions]
    return _join(
        f"📊 Daily summary · {a.mode.value} · market time {when(o.market_ms)}",
        f"Equity {money(a.equity, a.quote_currency)} (today {signed(a.today_pnl)}, total "
        f"{signed(a.total_pnl)}), max drawdown {number(a.max_drawdown_pct)}%",
        f"Fills in the last 24 h of market time: {len(o.fills_24h)} (realized {signed(realized)})",
        "Positions:", _listed(positions, "  none"),
        f"Agents: {_agent_counts(o.agents)}",
        f"Waiting for you: {o.approvals_waiting} approval(s), {o.questions_waiting} question(s)",
    )


def balance_text(a: AccountState) -> str:
    assets = [f"  {b.currency}: {number(b.total)} (free {number(b.free)}, in orders "
              f"{number(b.used)})" for b in a.assets]
    return _join(
        f"Balance · {a.mode.value}",
        f"Equity {money(a.equity, a.quote_currency)}, cash {money(a.cash, a.quote_currency)}",
        f"P&L today {signed(a.today_pnl)}, total {signed(a.total_pnl)}; max drawdown "
        f"{number(a.max_drawdown_pct)}%",
        _listed(assets, "  no assets"),
    )


def _position_line(p: Position) -> str:
    return (f"  {p.symbol}: {number(p.size)} at avg cost {number(p.avg_price)}, now "
            f"{number(p.current_price)}, unrealized {signed(p.unrealized_pnl)} "
            f"({number(p.weight_pct)}% of equity)")


def positions_text(positions: Sequence[Position]) -> str:
    held = [p for p in positions if p.size != 0]
    return _join("Open positions", _listed([_position_line(p) for p in held], "  none"))


def orders_text(orders: Sequence[Order], names: Callable[[str], str]) -> str:
    lines = []
    for o in orders:
        at = f" at {number(o.price)}" if o.price is not None else ""
        stop = f" stop {number(o.stop_price)}" if o.stop_price is not None else ""
        kind = f" [{o.exit_kind.value.replace('_', ' ').lower()}]" if o.exit_kind.value != \
            "NONE" else ""
        filled = f", filled {number(o.filled_quantity)}" if o.filled_quantity else ""
        lines.append(f"  {o.side.value} {o.order_type.value} {number(o.quantity)} {o.symbol}"
                     f"{at}{stop}{kind}{filled} · {names(o.agent_id)} · id {o.order_id[:8]}")
    return _join("Open orders", _listed(lines, "  none"))


def trades_text(fills: Sequence[Fill], names: Callable[[str], str]) -> str:
    lines = []
    for f in fills:
        pnl = f", P&L {signed(f.realized_pnl)}" if f.realized_pnl else ""
        lines.append(f"  {when(f.time_ms)[5:]} {f.side.value} {number(f.quantity)} {f.symbol} at "
                     f"{number(f.price)}{pnl} · {names(f.agent_id)}")
    return _join("Recent trades (newest first)", _listed(lines, "  none yet"))


def agents_text(agents: Sequence[AgentInfo]) -> str:
    lines = []
    for a in agents:
        engine = "rule engine" if a.provider == "rule-engine" else f"{a.provider}:{a.model}"
        why = f" ({a.fault_reason})" if a.fault_reason and a.state is AgentState.FAULTED else ""
        last = f" — {a.last_action}" if a.last_action else ""
        lines.append(f"• {a.name} · {a.role.value} · {a.state.value.replace('_', ' ')}{why} · "
                     f"{engine}{last}")
    return _join(f"Agents: {_agent_counts(agents)}", _listed(lines, "Ask the Orchestrator to "
                                                              "create some."))


HELP = (
    "Commands:\n"
    "/status — the account, agents and what waits for you\n"
    "/balance — balances and P&L\n"
    "/positions — open positions\n"
    "/orders — open orders\n"
    "/trades — recent trades\n"
    "/agents — every agent and what it did last\n"
    "/pause [name] — pause all running agents, or one\n"
    "/resume [name] — resume paused agents, or one (also a stopped or faulted one)\n"
    "/stop_all — stop every agent\n"
    "/kill — trip the kill switch (asks to confirm)\n"
    "/approve [ref] — list orders waiting for approval, or approve one\n"
    "/reject [ref] — list them, or refuse one\n"
    "Anything else you write goes to the Orchestrator."
)

COMMANDS = (
    ("status", "The account, agents and what waits for you"),
    ("balance", "Balances and P&L"),
    ("positions", "Open positions"),
    ("orders", "Open orders"),
    ("trades", "Recent trades"),
    ("agents", "Every agent and what it did last"),
    ("pause", "Pause all running agents, or one by name"),
    ("resume", "Resume paused agents, or one by name"),
    ("stop_all", "Stop every agent"),
    ("kill", "Trip the kill switch (asks to confirm)"),
    ("approve", "Orders waiting for approval"),
    ("reject", "Refuse an order waiting for approval"),
    ("help", "What the bot can do"),
)


def kill_prompt(expiry_s: int) -> Outgoing:
    return Outgoing(
        f"Trip the kill switch now? The button works for {_duration(expiry_s)}.",
        ((Button("Yes, trip the kill switch", f"{KILL}|yes"), Button("Cancel", f"{KILL}|no")),),
    )
