"""``RuleEngineProvider``: the built-in rule engine behind the same ``LLMProvider`` port as a model.

The template's ``model`` names the policy (``rules-orchestrator-v1``, ``rules-analyst-trend-v1``,
``rules-analyst-meanreversion-v1``, ``rules-trader-v1``); each answer is computed from the request
alone (the task, the calls so far and their results; see ``transcript.py``), so the engine keeps
no state, repeats exactly, and resumes a redelivered task where it stopped. It uses no tokens and
costs nothing, and it is never presented as a language model (``is_llm = False``).

A conversation the engine cannot read, or a policy that fails, is a ``PermanentLLMError``: the
agent becomes FAULTED with the reason in words, never silently wrong.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from app.agents.llm.port import (
    LLMRequest,
    LLMResponse,
    LLMUsage,
    PermanentLLMError,
    StreamCallback,
)
from app.agents.rules import analyst, orchestrator, trader
from app.agents.rules.calls import Answer
from app.agents.rules.transcript import Transcript, read_transcript

logger = logging.getLogger(__name__)

NAME = "rule-engine"
POLICIES = (orchestrator.MODEL, *analyst.MODELS, trader.MODEL)
NO_TOKENS = LLMUsage(0, 0)


def decide(
    model: str, agent_id: str, config: dict[str, Any], transcript: Transcript, *,
    blocks: bool = True, system: str = "",
) -> Answer:
    """The next answer of the policy ``model``.

    Args:
        system: the agent's system prompt, where the Orchestrator reads the account's quote
            currency (a coin named alone trades against it), as a model would.
        blocks: the Analyst and the Trader end with a final answer whose blocks the runtime
            writes to memory (``app.agents.answer_blocks``); False: each write is a call of its
            own, in base64, as before blocks (what the cost benchmark compares against).

    Raises:
        PermanentLLMError: ``model`` names no policy of the engine.
    """
    if model == orchestrator.MODEL:
        quote = orchestrator.quote_currency(system)
        return orchestrator.OrchestratorPolicy(agent_id, config, quote).turn(transcript)
    if model in analyst.MODELS:
        return analyst.AnalystPolicy(model, agent_id, config, blocks=blocks).turn(transcript)
    if model == trader.MODEL:
        return trader.TraderPolicy(agent_id, config, blocks=blocks).turn(transcript)
    raise PermanentLLMError(
        NAME, f"the rule engine has no policy {model!r}; its policies are {', '.join(POLICIES)}"
    )


class RuleEngineProvider:
    """Deterministic policies per role that speak the XML tool protocol (not an LLM)."""

    name = NAME
    is_llm = False

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse:
        started = time.perf_counter()
        try:
            transcript = read_transcript(request.messages)
        except ValueError as exc:
            raise PermanentLLMError(
                NAME, f"cannot continue this conversation ({exc}); the rule engine only reads "
                "conversations it wrote itself"
            ) from None
        try:
            answer = decide(request.model, request.agent_id, request.agent_config, transcript,
                            system=request.system)
        except PermanentLLMError:
            raise
        except Exception as exc:  # a defect in a policy: fault the agent with the reason
            logger.exception("rule policy %s failed on task %s", request.model, request.task_id)
            raise PermanentLLMError(
                NAME, f"the {request.model} policy failed: {exc!r}"
            ) from exc
        text = answer.render()
        if on_delta is not None:
            on_delta(text)
        return LLMResponse(
            text, NO_TOKENS, request.model, NAME, (time.perf_counter() - started) * 1000
        )

    async def aclose(self) -> None:
        return None
