"""What each agent state looks like and which of the panel's actions it allows.

The words, colours and allowed actions are derived from the one lifecycle table
(``app.domain.agents.TRANSITIONS``), so a button is enabled exactly when the manager would accept
the change, and the panel never offers "Pause" to an agent the store would refuse to pause. The
engine label lives here too: the built-in rule engine is always named as what it is, never as an
LLM, wherever an agent's provider is shown.
"""

from __future__ import annotations

from enum import StrEnum

from app.domain.agents import TRANSITIONS, AgentInfo, AgentState
from app.ui.panels.style import COLORS

RULE_ENGINE = "rule-engine"
RULE_ENGINE_LABEL = "rule engine (not an LLM)"


class Action(StrEnum):
    """The lifecycle commands of the panel; the values are ``AgentManager.control`` actions."""

    START = "start"
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"


# the past tense for the status strip ("Paused BTC/USDT Trader.")
DONE_WORDS: dict[Action, str] = {
    Action.START: "Started",
    Action.PAUSE: "Paused",
    Action.RESUME: "Resumed",
    Action.STOP: "Stopped",
}

STATE_WORDS: dict[AgentState, str] = {
    AgentState.CREATED: "created (not started)",
    AgentState.RUNNING: "running",
    AgentState.PAUSED: "paused",
    AgentState.WAITING_FOR_USER: "waiting for you",
    AgentState.STOPPED: "stopped",
    AgentState.FAULTED: "faulted",
}

_STATE_TONES: dict[AgentState, str] = {
    AgentState.CREATED: "muted",
    AgentState.RUNNING: "up",
    AgentState.PAUSED: "warning",
    AgentState.WAITING_FOR_USER: "accent",
    AgentState.STOPPED: "muted",
    AgentState.FAULTED: "down",
}


def state_color(state: AgentState) -> str:
    """The colour of a state's word in the current theme."""
    return COLORS[_STATE_TONES[state]]

# states that need the person: drawn bold so they stand out in a long list
ATTENTION = frozenset({AgentState.WAITING_FOR_USER, AgentState.FAULTED})

_STATE_HINTS: dict[AgentState, str] = {
    AgentState.CREATED: "Created but never started: Start runs it.",
    AgentState.RUNNING: "Working on its inbox as tasks arrive.",
    AgentState.PAUSED: "Paused: its tasks wait in the inbox until you resume it.",
    AgentState.WAITING_FOR_USER: (
        "Waiting for your answer in its conversation (double-click the row to open it)."
    ),
    AgentState.STOPPED: "Stopped: it takes no tasks until started again.",
}


def allows(action: Action, state: AgentState) -> bool:
    """Whether ``action`` is a change the lifecycle table allows from ``state``.

    Start and Resume both lead to RUNNING; Resume is the word for a paused agent and Start for
    one that is not running at all, so exactly one of the two is offered.
    """
    allowed = TRANSITIONS[state]
    match action:
        case Action.PAUSE:
            return AgentState.PAUSED in allowed
        case Action.STOP:
            return AgentState.STOPPED in allowed
        case Action.RESUME:
            return state is AgentState.PAUSED and AgentState.RUNNING in allowed
        case Action.START:
            idle = state not in (AgentState.PAUSED, AgentState.WAITING_FOR_USER)
            return idle and AgentState.RUNNING in allowed
    return False


def state_text(info: AgentInfo) -> str:
    """The state as the table shows it; a faulted agent says why in the cell itself."""
    words = STATE_WORDS[info.state]
    if info.state is AgentState.FAULTED:
        return f"{words}: {info.fault_reason or 'no reason was recorded'}"
    return words


def state_tooltip(info: AgentInfo) -> str:
    if info.state is AgentState.FAULTED:
        reason = info.fault_reason or "no reason was recorded"
        return f"Faulted: {reason}\nStart runs it again; Stop retires it."
    return _STATE_HINTS[info.state]


def engine_text(provider: str, model: str, *, with_policy: bool = False) -> str:
    """``rule engine (not an LLM)`` for the rule engine (and its policy's name when asked, where
    there is room), else ``provider · model``."""
    if provider == RULE_ENGINE:
        return f"{RULE_ENGINE_LABEL} · {model}" if with_policy else RULE_ENGINE_LABEL
    return f"{provider} · {model}" if model else provider


def engine_tooltip(provider: str, model: str) -> str:
    if provider == RULE_ENGINE:
        return (
            f"The built-in deterministic rule policy {model}: it is not a language model and "
            "costs nothing."
        )
    return f"LLM provider {provider}, model {model}"
