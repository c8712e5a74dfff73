"""A small typed async event bus: immutable, past-tense events; isolated subscribers.

Producers (agents, the broker, the memory bank) publish; the GUI, the tray and Telegram subscribe;
nothing polls. A producer below the runtime (the broker) is handed an ``EventSink`` (a plain
callable), so it needs neither the bus nor to know who listens. A failing subscriber is logged
and the others still run. The bus is used from the event loop's thread only; a worker thread
hands events over with ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

from app.domain.trading import Fill, Order

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every event; subclasses are frozen dataclasses named in the past tense."""


@dataclass(frozen=True, slots=True)
class ToolCallCompleted(Event):
    agent_id: str
    tool_name: str
    status: str
    error_code: str | None
    duration_ms: float


@dataclass(frozen=True, slots=True)
class MemoryFileChanged(Event):
    """A file in an agent's memory folder was written, appended, created or deleted."""

    agent_id: str
    path: str
    kind: str  # "written" | "appended" | "created" | "deleted"


@dataclass(frozen=True, slots=True)
class AgentStateChanged(Event):
    """An agent was created, changed lifecycle state, or was deleted (``state == "deleted"``)."""

    agent_id: str
    state: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class AgentActed(Event):
    """An agent started a task or called a tool: what the agent list shows as its last action."""

    agent_id: str
    task_id: str | None
    action: str


@dataclass(frozen=True, slots=True)
class ConversationMessageAdded(Event):
    """One message of an agent's conversation was stored (what the chat panel draws).

    ``kind``: ``task`` (what started the work), ``assistant`` (the model's whole answer),
    ``tool_result`` (the envelope fed back), ``user_reply`` (a person's answer), ``final``
    (the agent's text answer), ``notice`` (the loop's own remark, e.g. the step limit).
    """

    agent_id: str
    task_id: str
    step: int
    role: str
    kind: str
    content: str


@dataclass(frozen=True, slots=True)
class AnswerStreamed(Event):
    """A piece of a streaming answer arrived; the final text follows as a message."""

    agent_id: str
    task_id: str
    step: int
    delta: str


@dataclass(frozen=True, slots=True)
class QuestionAsked(Event):
    """An agent waits for the person: a clarification or an order approval."""

    question_id: str
    agent_id: str
    task_id: str
    kind: str
    text: str
    suggested_replies: tuple[str, ...]
    format_hint: str


@dataclass(frozen=True, slots=True)
class QuestionAnswered(Event):
    question_id: str
    agent_id: str
    answer: str


@dataclass(frozen=True, slots=True)
class NotificationRaised(Event):
    """``send_notification`` (or the app itself) raised an alert for the UI and the tray."""

    notification_id: str
    agent_id: str
    channel: str  # "UI_ALERT" or "TRAY"
    message: str
    subject: str
    urgency: str


@dataclass(frozen=True, slots=True)
class TaskQueued(Event):
    task_id: str
    agent_id: str
    task_type: str
    source: str


@dataclass(frozen=True, slots=True)
class TaskFinished(Event):
    task_id: str
    agent_id: str
    status: str
    result: str | None


@dataclass(frozen=True, slots=True)
class LLMCallRecorded(Event):
    agent_id: str
    task_id: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cost: str
    latency_ms: float


@dataclass(frozen=True, slots=True)
class ClockAdvanced(Event):
    """The market clock moved (replay/backtest): candles closed, orders settled, jobs fired."""

    now_ms: int
    fills: int


@dataclass(frozen=True, slots=True)
class OrderPlaced(Event):
    """A broker accepted an order (``order`` is a copy as it was placed)."""

    order: Order


@dataclass(frozen=True, slots=True)
class OrderCancelled(Event):
    """An order left the book without (fully) filling: cancelled on request, by its other exit
    (one-cancels-other), or expired (``order.status`` says which, ``order.reason`` why)."""

    order: Order


@dataclass(frozen=True, slots=True)
class OrderFilled(Event):
    """An order (part-)filled; ``order`` is a copy after the fill, with its client id and exit
    kind, which the agent that placed it is told along with the fill."""

    fill: Fill
    order: Order


@dataclass(frozen=True, slots=True)
class OrderRejected(Event):
    """An order was refused before reaching the book: by the Risk Guard (``source="risk"``,
    ``rule`` the guard's rule) or by the broker (``source="broker"``, ``rule`` the error code)."""

    agent_id: str
    symbol: str
    side: str
    order_type: str
    quantity: Decimal
    source: str
    rule: str
    reason: str
    time_ms: int


@dataclass(frozen=True, slots=True)
class KillSwitchTripped(Event):
    """The kill switch tripped: no new order passes the Risk Guard until a person resets it.

    Published once the trip is committed, before its actions (cancelling orders, pausing agents)
    run, so every view shows the halt at once. ``tripped_ms`` is the wall clock, ``market_ms``
    the market clock (a replay's simulated time).
    """

    trip_id: int
    cause: str  # app.domain.kill_switch.TripCause
    reason: str
    by: str
    tripped_ms: int
    market_ms: int


@dataclass(frozen=True, slots=True)
class KillSwitchReset(Event):
    """A person reset the kill switch: orders may pass the Risk Guard again (agents stay paused)."""

    trip_id: int
    by: str
    reset_ms: int


