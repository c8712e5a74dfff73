"""System prompts: each agent sees only the tools it may call, every placeholder is filled (or the
build fails), the prefix is byte-identical across builds so provider prompt caches hit, and the
token estimate is conservative. (Part D verbatim: test_prompt_part_d.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.agents.prompt import (
    ALL_SYMBOLS,
    PLACEHOLDER,
    ROLE_FILES,
    estimate_tokens,
)
from app.agents.templates import AgentTemplate, permissions_of
from app.domain.errors import OperationalError
from app.resources import resource_path
from app.tools.registry import ToolRegistry
from app.tools.spec import Permission
from tests.helpers.prompts import AGENT_ID, ORCHESTRATOR, TRADER, TREND, build


def tool_headings(prompt: str) -> set[str]:
    return set(re.findall(r"^#### `([a-z_]+)`$", prompt, re.MULTILINE))


def test_the_analyst_prompt_reads_naturally_with_its_config(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompt = build(templates[TREND], registry, {"symbols": ["BTC/USDT", "ETH/USDT"],
                                                 "interval": "4h"})
    assert ("Market Analyst Agent for the Trend Following strategy, focusing on BTC/USDT, "
            "ETH/USDT using the 4h timeframe") in prompt
    assert "NEW_MARKET_ANALYSIS_SIGNAL" in prompt and "trader_agent_id" in prompt
    assert "analysis_log.md" in prompt and "current_market_assessment.yaml" in prompt
    assert "EMA(trend_ema_period)" in prompt  # the strategy's own rules


def test_without_symbols_the_roles_speak_of_all_configured_symbols(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    analyst = build(templates[TREND], registry)
    assert f"focusing on {ALL_SYMBOLS} using the 1h timeframe" in analyst
    trader = build(templates[TRADER], registry)
    assert f"**Trader Agent for {ALL_SYMBOLS}**" in trader
    assert "(e.g., the signal's symbol)" in trader


def test_the_trader_prompt_explains_signals_fills_and_its_memory_layout(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompt = build(templates[TRADER], registry, {"symbols": ["ETH/USDT"]})
    assert "(e.g., ETH/USDT)" in prompt
    for needle in ("ORDER_FILLED", "exit_kind", "NEW_MARKET_ANALYSIS_SIGNAL",
                   "symbols/BTCUSDT/trades.yaml", "performance_summary.yaml",
                   "risk_per_trade_pct", "take_profit_r", "<status>rejected</status>"):
        assert needle in prompt, needle


def test_the_orchestrator_sees_the_templates_it_can_create_with_their_fields(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompt = build(templates[ORCHESTRATOR], registry)
    catalogue = prompt.split("Agent templates you can create", 1)[1].split(
        "**Runtime Context:**", 1)[0]
    for template_id in (TREND, "AnalystAgent_MeanReversion_v1", TRADER):
        assert f"`{template_id}`" in catalogue
    assert f"`{ORCHESTRATOR}`" not in catalogue
    assert "rsi_period=14 (2..100)" in catalogue and "interval=1h (1m|5m|" in catalogue
    assert "trader_agent_id (string, optional)" in catalogue
    only_trader = build(templates[ORCHESTRATOR], registry, templates={TRADER: templates[TRADER]})
    assert f"`{TREND}`" not in only_trader and f"`{TRADER}`" in only_trader


def test_the_runtime_context_names_the_agent_mode_and_currency_but_no_time(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    prompt = build(templates[TRADER], registry, {"risk_per_trade_pct": "0.5"}, mode="backtest",
                   quote_currency="USDC", agent_name="Backtest trader")
    context = prompt.split("**Runtime Context:**", 1)[1]
    assert f"`{AGENT_ID}`" in context and "Backtest trader" in context
    assert "**BACKTEST**" in context and "USDC" in context
    assert "risk_per_trade_pct: 0.5" in context
    assert "market_time" in context
    assert not re.search(r"20\d\d-\d\d-\d\d", context), "no date may enter the static prefix"


# -- only the permitted tools -----------------------------------------------------------------


def test_each_agent_sees_exactly_the_tools_its_permissions_allow(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    for template in templates.values():
        expected = {spec.name for spec in registry.permitted(permissions_of(template))}
        assert tool_headings(build(template, registry)) == expected, template.template_id


def test_an_analyst_cannot_see_order_tools_and_a_trader_cannot_create_agents(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    analyst = tool_headings(build(templates[TREND], registry))
    trader = tool_headings(build(templates[TRADER], registry))
    orchestrator = tool_headings(build(templates[ORCHESTRATOR], registry))
    assert "create_order" not in analyst and "set_position_tp_sl_orders" not in analyst
    assert "dispatch_task_to_agent" in analyst and "calculate_technical_indicator" in analyst
    assert "create_new_agent_instance" not in trader and "schedule_background_job" not in trader
    assert {"create_order", "set_position_tp_sl_orders", "get_account_balance"} <= trader
    assert {"create_new_agent_instance", "schedule_background_job",
            "ask_user_clarification"} <= orchestrator
    assert "create_order" not in orchestrator


def test_every_tool_a_role_text_names_is_among_that_roles_tools(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    names = registry.names()
    assert "create_new_agent_instance" in names  # the orchestration tools are registered
    for template in templates.values():
        text = resource_path("prompts", ROLE_FILES[template.role]).read_text()
        text += template.instructions
        mentioned = set(re.findall(r"`([a-z_]+)`", text)) & names
        permitted = {spec.name for spec in registry.permitted(permissions_of(template))}
        assert mentioned, template.template_id
        assert mentioned <= permitted, (template.template_id, mentioned - permitted)


# -- placeholders and cache-friendliness ------------------------------------------------------


def test_no_placeholder_survives_in_any_prompt(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    tool_text = registry.available_tools_section(frozenset(Permission))
    allowed = set(PLACEHOLDER.findall(tool_text))  # e.g. write_note's notes/{key}.md
    for template in templates.values():
        left = set(PLACEHOLDER.findall(build(template, registry))) - allowed
        assert not left, (template.template_id, left)


def test_two_builds_of_the_same_agent_are_byte_identical(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    for template in templates.values():
        first = build(template, registry, mode="PAPER")
        second = build(template, registry, mode="PAPER")
        assert first.encode() == second.encode()
        other_agent = build(template, registry, agent_id="another-agent")
        # everything before the world context is shared by every agent of the template
        prefix = first.split("**Runtime Context:**")[0]
        assert other_agent.startswith(prefix)


def test_a_placeholder_without_a_value_stops_the_build_naming_it(
    templates: dict[str, AgentTemplate], registry: ToolRegistry, tmp_path: Path
) -> None:
    source = resource_path("prompts")
    for name in ("system_template.md", "runtime_context.md", *ROLE_FILES.values()):
        (tmp_path / name).write_text((source / name).read_text())
    trader_text = (tmp_path / "role_trader.md").read_text()
    (tmp_path / "role_trader.md").write_text(trader_text + "\nWatch the {timeframe} chart.\n")
    with pytest.raises(OperationalError) as caught:
        build(templates[TRADER], registry, prompts_dir=tmp_path)
    assert "role_trader.md" in str(caught.value) and "{timeframe}" in str(caught.value)


def test_a_value_smuggling_a_placeholder_back_in_is_refused(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    with pytest.raises(OperationalError, match=r"unfilled \{symbol\}"):
        build(templates[TRADER], registry, agent_name="Trader for {symbol}")


def test_an_unknown_mode_is_refused(
    templates: dict[str, AgentTemplate], registry: ToolRegistry
) -> None:
    with pytest.raises(ValueError, match="DEMO"):
        build(templates[TRADER], registry, mode="demo")


# -- token estimate ---------------------------------------------------------------------------

# true cl100k_base counts, measured once with the real vocabulary (see estimate_tokens)
CL100K = {
    "You are a sophisticated AI assistant integrated within an advanced financial trading agent "
    "system. Your primary function is to understand user requests, analyze market data, and "
    "execute actions by calling a predefined set of tools.": 39,
    "<get_historical_klines>\n    <symbol>BTC/USDT</symbol>\n    <interval>1h</interval>\n"
    "    <limit>200</limit>\n</get_historical_klines>": 42,
    '{"symbol": "BTC/USDT", "side": "BUY", "confidence": 0.72, "price": "43000.5", '
    '"stop_loss": "42100", "take_profit": "44800"}': 48,
    "系统提示词模板为所有智能体提供基础指令，角色职责在运行时动态注入。": 35,
    "def permissions_of(template: AgentTemplate) -> frozenset[str]:\n"
    "    return frozenset(p.value for p in template.permissions)\n": 27,
}


@pytest.mark.parametrize("text", list(CL100K), ids=["english", "xml", "json", "chinese", "python"])
def test_the_token_estimate_never_undercounts_and_stays_close(text: str) -> None:
    true_count = CL100K[text]
    assert true_count <= estimate_tokens(text) <= true_count * 1.3


def test_the_token_estimate_of_nothing_is_zero_and_grows_with_text() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("word") == 1
    sentence = next(iter(CL100K))
    assert estimate_tokens(sentence * 3) >= 3 * estimate_tokens(sentence) - 3
