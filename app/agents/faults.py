"""Faulted agents, said plainly: which agent stopped, why, and what the person can do about it.

Why: an agent whose model server refuses the key or cannot be reached becomes FAULTED and does
nothing more; a run that only printed its (empty) results afterwards looked like a quiet market.
The backtest report, ``kestrel run``, ``kestrel chat`` and the window's chat header all put the
fault first, in the same words, and the commands exit with ``EXIT_AGENT_FAULTED``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.domain.agents import AgentInfo, AgentState

EXIT_AGENT_FAULTED = 3  # the run finished, but an agent faulted: its results are not valid
RESUME_HINT = "resume the agent (Resume in the Agents panel, or /resume in kestrel chat)"
RERUN_HINT = "run the backtest again"

_KEY_WORDS = ("API key", "api key", "HTTP 401", "authentication")
_SERVER_WORDS = ("cannot reach", "connection to", "did not answer", "no complete answer",
                 "stopped answering", "failed (HTTP 5", "HTTP 50")
_MODEL_WORDS = ("does not know the model", "refused access to the model")
_LIMIT_WORDS = ("rate limiting", "asks for payment", "HTTP 429", "HTTP 402")
_CONTEXT_WORDS = ("context_tokens", "maximum context length", "context length", "context size")
_TOOLS_WORDS = ("refused the tools offered natively",)


@dataclass(frozen=True, slots=True)
class Fault:
    """One faulted agent (its reason is already redacted: it comes from the agent store)."""

    agent_id: str
    name: str
    role: str
    reason: str

    def line(self, retry: str = RESUME_HINT) -> str:
        return (f"{self.name} ({self.role}) FAULTED: {self.reason or 'no reason was recorded'}. "
                f"What to do: {what_to_do(self.reason, retry)}")


def faults_of(agents: Iterable[AgentInfo]) -> list[Fault]:
    """The agents that are FAULTED now, in the order given."""
    return [
        Fault(a.agent_id, a.name, a.role.value, a.fault_reason or "")
        for a in agents if a.state is AgentState.FAULTED
    ]


def what_to_do(reason: str, retry: str = RESUME_HINT) -> str:
    """The person's next step for a fault reason, ending with how to try again."""
    if any(word in reason for word in _KEY_WORDS):
        step = ("check the API key: Settings > LLM names the OS keyring entry that holds it "
                "(or set the environment variable KESTREL_<NAME> for that name)")
    elif any(word in reason for word in _SERVER_WORDS):
        step = ("check that the model server is running and that the base URL in Settings > LLM "
                "is right")
    elif any(word in reason for word in _MODEL_WORDS):
        step = "check the model name in Settings > LLM (or the agent's template)"
    elif any(word in reason for word in _LIMIT_WORDS):
        step = "the provider limits or bills this key: wait, or check the account"
    elif any(word in reason for word in _CONTEXT_WORDS):
        step = ("set context_tokens in Settings > LLM to the server's context (or give the server "
                "a larger one), or lower max_output_tokens")
    elif any(word in reason for word in _TOOLS_WORDS):
        step = ("this server or model takes no tools through its API: set tool_transport to "
                "\"auto\" or \"xml\" in Settings > LLM")
    elif "internal error" in reason:
        step = ("this is a bug in Kestrel; the log in the workspace's logs folder has the "
                "details")
    else:
        step = "fix the cause above"
    return f"{step}, then {retry}."


def fault_banner(faults: list[Fault], retry: str = RESUME_HINT) -> list[str]:
    """The lines that open a report of a run in which agents faulted (none when none did)."""
    if not faults:
        return []
    head = (f"WARNING: {len(faults)} agent(s) FAULTED during this run; the results below do not "
            "show what the agents would have done.")
    return [head, *(f"  {fault.line(retry)}" for fault in faults)]
