"""Prices, estimates and budgets: Decimal money, unknown models unpriced, local servers free."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from app.agents.costs import (
    BudgetTracker,
    PriceFileError,
    PriceTable,
    estimate_backtest,
    is_local_url,
)
from app.agents.llm.port import LLMUsage
from app.resources import resource_path

MILLION = 1_000_000


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return PriceTable.load(None)


def test_bundled_table_prices_the_common_models(table: PriceTable) -> None:
    for model in ("gpt-4o", "gpt-4o-mini", "claude-sonnet-4-6", "claude-haiku-4-5",
                  "deepseek-chat"):
        assert table.price(model, LLMUsage(1000, 100)) > 0, model


def test_price_charges_cached_prompt_tokens_at_the_cached_rate(table: PriceTable) -> None:
    # gpt-4o: 2.50 input, 1.25 cached, 10.00 output per 1M tokens
    usage = LLMUsage(input_tokens=MILLION, output_tokens=MILLION, cached_input_tokens=MILLION // 2)
    assert table.price("gpt-4o", usage) == Decimal("1.25") + Decimal("0.625") + Decimal("10")


def test_price_is_exact_decimal_for_small_calls(table: PriceTable) -> None:
    assert table.price("gpt-4o-mini", LLMUsage(1, 1)) == Decimal("0.00000075")


def test_unknown_model_is_unpriced_not_free(table: PriceTable) -> None:
    assert table.price("my-finetune-7b", LLMUsage(1000, 1000)) is None


@pytest.mark.parametrize(
    ("model", "entry"),
    [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/gpt-4o-mini", "gpt-4o-mini"),
        ("claude-sonnet-4-6-20260101", "claude-sonnet-4-6"),
        ("claude-sonnet-5-5", "claude-sonnet"),
        ("GPT-4o", "gpt-4o"),
    ],
)
def test_dated_and_vendor_prefixed_names_find_their_entry(
    table: PriceTable, model: str, entry: str
) -> None:
    found = table.lookup(model)
    assert found is not None and found[0] == entry


def test_a_name_that_only_shares_letters_is_not_matched(table: PriceTable) -> None:
    assert table.lookup("gpt-4oz") is None


def test_rule_engine_replay_and_local_servers_cost_zero(table: PriceTable) -> None:
    usage = LLMUsage(10_000, 1_000)
    assert table.price("rules", usage, provider="rule-engine") == 0
    assert table.price("gpt-4o", usage, provider="replay") == 0
    assert table.price("llama3.1", usage, provider="openai-compatible",
                       base_url="http://127.0.0.1:11434/v1") == 0
    assert table.price("llama3.1", usage, provider="openai-compatible",
                       base_url="https://openrouter.ai/api/v1") is None


@pytest.mark.parametrize(
    ("url", "local"),
    [("http://localhost:1234/v1", True), ("http://127.0.0.1:8080", True),
     ("http://192.168.1.20:11434/v1", True), ("http://[::1]:8000/v1", True),
     ("https://api.openai.com/v1", False), ("https://api.deepseek.com", False), (None, False)],
)
def test_local_server_urls_are_recognised(url: str | None, local: bool) -> None:
    assert is_local_url(url) is local


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_workspace_file_edits_a_field_and_adds_a_model(tmp_path: Path) -> None:
    override = write(tmp_path / "prices.yaml", """
models:
  gpt-4o: {output: "12.00"}
  my-model: {input: 1, output: 2}
""")
    table = PriceTable.load(override)
    gpt4o = table.models["gpt-4o"]
    assert (gpt4o.input, gpt4o.output) == (Decimal("2.50"), Decimal("12.00"))
    mine = table.models["my-model"]
    assert (mine.input, mine.cached_input, mine.output) == (Decimal(1), Decimal(1), Decimal(2))
    assert table.sources[-1] == str(override)


def test_missing_workspace_file_leaves_the_bundled_table(tmp_path: Path) -> None:
    assert PriceTable.load(tmp_path / "prices.yaml").models == PriceTable.load(None).models


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models:\n  m1: {input: 1, outptu: 2}\n", r"model 'm1': unknown field\(s\) \['outptu'\]"),
        ("models:\n  m1: {input: 1}\n", r"model 'm1': field 'output' is missing"),
        ("models:\n  m1: {input: -1, output: 2}\n", r"model 'm1': field 'input' must be zero"),
        ("models:\n  m1: {input: cheap, output: 2}\n", r"model 'm1': field 'input' must be a "),
        ("models:\n  m1: 3\n", r"model 'm1': expected a mapping"),
        ("modles: {}\n", r"unknown top-level key"),
        ("models: [\n", r"not valid YAML"),
        ("currency: EUR\nmodels: {}\n", r"field 'currency' must be USD"),
    ],
)
def test_invalid_price_file_names_the_file_model_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path / "prices.yaml", text)
    with pytest.raises(PriceFileError, match=message) as info:
        PriceTable.load(path)
    assert str(path) in str(info.value)


def test_bundled_file_is_found_through_the_resources_helper() -> None:
    assert resource_path("prices.yaml").is_file()


def test_estimate_multiplies_bars_calls_and_tokens(table: PriceTable) -> None:
    est = estimate_backtest(bars=1000, calls_per_bar=0.25, input_tokens_per_call=4000,
                            output_tokens_per_call=200, model="gpt-4o-mini", prices=table)
    assert (est.calls, est.input_tokens, est.output_tokens) == (250, 1_000_000, 50_000)
    assert est.usd == Decimal("0.15") + Decimal("0.03")
    assert "250 model calls" in est.describe() and "$0.18" in est.describe()


def test_estimate_for_an_unpriced_model_says_the_cost_is_unknown(table: PriceTable) -> None:
    est = estimate_backtest(10, 1, 100, 10, "mystery", table, provider="openai-compatible")
    assert est.usd is None
    assert "cost unknown" in est.describe()


def test_estimate_for_the_rule_engine_is_free(table: PriceTable) -> None:
    est = estimate_backtest(10, 1, 100, 10, "rules", table, provider="rule-engine")
    assert est.usd == 0


def test_estimate_rejects_negative_inputs(table: PriceTable) -> None:
    with pytest.raises(ValueError, match="zero or more"):
        estimate_backtest(-1, 1, 100, 10, "gpt-4o", table)


def test_budget_is_exhausted_once_spending_reaches_the_limit() -> None:
    budget = BudgetTracker(Decimal("1.00"))
    budget.add(Decimal("0.60"))
    assert budget.remaining == Decimal("0.40") and not budget.exhausted
    assert budget.would_exceed(Decimal("0.41"))
    budget.add(Decimal("0.40"))
    assert budget.exhausted and budget.remaining == 0
    budget.add(Decimal("0.10"))
    assert budget.remaining == 0 and budget.spent == Decimal("1.10")


def test_budget_without_limit_is_never_exhausted() -> None:
    budget = BudgetTracker(None)
    budget.add(Decimal("1000"))
    assert budget.remaining is None and not budget.exhausted
    assert not budget.would_exceed(Decimal("1e9"))


def test_budget_rejects_negative_costs_and_limits() -> None:
    with pytest.raises(ValueError, match="negative"):
        BudgetTracker(Decimal("-1"))
    with pytest.raises(ValueError, match="negative"):
        BudgetTracker(Decimal(1)).add(Decimal("-0.01"))
