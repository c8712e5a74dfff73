"""Agent templates: the bundled ones load with the permissions the roles promise; a broken template
file is refused naming the file, the field and the reason; agent configs are validated against a
template's schema with errors naming the field."""

from __future__ import annotations

import copy
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.agents.template_files import load_template, load_templates
from app.agents.templates import AgentTemplate, permissions_of, to_json_safe, validate_config
from app.domain.agents import AgentRole
from app.domain.errors import InvalidParameterError, OperationalError
from app.resources import resource_path

TREND = "AnalystAgent_Trend_v1"
TRADER = "TraderAgent_Default_v1"
ORCHESTRATOR = "SystemOrchestrator_v1"
BUNDLED = {ORCHESTRATOR, TREND, "AnalystAgent_MeanReversion_v1", TRADER}


def bundled_data(template_id: str = TREND) -> dict[str, Any]:
    return yaml.safe_load(resource_path("agents", f"{template_id}.yaml").read_text())


def write(folder: Path, data: Any, name: str = TREND) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


# -- the bundled templates -------------------------------------------------------------------


def test_the_four_bundled_templates_load_with_their_roles(
    templates: dict[str, AgentTemplate],
) -> None:
    assert set(templates) == BUNDLED
    roles = {t.template_id: t.role for t in templates.values()}
    assert roles[ORCHESTRATOR] is AgentRole.ORCHESTRATOR
    assert roles[TRADER] is AgentRole.TRADER
    assert roles[TREND] is AgentRole.ANALYST
    for template in templates.values():
        assert template.provider.kind == "rule-engine"
        assert template.provider.model.startswith("rules-")
        assert template.provider.api_key_name is None


def test_analysts_cannot_trade_and_only_the_orchestrator_manages_agents(
    templates: dict[str, AgentTemplate],
) -> None:
    for template in templates.values():
        granted = permissions_of(template)
        if template.role is AgentRole.ANALYST:
            assert granted == {"market", "indicator", "memory", "tasks", "notify"}
        if template.role is AgentRole.TRADER:  # it decides on signals; it neither analyses
            assert granted == {"market", "account", "trade", "memory", "notify"}  # nor delegates
        if template.role is not AgentRole.ORCHESTRATOR:
            assert not granted & {"agents", "jobs", "ask_user"}
    assert {"agents", "jobs", "ask_user"} <= permissions_of(templates[ORCHESTRATOR])


def test_every_bundled_config_field_describes_itself_for_the_create_agent_form(
    templates: dict[str, AgentTemplate],
) -> None:
    for template in templates.values():
        assert template.config, template.template_id
        for name, field in template.config.items():
            assert field.label and len(field.description) > 20, (template.template_id, name)
            validate_config(template, {})  # every default is valid by construction


def test_a_workspace_folder_adds_its_own_templates(tmp_path: Path) -> None:
    data = bundled_data(TREND)
    data["template_id"] = "MyAnalyst_v1"
    data["display_name"] = "My analyst"
    write(tmp_path, data, "MyAnalyst_v1")
    loaded = load_templates(extra_folders=[tmp_path, tmp_path / "missing"])
    assert set(loaded) == BUNDLED | {"MyAnalyst_v1"}
    assert loaded["MyAnalyst_v1"].display_name == "My analyst"


def test_a_template_id_defined_twice_names_both_files(tmp_path: Path) -> None:
    write(tmp_path, bundled_data(TREND))
    with pytest.raises(OperationalError) as caught:
        load_templates(extra_folders=[tmp_path])
    message = str(caught.value)
    assert "defined twice" in message
    assert str(resource_path("agents", f"{TREND}.yaml")) in message
    assert str(tmp_path / f"{TREND}.yaml") in message


def test_a_missing_templates_folder_is_an_operational_error(tmp_path: Path) -> None:
    with pytest.raises(OperationalError, match="does not exist"):
        load_templates(tmp_path / "nowhere")


# -- broken template files --------------------------------------------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value

    return change


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        del node[last]

    return change


