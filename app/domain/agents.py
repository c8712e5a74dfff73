"""Agent, task, job, notification and clarification types, with the agent lifecycle table.

These cross every layer (the SQLite stores, the tools, the agent loop, the GUI, the CLI), so they
are plain dataclasses here, beneath all of them. The lifecycle follows the component pattern: a
state changes only along an allowed transition, and a faulted agent always carries the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class AgentRole(StrEnum):
    ORCHESTRATOR = "orchestrator"
    ANALYST = "analyst"
    TRADER = "trader"


class AgentState(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_FOR_USER = "waiting_for_user"
    STOPPED = "stopped"
    FAULTED = "faulted"


TRANSITIONS: dict[AgentState, frozenset[AgentState]] = {
    AgentState.CREATED: frozenset({AgentState.RUNNING, AgentState.STOPPED}),
    AgentState.RUNNING: frozenset(
        {AgentState.PAUSED, AgentState.WAITING_FOR_USER, AgentState.STOPPED, AgentState.FAULTED}
    ),
    AgentState.PAUSED: frozenset({AgentState.RUNNING, AgentState.STOPPED}),
    AgentState.WAITING_FOR_USER: frozenset(
        {AgentState.RUNNING, AgentState.PAUSED, AgentState.STOPPED, AgentState.FAULTED}
    ),
    AgentState.STOPPED: frozenset({AgentState.RUNNING}),
    AgentState.FAULTED: frozenset({AgentState.RUNNING, AgentState.STOPPED}),
}


def agent_key(agent_id: str) -> str:
    """The form in which agent ids are compared: ids are case-insensitive everywhere.

    ``TRADER-1`` and ``trader-1`` name one agent, so a budget or allotment given for one spelling
    binds the other, and the orders of both count towards it.
    """
    return agent_id.casefold()


class InvalidTransitionError(ValueError):
    """A lifecycle change the transition table does not allow (e.g. pausing a stopped agent)."""


def check_transition(current: AgentState, new: AgentState) -> None:
    """Raise ``InvalidTransitionError`` unless ``current -> new`` is allowed."""
    if new not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "nothing"
        raise InvalidTransitionError(
            f"an agent that is {current} cannot become {new}; from {current} it can become "
            f"{allowed}"
        )


@dataclass(slots=True)
class AgentInfo:
    """One agent instance as stored; ``config`` is its validated initial configuration."""

    agent_id: str
    name: str
    template: str
    role: AgentRole
    state: AgentState
    config: dict[str, Any]
    provider: str  # "rule-engine", "openai-compatible", "anthropic", "replay"
    model: str
    created_ms: int
    updated_ms: int
    fault_reason: str | None = None
    current_task_id: str | None = None
    last_action: str = ""
    last_action_ms: int | None = None


class TaskStatus(StrEnum):
    QUEUED = "QUEUED"
    TAKEN = "TAKEN"  # an agent is working on it; back to QUEUED if the app dies before DONE
    WAITING = "WAITING"  # parked on a person's answer (clarification or approval)
    DONE = "DONE"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


USER_SOURCE = "user"
# The person at the desk, as an actor of tool calls (their order ticket, Close, Cancel, Flatten
# all) and as the owner of their orders and fills. Agents' ids are uuids, so it never names one.
PERSON_ID = "person"


@dataclass(slots=True)
class Task:
    """One item of an agent's inbox.

    ``source`` is ``user``, ``agent:<id>`` or ``job:<id>``; ``reply_to`` the agent that expects the
    answer (``reply_expected``).
    """

    task_id: str
    agent_id: str
    task_type: str
    payload: dict[str, Any]
    source: str
    created_ms: int
    status: TaskStatus = TaskStatus.QUEUED
    reply_to: str | None = None
    reply_expected: bool = False
    attempts: int = 0
    taken_ms: int | None = None
    done_ms: int | None = None
    result: str | None = None


@dataclass(slots=True)
class Job:
    """A background job: every ``interval_s`` seconds or on a cron schedule, on the market clock."""

    job_id: str
    name: str
    job_type: str
    target_agent_id: str
    task_type: str
    payload: dict[str, Any]
    enabled: bool
    created_ms: int
    next_run_ms: int | None
    cron: str | None = None
    interval_s: int | None = None
    last_run_ms: int | None = None
    created_by: str = ""


class Channel(StrEnum):
    UI_ALERT = "UI_ALERT"
    TRAY = "TRAY"
    TELEGRAM = "TELEGRAM"
    EMAIL = "EMAIL"


class Urgency(StrEnum):
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"
    CRITICAL = "CRITICAL"


class DeliveryStatus(StrEnum):
    SUCCESS = "SUCCESS"
    PENDING = "PENDING"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class ChannelStatus:
    channel: Channel
    delivery_status: DeliveryStatus
    message_id_or_error: str


@dataclass(slots=True)
class Notification:
    notification_id: str
    agent_id: str
    channels: tuple[Channel, ...]
    message: str
    subject: str
    urgency: Urgency
    created_ms: int
    statuses: tuple[ChannelStatus, ...] = ()


class QuestionKind(StrEnum):
    CLARIFICATION = "clarification"
    APPROVAL = "approval"  # an order the approval policy holds for the person


@dataclass(slots=True)
class Question:
    """A question an agent waits on, durably: a clarification or an order approval."""

    question_id: str
    agent_id: str
    task_id: str
    kind: QuestionKind
    text: str
    suggested_replies: tuple[str, ...]
    format_hint: str
    asked_ms: int
    answer: str | None = None
    answered_ms: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
