"""Each role's prompt, read as a model reads it, says one thing and asks only what the role can do.

Part D's template was written for every agent at once, and read that way it contradicted the
roles: it told every agent to ask the person with a tool only the Orchestrator has, forbade
recommendations to the agents whose job is to recommend and trade, read as "no text answer for
this role" while each role must end with one; the Analyst's text priced a SELL as a short sale on
a long-only spot account; the Orchestrator was told two quote currencies; tool comments named
their defaults twice. These tests read the built prompt itself.
"""

from __future__ import annotations

import re

from app.agents.llm.port import ChatMessage
from app.agents.rule_engine.engine import decide
from app.agents.rule_engine.transcript import read_transcript
from app.agents.task_data import with_task_data
from app.agents.templates import AgentTemplate, validate_config
from app.domain.agents import AgentRole
from app.tools.protocol.render import el, render_success
from app.tools.registry import ToolRegistry
from tests.helpers.prompts import ORCHESTRATOR, TRADER, TREND, build

ROLES = (ORCHESTRATOR, TREND, "AnalystAgent_MeanReversion_v1", TRADER)
_TOOL_NAME = re.compile(r"`([a-z]+(?:_[a-z]+)+)`")


def _prompts(templates: dict[str, AgentTemplate], registry: ToolRegistry,
             **kwargs: object) -> dict[str, str]:
    return {tid: build(templates[tid], registry, **kwargs) for tid in ROLES}


def test_no_role_is_told_to_use_a_tool_it_does_not_have(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    for template_id, prompt in _prompts(templates, registry).items():
        section = prompt.split("**Available Tools:**", 1)[1].split("\n---\n", 1)[0]
        available = set(re.findall(r"^#### `([a-z_]+)`$", section, re.MULTILINE))
        named = {n for n in _TOOL_NAME.findall(prompt) if n in registry}
        assert named <= available, (template_id, sorted(named - available))
    prompts = _prompts(templates, registry)
    for template_id in (TREND, TRADER):
        assert "ask_user_clarification" not in prompts[template_id]
        assert "say in your final answer exactly what is missing" in prompts[template_id]
    assert "you **MUST** use the `ask_user_clarification` tool" in prompts[ORCHESTRATOR]


def test_analysts_and_traders_are_told_to_do_their_job_and_only_the_orchestrator_not_to_advise(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompts = _prompts(templates, registry)
    for prompt in prompts.values():
        assert "**MUST NOT** provide direct financial advice, investment recommendations" not in (
            prompt)
        assert "7.  **No Financial Advice:**" in prompt  # Part D's directive keeps its place
    for template_id in (TREND, TRADER):
        directive = _line(prompts[template_id], "7.  ")
        assert "is your job: do it plainly, without refusing" in directive
        assert "MUST NOT" not in directive
    assert "**MUST NOT** give the person financial advice or investment recommendations of " \
        "your own" in _line(prompts[ORCHESTRATOR], "7.  ")


def test_every_role_is_told_its_tasks_end_with_a_text_answer_and_what_it_holds(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompts = _prompts(templates, registry)
    for prompt in prompts.values():
        assert "AND your role involves direct textual communication" not in prompt
        assert "Every task ends with one, your final answer; your role says what it holds." in (
            prompt)
    assert "Your final answer: one line per symbol" in prompts[TREND]
    assert "`<analysis_log>`" in prompts[TREND] and "`<assessment>`" in prompts[TREND]
    trader = prompts[TRADER]
    assert "Your final answer: one line, what you decided" in trader
    assert all(f"`<{name}>`" in trader for name in ("trades", "performance_summary", "journal"))
    assert "your final text answer is what they read" in prompts[ORCHESTRATOR]
    assert "<analysis_log>" not in prompts[ORCHESTRATOR] + trader  # each role its own blocks


def test_a_sell_signal_is_an_exit_on_the_long_only_account_never_a_short_sale(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompts = _prompts(templates, registry)
    for template_id in (TREND, "AnalystAgent_MeanReversion_v1"):
        analyst = prompts[template_id]
        assert "for a SELL the stop is above the price" not in analyst
        assert "(BUY) or high (SELL)" not in analyst
        assert "SELL: exit; a Trader holding the symbol closes or reduces its position, a flat " \
            "Trader does nothing (there is no short selling)." in analyst
        assert "A SELL exits a long position: it needs no stop or target." in analyst
    assert "SELL means exit: close (or reduce) the long position you hold; while flat, do " \
        "nothing (you cannot sell short)." in prompts[TRADER]


def test_the_orchestrator_knows_one_quote_currency_the_account_s(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompt = build(templates[ORCHESTRATOR], registry, quote_currency="USD")
    assert "- Quote currency: USD (" in prompt
    context = prompt.split("**Runtime Context:**", 1)[1]
    assert "USDT" not in context and "default_quote" not in prompt
    assert "trades against the account's quote currency" in prompt


def test_a_coin_named_alone_is_watched_against_the_account_s_quote_currency(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    """The rule-engine Orchestrator reads the quote currency where a model does: the prompt."""
    listed = render_success("list_agent_instances", el("agent_instances", None, count=0)).xml
    task = with_task_data("watch BTC on 1h every 1h with a trend analyst",
                          f'<task_data market_time="2019-10-01T00:00:00Z">\n{listed}\n</task_data>')
    transcript = read_transcript([ChatMessage("user", task)])
    for quote in ("USD", "USDT"):
        system = build(templates[ORCHESTRATOR], registry, quote_currency=quote)
        answer = decide("rules-orchestrator-v1", "o-1", {"default_interval": "1h"}, transcript,
                        system=system)
        assert answer.call is not None and "<create_new_agent_instance>" in answer.call
        assert f'"symbols": ["BTC/{quote}"]' in answer.call


def test_an_orchestrator_created_with_the_retired_default_quote_setting_still_loads(
    templates: dict[str, AgentTemplate],
) -> None:
    stored = {"default_interval": "4h", "default_quote": "USDT"}
    assert validate_config(templates[ORCHESTRATOR], stored) == {"default_interval": "4h"}
    assert "default_quote" not in templates[ORCHESTRATOR].config


def test_each_tool_parameter_names_its_default_once(registry: ToolRegistry) -> None:
    section = registry.available_tools_section(frozenset(
        spec.permission for spec in registry if isinstance(spec.permission, str)))
    comments = re.findall(r"<(\w+)>[^\n]*?<!-- (.*?) -->", section)
    assert len(comments) > 50
    twice = [(param, text) for param, text in comments if text.lower().count("default") > 1]
    assert not twice
    assert "Optional. The order type. Default: MARKET." in section
    assert "Optional. How many trades. Default: 20. Range: 1 to 500." in section


def test_candle_times_are_given_in_iso_not_only_in_milliseconds(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompt = build(templates[TREND], registry)
    assert '<kline timestamp_ms="long" time_iso="iso8601"' in prompt
    assert "each candle's `time_iso`" in prompt
    assert templates[TREND].role is AgentRole.ANALYST


def _line(prompt: str, start: str) -> str:
    (line,) = [line for line in prompt.splitlines() if line.startswith(start)]
    return line