BROKEN: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("unknown top-level key", _set("permisions", ["market"]), "permisions", "unknown key"),
    ("unknown nested key", _set("limits.max_step", 3), "limits.max_step", "unknown key"),
    ("unknown config field key", _set("config.rsi_period.step", 1), "config.rsi_period.step",
     "unknown key"),
    ("max_steps not a number", _set("limits.max_steps", "many"), "limits.max_steps",
     "valid integer"),
    ("max_steps as text", _set("limits.max_steps", "20"), "limits.max_steps", "valid integer"),
    ("budget as a float", _set("limits.budget_usd", 5.5), "limits.budget_usd",
     "quoted decimal string"),
    ("role unknown", _set("role", "banker"), "role", "'orchestrator', 'analyst' or 'trader'"),
    ("permission that does not exist", _set("permissions", ["market", "teleport"]),
     "permissions[1]", "'market'"),
    ("analyst granted trading", _set("permissions", ["market", "trade"]), "permissions",
     "may not be granted trade"),
    ("permission listed twice", _set("permissions", ["market", "market"]), "permissions",
     "twice"),
    ("default above its maximum", _set("config.rsi_period.default", 500),
     "config.rsi_period", "must be between 2 and 100, got 500"),
    ("default of the wrong type", _set("config.rsi_period.default", "fourteen"),
     "config.rsi_period", "whole number"),
    ("choice default not a choice", _set("config.interval.default", "2h"),
     "config.interval", "must be one of"),
    ("choice without choices", _delete("config.interval.choices"), "config.interval",
     "non-empty 'choices'"),
    ("minimum above maximum", _set("config.rsi_period.minimum", 200), "config.rsi_period",
     "minimum 200 is above maximum 100"),
    ("field type unknown", _set("config.rsi_period.type", "float"), "config.rsi_period.type",
     "'string'"),
    ("provider kind unknown", _set("provider.kind", "gpt"), "provider.kind",
     "'rule-engine'"),
    ("an API key instead of its keyring name", _set("provider.api_key_name", "sk-abc123"),
     "provider.api_key_name", "keyring"),
    ("missing provider", _delete("provider"), "provider", "Field required"),
    ("analyst without a strategy", _delete("strategy_name"), "strategy_name",
     "needs a strategy_name"),
    ("analyst without an interval field", _delete("config.interval"), "config",
     "needs a config field 'interval'"),
    ("constraint broken by defaults", _set("config.macd_fast.default", 30), "constraints",
     "break the constraint"),
    ("placeholder in text", _set("display_name", "Analyst for {symbol}"), "display_name",
     "placeholder"),
    ("task data an analyst may not fetch", _set("task_data.account", True), "task_data",
     "'account' needs the account permission"),
    ("task data indicator naming no config field",
     _set("task_data.indicators", [{"name": "RSI", "params": {"length": "rsi_len"}}]),
     "task_data", "names 'rsi_len', which is not a numeric config field"),
    ("task data note with another placeholder", _set("task_data.notes", ["{symbol}.md"]),
     "task_data.notes", "the only placeholder it may hold is {symbol_key}"),
    ("task data for no task type", _set("task_data.task_types", []), "task_data.task_types",
     "at least 1 item"),
    ("task data key misspelt", _set("task_data.snapshots", True), "task_data.snapshots",
     "unknown key"),
    ("context budget too small", _set("limits.context_tokens", 100), "limits.context_tokens",
     "greater than or equal to 4000"),
]


@pytest.mark.parametrize(("change", "field", "reason"), [b[1:] for b in BROKEN],
                         ids=[b[0] for b in BROKEN])
def test_a_broken_template_is_refused_naming_file_field_and_reason(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], field: str, reason: str
) -> None:
    data = copy.deepcopy(bundled_data(TREND))
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(OperationalError) as caught:
        load_template(path)
    message = str(caught.value)
    assert str(path) in message
    assert f"field '{field}'" in message
    assert reason in message


def test_yaml_that_does_not_parse_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "template_id: X\nrole: [analyst\nprovider: {}\n")
    with pytest.raises(OperationalError) as caught:
        load_template(path)
    message = str(caught.value)
    assert str(path) in message and "not valid YAML at line" in message


def test_a_file_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "- just\n- a list\n")
    with pytest.raises(OperationalError, match="mapping of template keys"):
        load_template(path)


def test_the_template_id_must_match_its_file_name(tmp_path: Path) -> None:
    path = write(tmp_path, bundled_data(TREND), "SomethingElse")
    with pytest.raises(OperationalError, match="field 'template_id'.*must match the file name"):
        load_template(path)


# -- agent configuration ----------------------------------------------------------------------


