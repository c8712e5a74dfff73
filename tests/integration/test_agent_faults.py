"""A run whose agents faulted says so first; the rule engine's answers are not "LLM calls".

An agent backtest against a model server that cannot be reached used to end as a normal report
with 0 trades, indistinguishable from a quiet market.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from app.agents.faults import what_to_do
from app.backtest.report import summary_table
from app.config import LLMSettings
from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest
from tests.helpers.paths import BTC_USDT_1H

TEMPLATES = ["AnalystAgent_Trend_v1", "TraderAgent_Default_v1"]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_agent_backtest_whose_model_server_is_unreachable_opens_its_report_with_the_fault(
    tmp_path: Path,
) -> None:
    options = AgentBacktestOptions(
        templates=TEMPLATES, warmup_bars=60, bars=12,
        llm=LLMSettings(provider="openai-compatible", model="gpt-test",
                        base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=0,
                        timeout_s=5),
    )
    outcome = asyncio.run(run_agent_backtest([BTC_USDT_1H], options, tmp_path))
    (fault,) = outcome.faults
    assert fault.role == "analyst" and "cannot reach the server at http://127.0.0.1" in (
        fault.reason)
    assert what_to_do(fault.reason).startswith("check that the model server is running")
    table = summary_table(outcome.result)
    assert table.startswith("WARNING: 1 agent(s) FAULTED during this run")
    assert f"{fault.name} (analyst) FAULTED: " in table.splitlines()[1]
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert next(iter(summary)) == "faults" and "cannot reach" in summary["faults"][0]
    assert "What to do: check that the model server is running" in summary["faults"][0]


def test_a_rule_engine_backtest_counts_decisions_not_llm_calls_and_has_no_faults(
    tmp_path: Path,
) -> None:
    options = AgentBacktestOptions(templates=TEMPLATES, warmup_bars=60, bars=12)
    outcome = asyncio.run(run_agent_backtest([BTC_USDT_1H], options, tmp_path))
    assert outcome.llm_calls == 0 and outcome.rule_decisions > 12
    assert outcome.faults == []
    stats = outcome.result.stats
    assert stats["llm_calls"] == 0 and stats["rule_engine_decisions"] == outcome.rule_decisions
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert "faults" not in summary
    assert not summary_table(outcome.result).startswith("WARNING")


def test_a_provider_that_cannot_be_built_faults_the_agent_with_the_reason_not_as_a_bug(
    tmp_path: Path,
) -> None:
    options = AgentBacktestOptions(  # OpenAI's own server, and no key anywhere
        templates=TEMPLATES, warmup_bars=60, bars=6,
        llm=LLMSettings(provider="openai-compatible", model="gpt-test"),
    )
    outcome = asyncio.run(run_agent_backtest([BTC_USDT_1H], options, tmp_path))
    (fault,) = outcome.faults
    assert fault.reason.startswith("the model provider could not be set up: openai-compatible: "
                                   "no API key for OpenAI")
    assert what_to_do(fault.reason).startswith("check the API key")