@dataclass(frozen=True, slots=True)
class OrderOutcomeUnknown(Event):
    """An order was sent to an exchange and whether it was placed is not known (no answer, an
    unreadable one): published by a live broker for each such order.

    Attributes:
        consecutive: how many orders in a row, this one included, ended so; the broker resets its
            count at the next definite answer. The kill switch trips when it reaches
            ``[risk.kill_switch] unknown_outcomes_limit``.
    """

    venue: str
    agent_id: str
    symbol: str
    client_order_id: str
    reason: str
    consecutive: int


@dataclass(frozen=True, slots=True)
class ReconciliationMismatch(Event):
    """A live broker's reconciliation found what it cannot explain: balances that differ from the
    journal, orders on the exchange it does not know, an order whose outcome stayed unknown.

    Attributes:
        kind: ``balance``, ``unknown_orders`` or ``unresolved_order`` (an order whose outcome
            stayed unknown through its lookup window; the kill switch trips on it as
            ``[risk.kill_switch] on_unresolved_order`` says).
        detail: what differs, in words with the numbers (also what makes two reports the same
            mismatch: one already answered by a trip does not trip the switch again).
    """

    venue: str
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class UnresolvedOrderFound(Event):
    """An order a live broker's reconciliation had given up on (its answer lost and not found
    within its lookup window: the person was told it was not placed) turned up on the exchange
    after all; the journal follows it again, with its fills.

    Attributes:
        detail: the order and what the exchange says of it, in words.
    """

    venue: str
    detail: str


@dataclass(frozen=True, slots=True)
class AccountRefreshed(Event):
    """A live broker read the account's balances from its exchange: the kill switch judges the
    loss halts on the account as it now is (a replay's account changes only when its clock
    moves, which ``ClockAdvanced`` says)."""

    venue: str
    time_ms: int


@dataclass(frozen=True, slots=True)
class ExchangeBanned(Event):
    """An exchange banned (HTTP 418) or rate-limited (429) this client's requests: Kestrel sends
    it nothing, reads or orders, until ``until_ms`` (published when the pause starts or grows).

    Attributes:
        status: 418 (a ban) or 429 (a rate limit).
        reason: the exchange's own words in the answer.
    """

    venue: str
    until_ms: int
    status: int
    reason: str


@dataclass(frozen=True, slots=True)
class UnknownOrdersAwaitDecision(Event):
    """Reconciliation found orders on the exchange that the journal does not know; the person
    decides whether each is adopted (followed, owned by the person) or left alone.

    Attributes:
        orders: one line per order, in words (symbol, side, amount, price, exchange id).
    """

    venue: str
    orders: tuple[str, ...]


E = TypeVar("E", bound=Event)
# what a subscriber returns is not used: an awaitable is awaited, its result dropped
Handler = Callable[[Any], Awaitable[object] | None]
# how a producer below the runtime publishes (the runtime hands in ``bus.publish_nowait``)
EventSink = Callable[[Event], None]


class EventBus:
    """Delivers each published event to every subscriber of its type (and of its base types)."""

    def __init__(self) -> None:
        self._subscribers: dict[type[Event], list[Handler]] = {}
        self._pending: set[asyncio.Task[None]] = set()
        # says whether a subscriber's failure is already taken care of elsewhere (a full disk,
        # which stops the run and is said once): such a failure is not logged as a bug
        self.handled: Callable[[BaseException], bool] | None = None

    def _failed(self, exc: Exception, handler: Handler, event: Event) -> None:
        if self.handled is not None and self.handled(exc):
            return
        logger.error("subscriber %r failed on %s", handler, type(event).__name__, exc_info=exc)

    def subscribe(
        self, event_type: type[E], handler: Callable[[E], Awaitable[object] | None]
    ) -> None:
        self._subscribers.setdefault(event_type, []).append(handler)

    def unsubscribe(
        self, event_type: type[E], handler: Callable[[E], Awaitable[object] | None]
    ) -> None:
        handlers = self._subscribers.get(event_type, [])
        if handler in handlers:
            handlers.remove(handler)

    def _handlers_for(self, event: Event) -> list[Handler]:
        found: list[Handler] = []
        for klass in type(event).__mro__:
            found.extend(self._subscribers.get(klass, ()))
        return found

    async def publish(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber and wait for async ones; never raises for them."""
        for handler in self._handlers_for(event):
            try:
                outcome = handler(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(exc, handler, event)

    def publish_nowait(self, event: Event) -> None:
        """Publish from synchronous code: sync subscribers run now, async ones as tasks."""
        for handler in self._handlers_for(event):
            try:
                outcome = handler(event)
                if inspect.isawaitable(outcome):
                    task = asyncio.ensure_future(self._guard(outcome, handler, event))
                    self._pending.add(task)
                    task.add_done_callback(self._pending.discard)
            except Exception as exc:
                self._failed(exc, handler, event)

    async def _guard(self, outcome: Awaitable[object], handler: Handler, event: Event) -> None:
        try:
            await outcome
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed(exc, handler, event)

    async def drain(self) -> None:
        """Wait for async deliveries started by ``publish_nowait``."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