def test_config_defaults_are_filled_and_values_coerced(
    templates: dict[str, AgentTemplate],
) -> None:
    values = validate_config(templates[TREND], {
        "symbols": "btc/usdt, ETH/USDT, btc/usdt", "interval": "1H", "rsi_period": "21",
        "min_confidence": 0.7, "trader_agent_id": " abc ",
    })
    assert values["symbols"] == ["BTC/USDT", "ETH/USDT"]
    assert values["interval"] == "1h"
    assert values["rsi_period"] == 21
    assert values["min_confidence"] == Decimal("0.7")
    assert values["trader_agent_id"] == "abc"
    assert values["macd_slow"] == 26 and values["bb_std"] == Decimal("2")


def test_a_stored_config_validates_again_to_the_same_values(
    templates: dict[str, AgentTemplate],
) -> None:
    template = templates[TRADER]
    values = validate_config(template, {"symbols": ["BTC/USDT"], "risk_per_trade_pct": "0.50"})
    stored = to_json_safe(values)
    assert stored["risk_per_trade_pct"] == "0.5" and stored["max_position_pct"] == "20"
    assert yaml.safe_load(yaml.safe_dump(stored)) == stored  # plain JSON/YAML types only
    assert validate_config(template, stored) == values


BAD_CONFIGS: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown field", {"rsi_perod": 14}, "rsi_perod", "its fields are: symbols, interval"),
    ("integer as a fraction", {"rsi_period": 14.5}, "rsi_period", "whole number"),
    ("boolean for a number", {"rsi_period": True}, "rsi_period", "whole number"),
    ("below minimum", {"rsi_period": 1}, "rsi_period", "between 2 and 100, got 1"),
    ("decimal as words", {"bb_std": "two"}, "bb_std", "decimal number"),
    ("decimal not finite", {"min_confidence": "NaN"}, "min_confidence", "written plainly"),
    ("above maximum", {"min_confidence": "1.5"}, "min_confidence", "between 0 and 1, got 1.5"),
    ("choice not offered", {"interval": "2h"}, "interval", "must be one of 1m, 5m"),
    ("symbols not a list", {"symbols": 42}, "symbols", "list of symbols"),
    ("symbol malformed", {"symbols": ["BTC USDT!"]}, "symbols", "not a symbol"),
    ("too many symbols", {"symbols": [f"C{i}/USDT" for i in range(21)]}, "symbols",
     "at most 20 symbols"),
    ("text not text", {"trader_agent_id": 7}, "trader_agent_id", "must be text"),
    ("text too long", {"trader_agent_id": "x" * 101}, "trader_agent_id",
     "at most 100 characters"),
    ("null for a required value", {"rsi_period": None}, "rsi_period", "null is not allowed"),
    ("constraint broken", {"macd_fast": 30, "macd_slow": 20}, "macd_fast",
     "must satisfy macd_fast < macd_slow"),
]


@pytest.mark.parametrize(("raw", "field", "reason"), [b[1:] for b in BAD_CONFIGS],
                         ids=[b[0] for b in BAD_CONFIGS])
def test_an_invalid_config_names_the_field_and_why(
    templates: dict[str, AgentTemplate], raw: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        validate_config(templates[TREND], raw)
    assert caught.value.details["field"] == field
    assert caught.value.details["parameter"] == "initial_config_json"
    assert repr(field) in str(caught.value) or field in str(caught.value)
    assert reason in str(caught.value)


def test_a_config_that_is_not_an_object_is_refused(
    templates: dict[str, AgentTemplate],
) -> None:
    with pytest.raises(InvalidParameterError, match="must be a JSON object"):
        validate_config(templates[TREND], ["symbols"])  # type: ignore[arg-type]


def test_an_optional_field_may_stay_unset_and_booleans_accept_words(tmp_path: Path) -> None:
    data = bundled_data(TRADER)
    data["config"]["paper_only"] = {
        "type": "boolean", "default": True, "description": "Refuse live orders.",
    }
    template = load_template(write(tmp_path, data, TRADER))
    assert validate_config(template, {"paper_only": "no"})["paper_only"] is False
    assert validate_config(template, {})["paper_only"] is True
    with pytest.raises(InvalidParameterError, match="true or false"):
        validate_config(template, {"paper_only": "maybe"})
    assert validate_config(load_templates()[TREND], {})["trader_agent_id"] is None
