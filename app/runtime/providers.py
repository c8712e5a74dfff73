"""Which LLM provider an agent runs on, chosen in one place, and the providers built for it.

The rule, stated once: a new agent gets the provider and model the ``[llm]`` settings name, or
its template's own when the settings say ``template``; the agent keeps that choice (it is stored
with the agent). What the settings say about *reaching* a provider (server URL, key entry,
timeout, retries, streaming) is read when the provider is built, so a change reaches an agent
from its next task. The window's Backtest tab, ``kestrel backtest --agents`` and the runtime all
ask ``choose_provider`` / ``plan_for_templates``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from app.agents.costs import PriceTable
from app.agents.llm.factory import build_provider
from app.agents.llm.port import LLMProvider, LLMUsage
from app.agents.rule_engine import analyst as analyst_rules
from app.agents.rule_engine import orchestrator as orchestrator_rules
from app.agents.rule_engine import trader as trader_rules
from app.agents.rule_engine.engine import RuleEngineProvider
from app.agents.templates import AgentTemplate
from app.config import LLMSettings
from app.domain.agents import AgentInfo, AgentRole
from app.secrets import SecretStore

RULE_ENGINE = "rule-engine"
ROLE_POLICIES = {
    AgentRole.ANALYST: analyst_rules.TREND,
    AgentRole.TRADER: trader_rules.MODEL,
    AgentRole.ORCHESTRATOR: orchestrator_rules.MODEL,
}
ProviderOverride = Callable[[AgentInfo, AgentTemplate], LLMProvider | None]


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    """A provider kind and the model asked of it."""

    kind: str
    model: str

    @property
    def is_llm(self) -> bool:
        """A language model (paid, networked), not the built-in rule engine."""
        return self.kind != RULE_ENGINE


def rule_policy(template: AgentTemplate) -> str:
    """The rule engine's policy for ``template``: its own when it runs on the rule engine, else
    the policy of its role (a template written for a language model still has a rule baseline)."""
    if template.provider.kind == RULE_ENGINE:
        return template.provider.model
    return ROLE_POLICIES[template.role]


def choose_provider(template: AgentTemplate, llm: LLMSettings) -> ProviderChoice:
    """The provider and model a new agent of ``template`` gets under the ``llm`` settings.

    On the rule engine the model is always a rule policy: the ``[llm]`` model names a language
    model and means nothing to the engine, whose policies are per template.
    """
    if llm.provider in ("template", ""):
        return ProviderChoice(template.provider.kind, template.provider.model)
    if llm.provider == RULE_ENGINE:
        return ProviderChoice(RULE_ENGINE, rule_policy(template))
    return ProviderChoice(llm.provider, llm.model or template.provider.model)


def plan_for_templates(templates: Sequence[AgentTemplate], llm: LLMSettings) -> ProviderChoice:
    """What a run of these templates would call: the first language model among their choices
    (what a cost estimate prices), else the rule engine."""
    choices = [choose_provider(t, llm) for t in templates]
    for choice in choices:
        if choice.is_llm:
            return choice
    return ProviderChoice(RULE_ENGINE, choices[0].model if choices else "rules")


class Pricer:
    """Prices a call: the rule engine and replays cost nothing; other models from the table."""

    def __init__(self, table: PriceTable) -> None:
        self.table = table

    def cost(self, provider: LLMProvider, model: str, usage: LLMUsage) -> Decimal | None:
        if provider.name in (RULE_ENGINE, "replay"):
            return Decimal(0)
        return self.table.price(
            model, usage, provider=provider.name, base_url=getattr(provider, "base_url", None)
        )


class ProviderCache:
    """Builds each agent's provider (its stored kind and model) with its keyring entry, once per
    way of reaching it; ``use`` swaps in new ``[llm]`` settings for the providers built after.

    Args:
        override: tests' scripted providers; asked first, None falls through to the rule.
    """

    def __init__(
        self,
        llm: LLMSettings,
        secrets: SecretStore,
        rule_engine: RuleEngineProvider,
        override: ProviderOverride | None = None,
    ) -> None:
        self.llm = llm
        self.secrets = secrets
        self.rule_engine = rule_engine
        self.override = override
        self.built: dict[tuple[object, ...], LLMProvider] = {}

    def use(self, llm: LLMSettings) -> None:
        """Build with ``llm`` from now on (providers already built keep serving until closed)."""
        self.llm = llm

    def for_agent(self, info: AgentInfo, template: AgentTemplate) -> LLMProvider:
        if self.override is not None:
            chosen = self.override(info, template)
            if chosen is not None:
                return chosen
        kind = info.provider
        if kind == RULE_ENGINE:
            return self.rule_engine
        llm = self.llm
        base_url = template.provider.base_url or ""
        key_name = template.provider.api_key_name or ""
        if llm.provider == kind:
            base_url = llm.base_url or base_url
            key_name = llm.api_key_name or key_name
        key = (kind, info.model, base_url, key_name, llm.timeout_s, llm.max_retries, llm.stream)
        provider = self.built.get(key)
        if provider is None:
            provider = build_provider(
                kind, model=info.model, base_url=base_url or None,
                api_key=self.secrets.get(key_name) if key_name else None,
                key_help=(self.secrets.how_to_set(key_name, "Settings > LLM provider")
                          if key_name else None),
                timeout_s=llm.timeout_s, max_retries=llm.max_retries, stream=llm.stream,
                rule_engine=self.rule_engine,
            )
            self.built[key] = provider
        return provider

    async def aclose(self) -> None:
        for provider in self.built.values():
            await provider.aclose()
