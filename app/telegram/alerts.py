"""What the bot tells the person by itself: the runtime's events turned into messages by kind.

The bot subscribes to the bus like the window and the tray; nothing polls. Each event is read
once for its data (the fill the agent itself is told about, the Risk Guard's rule and reason from
the tool result, the stored question) and worded by ``app.telegram.format``:

- fills, take_profit_stop_loss: ``TaskQueued`` of an ORDER_FILLED task (its payload is the fill)
- risk_rejections: ``ConversationMessageAdded`` of a rejected tool result (the rule, the reason)
- approvals: ``QuestionAsked`` of an approval (Approve/Refuse buttons)
- questions: ``QuestionAsked`` of a clarification (its suggested replies as buttons)
- agent_errors: ``AgentStateChanged`` to faulted
- daily_summary: a timer at ``telegram.daily_summary_time``, local time
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from app.domain.agents import Question, QuestionKind
from app.events import (
    AgentStateChanged,
    ConversationMessageAdded,
    EventBus,
    QuestionAsked,
    TaskQueued,
)
from app.runtime.fills import ORDER_FILLED
from app.telegram import format as fmt
from app.telegram.commands import BotCommands
from app.telegram.notifier import Poster
from app.telegram.outbox import OnSent
from app.tools.protocol.result import parse_result

if TYPE_CHECKING:
    from app.runtime.world import World

logger = logging.getLogger(__name__)

HUMAN_REFUSAL_RULE = "human_approval"  # the person's own "Refuse", not the Risk Guard's
_REJECTED = "<status>rejected</status>"


def seconds_until(now: datetime, hhmm: str) -> float:
    """Seconds from ``now`` to the next ``HH:MM`` on its clock (tomorrow once it has passed)."""
    hour, minute = (int(part) for part in hhmm.split(":"))
    due = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if due <= now:
        due += timedelta(days=1)
    return (due - now).total_seconds()


class Alerts:
    """Subscribes to the runtime's events and posts a message of the right kind for each.

    Args:
        question_sent: told (question id, chat id, message id, text) for each question posted,
            so the bot can mark the message once the question is answered anywhere.
        conversation_task: whether a task was started from Telegram; its questions are sent
            even when their kind is off, as they answer the person's own message.
    """

    def __init__(
        self,
        runtime: World,
        commands: BotCommands,
        poster: Poster,
        *,
        expiry_s: int,
        question_sent: Callable[[str, int, int, str], None],
        conversation_task: Callable[[str], bool] = lambda _task_id: False,
    ) -> None:
        self.rt = runtime
        self.commands = commands
        self.poster = poster
        self.expiry_s = expiry_s
        self._question_sent = question_sent
        self._conversation_task = conversation_task
        self._summary: asyncio.Task[None] | None = None

    def attach(self, bus: EventBus) -> None:
        bus.subscribe(TaskQueued, self.on_task_queued)
        bus.subscribe(ConversationMessageAdded, self.on_message)
        bus.subscribe(QuestionAsked, self.on_question)
        bus.subscribe(AgentStateChanged, self.on_state)

    def detach(self, bus: EventBus) -> None:
        bus.unsubscribe(TaskQueued, self.on_task_queued)
        bus.unsubscribe(ConversationMessageAdded, self.on_message)
        bus.unsubscribe(QuestionAsked, self.on_question)
        bus.unsubscribe(AgentStateChanged, self.on_state)

    # -- events ----------------------------------------------------------------------------------

    def on_task_queued(self, event: TaskQueued) -> None:
        if event.task_type != ORDER_FILLED:
            return
        task = self.rt.agents.queue.get(event.task_id)
        if task is None:
            return
        exit_kind = str(task.payload.get("exit_kind") or "")
        kind = "take_profit_stop_loss" if exit_kind in ("TAKE_PROFIT", "STOP_LOSS") else "fills"
        self.poster.post(kind, fmt.fill_alert(task.payload, self.commands.name(event.agent_id)))

    def on_message(self, event: ConversationMessageAdded) -> None:
        if event.kind != "tool_result" or _REJECTED not in event.content[:300]:
            return
        result = parse_result(event.content)
        if result.status != "rejected" or result.rule == HUMAN_REFUSAL_RULE:
            return
        self.poster.post("risk_rejections", fmt.rejection_alert(
            self.commands.name(event.agent_id), result.rule, result.message))

    def on_question(self, event: QuestionAsked) -> None:
        question = self.rt.agents.questions.get(event.question_id)
        if question is None or question.answer is not None:
            return
        kind = "approvals" if question.kind is QuestionKind.APPROVAL else "questions"
        self.post_question(question, kind, force=self._conversation_task(question.task_id))

    def post_question(
        self, question: Question, kind: str = "questions", *, force: bool = False,
        chats: tuple[int, ...] | None = None,
    ) -> None:
        """Send a question with its buttons (to ``chats``, else every notification chat)."""
        message = self.commands.message_for(question, self.expiry_s)
        on_sent: OnSent = lambda chat, message_id: self._question_sent(  # noqa: E731
            question.question_id, chat, message_id, message.text)
        if chats is None:
            self.poster.post(kind, message, force=force, on_sent=on_sent)
            return
        for chat in chats:
            self.poster.outbox.put(chat, message, on_sent=on_sent)

    def on_state(self, event: AgentStateChanged) -> None:
        if event.state != "faulted":
            return
        self.poster.post("agent_errors", fmt.error_alert(
            self.commands.name(event.agent_id), event.reason or ""))

    # -- the daily summary -----------------------------------------------------------------------

    def start_summary(
        self, at: str, now: Callable[[], datetime] = datetime.now,
    ) -> None:
        if self._summary is None:
            self._summary = asyncio.get_running_loop().create_task(
                self._summaries(at, now), name="telegram-daily-summary")

    async def stop_summary(self) -> None:
        if self._summary is not None:
            self._summary.cancel()
            await asyncio.gather(self._summary, return_exceptions=True)
            self._summary = None

    async def _summaries(self, at: str, now: Callable[[], datetime]) -> None:
        while True:
            await asyncio.sleep(seconds_until(now(), at))
            try:
                await self.send_summary()
            except Exception:  # one failed summary must not end tomorrow's
                logger.exception("Telegram: the daily summary failed")
            await asyncio.sleep(1.0)  # past the minute's start, so the next one is tomorrow

    async def send_summary(self) -> list[asyncio.Future[int]]:
        return self.poster.post("daily_summary", fmt.Outgoing(await self.commands.summary()))
