"""A language model run over a period before its training cutoff is flagged; after it, not."""

from __future__ import annotations

from datetime import date

import pytest

from app.agents.cutoffs import (
    checked_names,
    cutoff_for,
    load_cutoffs,
    memory_warning,
    period_warning,
    period_warnings,
)
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


@pytest.mark.parametrize(("model", "day"), [
    ("llama3.3:70b", date(2023, 12, 31)), ("meta-llama/Llama-3.3-70B-Instruct", date(2023, 12, 31)),
    ("llama3:70b", date(2023, 12, 31)), ("llama3:8b", date(2023, 3, 31)),
    ("meta-llama/Meta-Llama-3-70B-Instruct", date(2023, 12, 31)),
    ("llama4:scout", date(2024, 8, 31)), ("llama2:13b", date(2022, 9, 30)),
    ("gemma3:12b", date(2024, 8, 31)), ("google/gemma-3n-E4B-it", date(2024, 6, 30)),
    ("phi3:mini", date(2023, 10, 31)), ("microsoft/Phi-3.5-mini-instruct", date(2023, 10, 31)),
    ("phi4:14b", date(2024, 6, 30)),
])
def test_open_weight_models_people_run_locally_have_their_published_cutoffs(
    model: str, day: date
) -> None:
    found = cutoff_for(model)
    assert found is not None and found.cutoff == day and "model card" in found.source


CANNOT_CITE = "give no training cutoff this table could cite"


@pytest.mark.parametrize(("model", "why"), [
    ("qwen2.5:7b", f"Alibaba's Qwen model cards and technical reports {CANNOT_CITE}"),
    ("Qwen/Qwen3-8B", f"Alibaba's Qwen model cards and technical reports {CANNOT_CITE}"),
    ("deepseek-r1:8b", f"DeepSeek's model cards and technical reports {CANNOT_CITE}"),
    ("mistral:7b", f"Mistral AI's model cards {CANNOT_CITE}"),
    ("mixtral:8x7b", f"Mistral AI's model cards {CANNOT_CITE}"),
    ("gemma2:9b", f"Google's model cards for Gemma and Gemma 2 {CANNOT_CITE}"),
    ("phi4-mini", "The table has no Microsoft model card date for Phi-4-mini"),
    ("house-model-7", ""),  # a name the table does not know at all
])
def test_an_open_weight_model_without_a_published_cutoff_gets_the_honest_unknown_note(
    model: str, why: str
) -> None:
    start = parse_time("2017-07-03T00:00:00Z")
    assert cutoff_for(model) is None  # nothing is flagged as known...
    warned = period_warning(model, start, can_run_blind=False)
    assert warned is not None
    note, flagged = warned
    assert not flagged  # ...and nothing is said to be safe: the note says what is not known
    assert note.startswith(f"Kestrel does not know {model}'s training cutoff: if its training "
                           "data reaches past 2017-07-03, it may remember")
    assert (f" {why[0].upper()}{why[1:]}." in note) if why else ("cite" not in note)
    assert '[llm] training_cutoff = "YYYY-MM-DD"' in note
    assert "--blind" not in note  # the desk's and the terminal's replay cannot run blind


def test_a_model_is_checked_under_the_names_the_server_answered_with() -> None:
    start = parse_time("2019-10-04T19:00:00Z")
    # an alias the table does not know, served by a dated model it does know
    assert checked_names("house-default", ["gpt-4o-mini-2024-07-18"]) == [
        "gpt-4o-mini-2024-07-18"]
    (flag,) = period_warnings("house-default", ["gpt-4o-mini-2024-07-18"], start)
    assert flag[1] and "before gpt-4o-mini-2024-07-18's training cutoff (2023-10-31" in flag[0]
    # a server that answers with a name that tells nothing: the name asked for is checked
    assert checked_names("llama3.1:8b", ["default"]) == ["llama3.1:8b"]
    agent = _agent("openai-compatible", "house-default")
    flags, notes = memory_warnings([agent], start, answered={"a1": {"gpt-4o-mini-2024-07-18"}})
    assert len(flags) == 1 and "gpt-4o-mini-2024-07-18" in flags[0] and notes == ()
