"""What a world's agents run on, said truthfully, and the training-cutoff warnings that follow.

Why: a person who opens the desk, ``kestrel run`` or ``kestrel chat`` must know at once whether a
language model decides and which one, and whether it may remember the market being replayed: the
bundled data is 2017-2019, years before any current model's training cutoff, so a model trading
it may be recalling what came next. ``kestrel eval`` and ``kestrel backtest --agents`` flag that
in their reports; here it is said where the person meets the agents first, in the same words
(``app.agents.cutoffs.period_warning``).

What is described: the agents that exist (the provider and model stored with each), and what a
new agent would get under the ``[llm]`` settings (``choose_provider`` for every known template:
the settings' provider, or each template's own with ``template``). A model is checked under the
names its calls were answered with (``checked_names``), so an alias served by a dated model is
checked as that model once it has answered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.agents.cutoffs import period_warnings
from app.runtime.providers import RULE_ENGINE, ProviderChoice, choose_provider

if TYPE_CHECKING:
    from app.runtime.world import World

RULE_ENGINE_WORDS = "the built-in rule engine (not an LLM)"


def engine_label(choice: ProviderChoice) -> str:
    """``openai-compatible:gpt-4o-mini``, or the rule engine said as not being a language model."""
    return RULE_ENGINE_WORDS if choice.kind == RULE_ENGINE else f"{choice.kind}:{choice.model}"


@dataclass(frozen=True, slots=True)
class Engines:
    """What the agents run on (``agents``) and what new ones would (``new``), each sorted."""

    agents: tuple[ProviderChoice, ...]
    new: tuple[ProviderChoice, ...]

    @property
    def models(self) -> tuple[ProviderChoice, ...]:
        """The language models among both, each once."""
        return tuple(sorted({c for c in (*self.agents, *self.new) if c.is_llm}, key=_order))

    def words(self, mark: Callable[[str], str] = str) -> str:
        """E.g. "agents on openai-compatible:gpt-4o-mini", or "agents on the built-in rule
        engine (not an LLM); new agents on anthropic:claude-sonnet-4-5" when a new agent would
        run on something else; ``mark`` wraps each engine's name (bold in the banner)."""
        existing, new = _labels(self.agents), _labels(self.new)
        if not existing or set(new) <= set(existing):
            return f"agents on {_join(existing or new, mark)}"
        return f"agents on {_join(existing, mark)}; new agents on {_join(new, mark)}"


def _labels(choices: Iterable[ProviderChoice]) -> list[str]:
    labels = {engine_label(c) for c in choices}
    # the rule engine last: what decides with a language model is named first
    return sorted(labels, key=lambda label: (label == RULE_ENGINE_WORDS, label))


def _join(labels: list[str], mark: Callable[[str], str]) -> str:
    return " and ".join(mark(label) for label in labels)


def agent_engines(world: World) -> Engines:
    """What the world's agents run on, and what a new agent would under its ``[llm]``."""
    assert world.agents is not None, "a world without agents has no engines"
    manager = world.agents.manager
    agents = {ProviderChoice(a.provider, a.model) for a in manager.list_agents()}
    new = {choose_provider(t, world.settings.llm) for t in manager.templates.values()}
    return Engines(tuple(sorted(agents, key=_order)), tuple(sorted(new, key=_order)))


def _order(choice: ProviderChoice) -> tuple[str, str]:
    return choice.kind, choice.model


def replay_warnings(world: World, start_ms: int) -> list[str]:
    """The training-cutoff warnings for the language models the world's agents run on (or new
    ones would) over an offline replay from ``start_ms`` (flags, then notes); none for the rule
    engine, and none on a live market, which is after every cutoff."""
    if not world.venue.offline or world.agents is None:
        return []
    engines = agent_engines(world)
    answered_by_agent = world.agents.conversations.answered_models()
    answered: dict[ProviderChoice, set[str]] = {}
    for info in world.agents.manager.list_agents():
        names = answered_by_agent.get(info.agent_id, set())
        answered.setdefault(ProviderChoice(info.provider, info.model), set()).update(names)
    warned: dict[str, bool] = {}
    for choice in engines.models:
        for text, flag in period_warnings(
            choice.model, answered.get(choice, ()), start_ms, world.settings.llm.training_cutoff,
            can_run_blind=False,
        ):
            warned.setdefault(text, flag)
    return sorted(warned, key=lambda text: not warned[text])
