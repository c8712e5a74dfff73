"""Whether an agent's work keeps failing: the agent list's "error", and an alert to the person.

An agent can be "running" and achieve nothing: an analyst watching a market with no data answers
every hourly task with "no analysis (NOT_FOUND ...)". Its tasks end DONE (the agent did answer),
so its state never changes, and only the Tool calls panel counted the errors. ``AgentHealth``
judges each finished task and counts the failures in a row per agent; at ``FAILING_STREAK`` it
marks the agent failing (the agent list shows "error" with the reason) and tells the person once,
in the window's alert strip and the tray. The agent keeps running: a market whose data begins
later, or a server back up, lets it work again, and its next good task clears the mark.

The Orchestrator is not judged: its work is a conversation whose every answer the person reads.
A task failed when it ended FAILED, or when a tool it called answered with an error that a later
call of the same tool in the task did not make good (a model that corrects its parameters and
succeeds has not failed; an analyst whose every data call errs has). A Risk Guard refusal is a
decision, not a failure. Tasks the agent never worked on (a pause or resume recorded as a task)
are not judged.

The streak is rebuilt from the stored tasks when the runtime opens, so a relaunch shows the same
"error" without waiting for three more failures, and without alerting again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from app.agents.agent_store import AgentStore
from app.agents.conversation_store import ConversationStore, StoredMessage
from app.domain.agents import AgentRole, Channel, TaskStatus, Urgency
from app.events import EventBus, TaskFinished
from app.orchestration.notify import SENDER, NotificationService
from app.orchestration.queue import TaskQueue

logger = logging.getLogger(__name__)

FAILING_STREAK = 3  # failed tasks in a row that make an agent "error"
SUBJECT = "Kestrel: an agent keeps failing"
_TOOL = re.compile(r'<tool_result\b[^>]*\btool_name="([^"]*)"')
_STATUS = re.compile(r"<status>\s*(\w+)\s*</status>")
_CODE = re.compile(r"<error_code>\s*([^<]*?)\s*</error_code>")
_MESSAGE = re.compile(r"<message>\s*([^<]*?)\s*</message>", re.DOTALL)
_FINISHED = (TaskStatus.DONE, TaskStatus.FAILED)
REASON_CHARS = 160


@dataclass(frozen=True, slots=True)
class Failing:
    """An agent whose last ``count`` tasks failed; ``reason``: the last one's failure."""

    count: int
    reason: str

    def words(self) -> str:
        return f"its last {self.count} tasks failed (the last: {self.reason})"


def task_failure(status: str, result: str | None, messages: Iterable[StoredMessage]) -> str | None:
    """Why a finished task failed, in words; None when it did not. See the module docstring."""
    if status == TaskStatus.FAILED.value:
        return _short(result or "the task failed")
    last: dict[str, str | None] = {}
    for message in messages:
        if message.kind != "tool_result":
            continue
        tool = _TOOL.search(message.content)
        state = _STATUS.search(message.content)
        if tool is None or state is None:
            continue
        if state.group(1) == "error":
            code = _CODE.search(message.content)
            said = _MESSAGE.search(message.content)
            last[tool.group(1)] = (f"{tool.group(1)} {code.group(1) if code else 'error'}: "
                                   f"{said.group(1) if said else ''}")
        else:
            last[tool.group(1)] = None
    failures = [why for why in last.values() if why is not None]
    return _short(failures[0]) if failures else None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1] + "…"


class AgentHealth:
    """Counts each agent's failed tasks in a row and says when one keeps failing.

    Args:
        agents: the agent store (names, roles).
        notifications: where the alert goes (the window's strip and the tray).
    """

    def __init__(
        self,
        queue: TaskQueue,
        conversations: ConversationStore,
        agents: AgentStore,
        notifications: NotificationService,
        bus: EventBus | None,
    ) -> None:
        self._queue = queue
        self._conversations = conversations
        self._agents = agents
        self._notifications = notifications
        self._streak: dict[str, int] = {}
        self._reason: dict[str, str] = {}
        if bus is not None:
            bus.subscribe(TaskFinished, self._on_finished)

    def failing(self, agent_id: str) -> Failing | None:
        """The agent's failing streak, once it reached ``FAILING_STREAK``; else None."""
        count = self._streak.get(agent_id, 0)
        if count < FAILING_STREAK:
            return None
        return Failing(count, self._reason.get(agent_id, "no reason was recorded"))

    def recover(self) -> None:
        """Rebuild each agent's streak from its newest finished tasks (at start)."""
        for info in self._agents.all():
            if info.role is AgentRole.ORCHESTRATOR:
                continue
            tasks = self._queue.tasks(info.agent_id, _FINISHED, limit=4 * FAILING_STREAK)
            streak, reason = 0, ""
            for task in tasks:  # newest first
                messages = self._conversations.messages(task.task_id)
                if not messages:
                    continue  # never worked on (a control recorded as a task)
                why = task_failure(task.status.value, task.result, messages)
                if why is None:
                    break
                streak += 1
                reason = reason or why
                if streak >= FAILING_STREAK:
                    break
            if streak:
                self._streak[info.agent_id], self._reason[info.agent_id] = streak, reason

    def _on_finished(self, event: TaskFinished) -> Coroutine[Any, Any, None] | None:
        """Judge the task at once (the agent list reads the streak on its next refresh); only
        the alert, once per streak, is sent as a delivery of its own (the bus awaits it)."""
        if event.status not in (TaskStatus.DONE.value, TaskStatus.FAILED.value):
            return None
        info = self._agents.get(event.agent_id)
        if info is None or info.role is AgentRole.ORCHESTRATOR:
            return None  # its work is a conversation: the person reads each answer as it comes
        messages = self._conversations.messages(event.task_id)
        if not messages:
            return None
        why = task_failure(event.status, event.result, messages)
        if why is None:
            self._streak.pop(event.agent_id, None)
            self._reason.pop(event.agent_id, None)
            return None
        self._streak[event.agent_id] = self._streak.get(event.agent_id, 0) + 1
        self._reason[event.agent_id] = why
        if self._streak[event.agent_id] == FAILING_STREAK:
            return self._alert(event.agent_id)
        return None

    async def _alert(self, agent_id: str) -> None:
        info = self._agents.get(agent_id)
        failing = self.failing(agent_id)
        if info is None or failing is None:
            return
        message = (f"{info.name} is running but {failing.words()}. It keeps trying at each "
                   "task; pause or stop it in the Agents panel, or give it what it lacks (the "
                   "reason says what).")
        try:
            await self._notifications.send(SENDER, (Channel.UI_ALERT, Channel.TRAY), message,
                                           SUBJECT, Urgency.HIGH)
        except Exception:  # the agent list shows it either way
            logger.exception("the alert that %s keeps failing could not be sent", info.name)
