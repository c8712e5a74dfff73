"""A language model run over a period before its training cutoff is flagged; after it, not."""

from __future__ import annotations

from datetime import date

import pytest

from app.agents.cutoffs import cutoff_for, load_cutoffs, memory_warning
from app.agents.template_files import load_templates
from app.config import LLMSettings
from app.domain.agents import AgentInfo, AgentRole, AgentState
from app.domain.clock import parse_time
from app.domain.errors import OperationalError
from app.runtime.agent_backtest import RULE_ENGINE_BASELINE, memory_warnings
from app.runtime.providers import choose_provider


def _agent(provider: str, model: str) -> AgentInfo:
    return AgentInfo(agent_id="a1", name="Analyst", template="AnalystAgent_Trend_v1",
                     role=AgentRole.ANALYST, state=AgentState.RUNNING, config={},
                     provider=provider, model=model, created_ms=0, updated_ms=0)


def test_the_bundled_table_names_a_source_for_every_cutoff() -> None:
    rules = load_cutoffs()
    assert len(rules) >= 10 and all(rule.source for rule in rules)


@pytest.mark.parametrize(("model", "day"), [
    ("gpt-4o", date(2023, 10, 31)), ("openai/gpt-4o-mini", date(2023, 10, 31)),
    ("llama3.1:8b", date(2023, 12, 31)), ("claude-3-5-sonnet-20241022", date(2024, 4, 30)),
])
def test_a_known_model_is_found_by_its_pattern(model: str, day: date) -> None:
    found = cutoff_for(model)
    assert found is not None and found.cutoff == day


def test_an_unknown_model_has_no_cutoff_and_no_flag() -> None:
    assert cutoff_for("house-model-7") is None
    assert memory_warning(None, 0) is None


def test_a_run_on_a_model_of_unknown_cutoff_says_so_and_how_to_set_it() -> None:
    start = parse_time("2019-10-04T19:00:00Z")
    flags, notes = memory_warnings([_agent("openai-compatible", "qwen2.5:7b")], start)
    assert flags == ()
    (note,) = notes
    assert note.startswith("Kestrel does not know qwen2.5:7b's training cutoff: if its "
                           "training data reaches past 2019-10-04")
    assert '[llm] training_cutoff = "YYYY-MM-DD"' in note and "--blind" in note
    # the setting names the cutoff: then it is known, and a later one raises no note at all
    assert memory_warnings([_agent("openai-compatible", "qwen2.5:7b")], start,
                           "2019-01-01") == ((), ())


def test_the_setting_overrides_the_table() -> None:
    found = cutoff_for("gpt-4o", override="2019-01-01")
    assert found is not None and found.cutoff == date(2019, 1, 1)
    assert "settings" in found.source
    with pytest.raises(OperationalError):
        cutoff_for("gpt-4o", override="2019-13-01")


def test_a_period_before_the_cutoff_is_flagged_and_one_after_is_not() -> None:
    cutoff = cutoff_for("gpt-4o")
    before = memory_warning(cutoff, parse_time("2023-10-31T23:00:00Z"))
    assert before is not None and "gpt-4o" in before and "2023-10-31" in before
    assert memory_warning(cutoff, parse_time("2023-11-01T00:00:00Z")) is None


def test_an_agent_backtest_flags_only_its_language_models() -> None:
    start = parse_time("2019-10-04T19:00:00Z")
    assert memory_warnings([_agent("rule-engine", "rules-analyst-trend-v1")], start) == ((), ())
    flags, notes = memory_warnings([_agent("openai-compatible", "gpt-4o")], start)
    assert len(flags) == 1 and "training cutoff" in flags[0] and notes == ()
    assert memory_warnings([_agent("openai-compatible", "gpt-4o")], start, "2019-01-01") == (
        (), ())


def test_the_rule_engine_baseline_runs_each_template_on_its_rule_policy() -> None:
    templates = load_templates()
    for template in templates.values():
        choice = choose_provider(template, RULE_ENGINE_BASELINE)
        assert choice.kind == "rule-engine" and choice.model.startswith("rules-")
    analyst = templates["AnalystAgent_Trend_v1"]
    assert choose_provider(analyst, LLMSettings(provider="rule-engine", model="gpt-4o")).model \
        == analyst.provider.model
