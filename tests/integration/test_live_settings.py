"""Settings saved while the world runs reach it: the provider rule is the one the runtime, the
Backtest tab and the CLI share; an agent keeps its provider and model while a new server,
timeout or key entry reaches its next task; approval, budget, speed and tool timeout apply at
once; what cannot apply says so."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

from app.agents.template_files import load_templates
from app.config import LLMSettings, Settings
from app.config.approval import ApprovalSettings
from app.config.telegram import TelegramSettings
from app.domain.agents import AgentInfo, AgentRole, AgentState
from app.runtime.providers import choose_provider, plan_for_templates
from app.secrets import SecretStore
from tests.helpers.agents import agent_world

TRADER = "TraderAgent_Default_v1"
ANALYST = "AnalystAgent_Trend_v1"


def test_one_rule_chooses_a_new_agents_provider_and_what_a_run_would_call() -> None:
    templates = load_templates()
    trader, analyst = templates[TRADER], templates[ANALYST]
    assert choose_provider(trader, LLMSettings()).kind == trader.provider.kind
    llm = LLMSettings(provider="openai-compatible", model="llama3.1")
    assert (choose_provider(trader, llm).kind, choose_provider(trader, llm).model) == (
        "openai-compatible", "llama3.1")
    no_model = choose_provider(analyst, LLMSettings(provider="anthropic"))
    assert (no_model.kind, no_model.model) == ("anthropic", analyst.provider.model)
    plan = plan_for_templates([trader, analyst], llm)
    assert plan.is_llm and plan.model == "llama3.1"
    assert not plan_for_templates([trader, analyst], LLMSettings(provider="rule-engine")).is_llm


def test_saved_settings_reach_the_running_world_and_name_what_waits(tmp_path: Path) -> None:
    async def scenario() -> None:
        first = Settings(llm=LLMSettings(provider="openai-compatible", model="gpt-x",
                                         base_url="http://127.0.0.1:8/v1"))
        world = agent_world(tmp_path, secrets=SecretStore(environ={}), settings=first)
        team = world.agents
        assert team is not None
        try:
            await world.start()
            info = AgentInfo(agent_id="a1", name="A", template=TRADER, role=AgentRole.TRADER,
                             state=AgentState.RUNNING, config={}, provider="openai-compatible",
                             model="gpt-x", created_ms=0, updated_ms=0)
            template = team.manager.templates[TRADER]
            before = team.providers.for_agent(info, template)
            new = world.settings.model_copy(update={
                "llm": LLMSettings(provider="openai-compatible", model="other",
                                   base_url="http://127.0.0.1:9/v1", timeout_s=5),
                "approval": ApprovalSettings(above_quote=Decimal(100)),
                "agents": world.settings.agents.model_copy(
                    update={"replay_speed": 10.0, "run_budget_usd": Decimal(3)}),
                "tools": world.settings.tools.model_copy(update={"default_timeout_s": 7.0}),
                "telegram": TelegramSettings(enabled=True),
            })
            outcome = world.apply_settings(new)
            after = team.providers.for_agent(info, template)
            assert after is not before, "the next task builds its provider from the new server"
            assert getattr(after, "base_url", "").startswith("http://127.0.0.1:9")
            assert after.default_model == "gpt-x", "an agent keeps the model it was created with"
            assert after.timeout_s == 5
            assert world.orders.approval.above_quote == Decimal(100)
            assert team.services.run_budget_usd == Decimal(3)
            assert world.venue.driver.speed == 10.0
            assert world.executor._default_timeout_s == 7.0  # noqa: SLF001
            assert set(outcome.applied) >= {
                "LLM provider", "approval", "replay speed and run budget", "tool timeout"}
            assert outcome.needs_restart == ("Telegram",)
            assert world.settings is new
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_a_world_without_changes_applies_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        world = agent_world(tmp_path)
        try:
            outcome = world.apply_settings(Settings.model_validate(world.settings.model_dump()))
            assert outcome.applied == () and outcome.needs_restart == ()
            assert outcome.describe() == ""
        finally:
            await world.aclose()

    asyncio.run(scenario())
