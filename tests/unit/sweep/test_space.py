"""``--grid`` into cells: the syntax, the names a sweep takes (strategy parameters, template
settings, data, symbols, windows, models), combinations the strategy refuses, random samples,
and the identity a resumed sweep is checked against."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from app.cli.backtest import STRATEGIES
from app.domain.clock import parse_time
from app.sweep.space import (
    STRATEGY_TYPES,
    SweepInputError,
    SweepRequest,
    parse_spec,
    plan_sweep,
)
from tests.helpers.paths import BTC_USD_1H, BTC_USDT_1H

TREND, TRADER = "AnalystAgent_Trend_v1", "TraderAgent_Default_v1"
MEAN = "AnalystAgent_MeanReversion_v1"


def plan(*grid: str, **options: object):  # noqa: ANN201 - a SweepPlan
    options.setdefault("data", [BTC_USDT_1H])
    return plan_sweep(SweepRequest(grid=list(grid), **options))  # type: ignore[arg-type]


def test_the_sweep_knows_every_strategy_kestrel_backtest_runs() -> None:
    assert set(STRATEGY_TYPES) == set(STRATEGIES)


@pytest.mark.parametrize(("text", "says"), [
    ("fast", "write NAME=VALUE"),
    ("=5,10", "write NAME=VALUE"),
    ("fast=", "an empty value"),
    ("fast=5,,10", "an empty value"),
    ("fast=5,10,", "an empty value"),
    ("fast=5,5", "5 is given twice"),
    ("2fast=5", "is not a parameter name"),
    ("fast slow=5", "is not a parameter name"),
])
def test_bad_grid_syntax_is_one_clear_sentence(text: str, says: str) -> None:
    with pytest.raises(SweepInputError, match=says):
        parse_spec(text)


def test_a_grid_makes_every_combination_in_grid_order() -> None:
    swept = plan("fast=5,10,20", "slow=30,50")
    assert swept.columns == ["fast", "slow"]
    assert [c.labels for c in swept.cells] == [
        {"fast": f, "slow": s} for f in ("5", "10", "20") for s in ("30", "50")]
    assert [c.task.cell_id for c in swept.cells] == [f"c000{i}" for i in range(1, 7)]
    assert swept.cells[0].task.parameters == {"fast": 5, "slow": 30}
    assert swept.cells[0].values == {"fast": 5, "slow": 30}


def test_numbers_take_ranges_with_both_ends_included() -> None:
    swept = plan("fast=5:20:5,3", "slow=40")
    assert [c.labels["fast"] for c in swept.cells] == ["5", "10", "15", "20", "3"]
    with pytest.raises(SweepInputError, match="the range '20:5' is empty"):
        plan("fast=20:5")
    with pytest.raises(SweepInputError, match="'a:b' is not a number"):
        plan("fast=a:b")
    with pytest.raises(SweepInputError, match="5 is given twice"):
        plan("fast=2:6,5")


def test_combinations_the_strategy_refuses_are_skipped_with_its_reason() -> None:
    swept = plan("fast=10,20,40", "slow=30")
    assert [c.labels["fast"] for c in swept.cells] == ["10", "20"]
    assert [s.labels for s in swept.skipped] == [{"fast": "40", "slow": "30"}]
    assert "fast < slow" in swept.skipped[0].reason
    with pytest.raises(SweepInputError, match="no combination of the grid can run"):
        plan("fast=40,50", "slow=30")


def test_an_unknown_parameter_or_strategy_is_named_with_what_is_known() -> None:
    with pytest.raises(SweepInputError, match=r"no parameter 'fsat' \(did you mean fast\?\); "
                                              "its parameters: fast, slow"):
        plan("fsat=5,10")
    with pytest.raises(SweepInputError, match="unknown strategy 'nope'; known: sma_cross"):
        plan("fast=5", strategy="nope")
    with pytest.raises(SweepInputError, match="model is swept only with --agents"):
        plan("model=a,b")


def test_fixed_values_apply_to_every_cell_without_a_column() -> None:
    swept = plan("fast=5,10", fixed=["slow=60"])
    assert swept.columns == ["fast"]
    assert {c.task.parameters["slow"] for c in swept.cells} == {60}
    with pytest.raises(SweepInputError, match="fixes one value"):
        plan("fast=5", fixed=["slow=50,60"])
    with pytest.raises(SweepInputError, match="fast is given twice"):
        plan("fast=5", fixed=["fast=6"])


def test_a_random_sample_is_the_same_for_the_same_seed_and_in_grid_order() -> None:
    grid = ("fast=2:29", "slow=30:80:5")
    first = plan(*grid, sample=5, seed=7)
    again = plan(*grid, sample=5, seed=7)
    other = plan(*grid, sample=5, seed=8)
    picked = [c.labels for c in first.cells]
    assert len(picked) == 5 and first.grid_size == 28 * 11
    assert picked == [c.labels for c in again.cells]
    assert picked != [c.labels for c in other.cells]
    order = [(int(p["fast"]), int(p["slow"])) for p in picked]
    assert order == sorted(order)
    assert first.identity == again.identity != other.identity
    everything = plan("fast=5,10", "slow=30", sample=50)
    assert len(everything.cells) == 2


def test_a_sample_draws_only_combinations_that_run() -> None:
    swept = plan("fast=5:40:5", "slow=20,30", sample=4, seed=1)
    assert len(swept.cells) == 4
    assert all(int(c.labels["fast"]) < int(c.labels["slow"]) for c in swept.cells)


def test_a_window_cuts_each_cell_its_candles_and_agents_get_their_warm_up(tmp_path: Path
                                                                          ) -> None:
    window = "2019-10-05..2019-10-07T23:00:00Z"
    swept = plan("fast=5", "window=2019-10-01..2019-10-03," + window, fixed=["slow=20"])
    assert [c.labels["window"] for c in swept.cells] == ["2019-10-01..2019-10-03", window]
    content = swept.blobs[swept.cells[1].task.files[0][1]].decode()
    stamps = [int(line.split(",")[0]) for line in content.splitlines()[1:]]
    assert stamps[0] == parse_time("2019-10-05") and stamps[-1] == parse_time(window[12:])
    assert swept.cells[1].task.files[0][0] == BTC_USDT_1H.name  # the name says the symbol
    agents = plan("rsi_period=14", f"window={window}", agents=[TREND, TRADER], warmup=10)
    rows = agents.blobs[agents.cells[0].task.files[0][1]].decode().splitlines()[1:]
    assert len(rows) == len(stamps) + 10
    with pytest.raises(SweepInputError, match="has no candle between"):
        plan("fast=5", "window=2021-01-01..2021-02-01")
    with pytest.raises(SweepInputError, match="ends before it starts"):
        plan("fast=5", "window=2019-10-07..2019-10-05")
    with pytest.raises(SweepInputError, match="is not a window"):
        plan("fast=5", "window=2019-10-07")


def test_symbols_pick_among_the_data_files_and_data_takes_files(tmp_path: Path) -> None:
    swept = plan("symbol=BTC/USDT,BTC/USD", "fast=5", data=[BTC_USDT_1H, BTC_USD_1H])
    assert [[name for name, _ in c.task.files] for c in swept.cells] == [
        [BTC_USDT_1H.name], [BTC_USD_1H.name]]
    with pytest.raises(SweepInputError, match="no --data file holds ETH/USDT"):
        plan("symbol=ETH/USDT", data=[BTC_USDT_1H])
    both = plan_sweep(SweepRequest(grid=[f"data={BTC_USDT_1H},{BTC_USDT_1H}+{BTC_USD_1H}",
                                         "fast=5"]))
    assert [c.labels["data"] for c in both.cells] == [
        BTC_USDT_1H.name, f"{BTC_USDT_1H.name}+{BTC_USD_1H.name}"]
    with pytest.raises(SweepInputError, match="either with --data or with --grid data"):
        plan(f"data={BTC_USDT_1H}")
    with pytest.raises(SweepInputError, match="needs --data FILE"):
        plan_sweep(SweepRequest(grid=["fast=5"]))


def test_unusable_data_is_refused_before_anything_runs(tmp_path: Path) -> None:
    bad = tmp_path / "BTC-USDT_1h_bad.csv"
    bad.write_text("timestamp_ms,open,high,low,close,volume\n1,2,3\n", encoding="utf-8")
    with pytest.raises(SweepInputError, match="bad data file: .*BTC-USDT_1h_bad.csv"):
        plan("fast=5", data=[bad])
    with pytest.raises(SweepInputError, match="bad data file"):
        plan("fast=5", data=[tmp_path / "missing.csv"])


def test_template_settings_reach_the_templates_that_have_them() -> None:
    swept = plan("rsi_period=10,14", "min_confidence=0.5", agents=[TREND, MEAN, TRADER])
    first = swept.cells[0].task
    assert first.kind == "agents" and first.templates == (TREND, MEAN, TRADER)
    assert first.settings == {TREND: {"rsi_period": 10, "min_confidence": "0.5"},
                              MEAN: {"rsi_period": 10, "min_confidence": "0.5"}}
    one = plan(f"{TREND}.rsi_period=10", f"{TRADER}.risk_per_trade_pct=1,2.5",
               agents=[TREND, MEAN, TRADER])
    assert one.cells[1].task.settings == {TREND: {"rsi_period": 10},
                                          TRADER: {"risk_per_trade_pct": "2.5"}}
    assert one.columns == [f"{TREND}.rsi_period", f"{TRADER}.risk_per_trade_pct"]


def test_a_setting_out_of_its_range_or_unknown_is_refused_with_the_reason() -> None:
    with pytest.raises(SweepInputError, match="AnalystAgent_Trend_v1's rsi_period must be between "
                                              "2 and 100, got 1"):
        plan("rsi_period=1,14", agents=[TREND, TRADER])
    with pytest.raises(SweepInputError, match=r"'rsi_perod' \(did you mean rsi_period\?\)"):
        plan("rsi_perod=10", agents=[TREND, TRADER])
    with pytest.raises(SweepInputError, match="has a setting 'symbols'"):
        plan("symbols=BTC/USDT", agents=[TREND, TRADER])
    with pytest.raises(SweepInputError, match="unknown agent template"):
        plan("rsi_period=10", agents=["Nope_v1", TRADER])
    with pytest.raises(SweepInputError, match="at least one analyst"):
        plan("risk_per_trade_pct=1", agents=[TRADER])
    with pytest.raises(SweepInputError, match="not among the sweep's agent templates"):
        plan(f"{MEAN}.rsi_period=10", agents=[TREND, TRADER])


def test_template_sets_and_models_are_swept_as_parameters() -> None:
    swept = plan(f"agents={TREND}+{TRADER},{MEAN}+{TRADER}", "rsi_period=14",
                 "model=small,large", "provider=openai-compatible",
                 llm={"base_url": "http://127.0.0.1:1/v1"})
    assert [c.task.templates for c in swept.cells][::2] == [(TREND, TRADER), (MEAN, TRADER)]
    assert swept.cells[1].task.llm == {"base_url": "http://127.0.0.1:1/v1",
                                       "model": "large", "provider": "openai-compatible"}
    with pytest.raises(SweepInputError, match="needs a provider"):
        plan("model=a,b", agents=[TREND, TRADER])
    with pytest.raises(SweepInputError, match="unknown provider 'openai'"):
        plan("provider=openai", agents=[TREND, TRADER])
    with pytest.raises(SweepInputError, match="not both"):
        plan(f"agents={TREND}", agents=[TREND, TRADER])


def test_a_settings_constraint_skips_the_combinations_it_breaks() -> None:
    swept = plan("macd_fast=10,30", "macd_slow=26", agents=[TREND, TRADER])
    assert [c.labels["macd_fast"] for c in swept.cells] == ["10"]
    assert "macd_fast" in swept.skipped[0].reason


def test_the_identity_follows_the_data_not_where_it_lies(tmp_path: Path) -> None:
    copy = tmp_path / "a" / BTC_USDT_1H.name
    copy.parent.mkdir()
    shutil.copy(BTC_USDT_1H, copy)
    original = plan("fast=5,10", fixed=["slow=30"])
    moved = plan("fast=5,10", fixed=["slow=30"], data=[copy])
    assert original.identity == moved.identity
    rows = copy.read_text(encoding="utf-8").splitlines(keepends=True)
    copy.write_text("".join(rows[:-1]), encoding="utf-8")  # one candle fewer
    assert plan("fast=5,10", fixed=["slow=30"], data=[copy]).identity != original.identity
    assert plan("fast=5,10", fixed=["slow=30"], cash=Decimal(500)).identity != original.identity


def test_a_grid_too_large_to_run_whole_asks_for_a_sample() -> None:
    with pytest.raises(SweepInputError, match="use --sample|sample some with --sample"):
        plan("fast=1:500", "slow=501:999")
