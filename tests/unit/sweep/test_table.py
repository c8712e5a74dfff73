"""A sweep's table: sorted by the chosen metric with failed cells last, a column per swept
parameter, CSV and JSON, the heatmap of two parameters, and the isolated-peak warning with its
concrete rule: every finished grid neighbour of the best cell more than half the sweep's range
below it."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from app.sweep.table import (
    FAR_WORSE,
    heatmap_axes,
    load_table,
    neighbours,
    sort_key,
    write_table,
)
from tests.helpers.sweeps import grid_sweep

AXES = {"fast": [5, 10, 20], "slow": [30, 50]}


def sweep(tmp_path: Path, sharpe: dict, axes: dict | None = None) -> Path:
    return grid_sweep(tmp_path / "sweep", axes or AXES, sharpe)


def test_rows_are_best_first_by_the_metric_with_failed_cells_last(tmp_path: Path) -> None:
    folder = sweep(tmp_path, {(5, 30): 0.5, (10, 30): "failed", (20, 30): 1.5,
                              (5, 50): None, (10, 50): -0.2, (20, 50): 1.0})
    table = load_table(folder, "sharpe")
    assert [(r["fast"], r["slow"]) for r in table.rows] == [
        ("20", "30"), ("20", "50"), ("5", "30"), ("10", "50"), ("5", "50"), ("10", "30")]
    assert table.rows[-1]["status"] == "failed" and table.rows[-1]["error"] == "ValueError: boom"
    assert table.best is not None and table.best["cell"] == "c0005"
    worst_first = load_table(folder, "drawdown")
    assert worst_first.metric == "max_drawdown_pct" and not worst_first.higher_is_better


def test_a_sweep_not_finished_lists_the_cells_that_are(tmp_path: Path) -> None:
    table = load_table(sweep(tmp_path, {(5, 30): 0.5, (10, 30): 0.7}))
    assert table.total == 6 and len(table.rows) == 2


def test_an_unknown_sort_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="sort by one of sharpe, sortino, return"):
        sort_key("luck")
    assert sort_key("return") == ("return_pct", True)
    assert sort_key("max_drawdown_pct") == ("max_drawdown_pct", False)


def test_csv_and_json_name_each_parameter_as_in_the_grid(tmp_path: Path) -> None:
    folder = sweep(tmp_path, {(5, 30): 0.5, (10, 30): 0.9, (20, 30): 0.4,
                              (5, 50): 0.6, (10, 50): 0.8, (20, 50): 0.3})
    files = write_table(load_table(folder, "sharpe"))
    with files["csv"].open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:5] == ["cell", "fast", "slow", "status", "sharpe"]
    assert [(r["fast"], r["slow"], r["sharpe"]) for r in rows[:2]] == [
        ("10", "30", "0.9"), ("10", "50", "0.8")]
    assert rows[0]["final_equity"] == "10123.45000000"  # money stays decimal text
    document = json.loads(files["json"].read_text(encoding="utf-8"))
    assert document["parameters"] == ["fast", "slow"]
    assert document["rows"][0]["fast"] == 10  # typed: a number where the parameter is one
    assert document["cells"] == 6 and document["failed"] == 0
    assert files["heatmap"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_heatmap_needs_two_parameters_or_is_told_which(tmp_path: Path) -> None:
    axes = {"fast": [5, 10], "slow": [30, 50], "window": ["a", "b"]}
    table = load_table(grid_sweep(tmp_path / "s", axes, {(5, 30, "a"): 1.0}))
    assert heatmap_axes(table, None) is None
    assert heatmap_axes(table, ["fast", "window"]) == ("fast", "window")
    with pytest.raises(ValueError, match="not a swept parameter"):
        heatmap_axes(table, ["fast", "nope"])
    with pytest.raises(ValueError, match="two different parameters"):
        heatmap_axes(table, ["fast"])
    assert "heatmap" in write_table(table, ["fast", "slow"])
    one = load_table(grid_sweep(tmp_path / "one", {"fast": [5, 10]}, {(5,): 1.0}))
    assert "heatmap" not in write_table(one)


# -- the isolated peak --------------------------------------------------------------------------
def test_a_best_cell_whose_neighbours_all_fall_far_below_it_is_flagged(tmp_path: Path) -> None:
    # range 0.1 .. 2.0: "far worse" is more than 0.95 below the best
    folder = sweep(tmp_path, {(5, 30): 0.2, (10, 30): 2.0, (20, 30): 0.3,
                              (5, 50): 0.4, (10, 50): 0.1, (20, 50): 0.35})
    table = load_table(folder)
    assert sorted(step for _cell, step in neighbours(table, "c0003")) == [
        "fast=20", "fast=5", "slow=50"]
    assert len(table.warnings) == 1
    warning = table.warnings[0]
    assert "fast=10, slow=30" in warning and "isolated peak" in warning
    assert "all 3 of its grid neighbours are far worse" in warning
    assert "fast=5: 0.20" in warning and "slow=50: 0.10" in warning
    assert "likely overfit" in warning
    document = json.loads(write_table(table)["json"].read_text(encoding="utf-8"))
    assert document["warnings"] == [warning]


def test_a_best_cell_on_a_plateau_is_not_flagged(tmp_path: Path) -> None:
    folder = sweep(tmp_path, {(5, 30): 1.8, (10, 30): 2.0, (20, 30): 1.5,
                              (5, 50): 0.4, (10, 50): 1.7, (20, 50): 0.1})
    assert load_table(folder).warnings == []


def test_one_neighbour_nearly_as_good_is_enough_to_clear_the_best(tmp_path: Path) -> None:
    folder = sweep(tmp_path, {(5, 30): 0.2, (10, 30): 2.0, (20, 30): 1.9,
                              (5, 50): 0.4, (10, 50): 0.1, (20, 50): 0.35})
    assert load_table(folder).warnings == []


def test_far_worse_means_more_than_half_the_range_below(tmp_path: Path) -> None:
    assert FAR_WORSE == 0.5
    # range 0.0 .. 2.0, half of it 1.0: a neighbour at exactly 1.0 is not far worse
    at_the_line = {(5, 30): 1.0, (10, 30): 2.0, (20, 30): 0.5, (5, 50): 0.0, (10, 50): 0.5,
                   (20, 50): 0.5}
    assert load_table(sweep(tmp_path / "a", at_the_line)).warnings == []
    just_below = {**at_the_line, (5, 30): 0.99}
    assert len(load_table(sweep(tmp_path / "b", just_below)).warnings) == 1


def test_neighbours_without_a_value_do_not_count(tmp_path: Path) -> None:
    # the best's only neighbour with a value is far worse; the others failed or have none
    folder = sweep(tmp_path, {(5, 30): "failed", (10, 30): 2.0, (20, 30): None,
                              (5, 50): 1.9, (10, 50): 0.1, (20, 50): 1.8})
    table = load_table(folder)
    assert len(table.warnings) == 1 and "its only grid neighbour is far worse" in table.warnings[0]
    lonely = sweep(tmp_path / "lonely", {(10, 30): 2.0, (5, 50): 0.1, (20, 50): 0.3})
    assert load_table(lonely).warnings == []  # no neighbour with a value: nothing to say


def test_too_few_cells_or_no_spread_say_nothing(tmp_path: Path) -> None:
    assert load_table(sweep(tmp_path / "a", {(10, 30): 2.0, (5, 30): 0.1})).warnings == []
    flat = {combo: 1.0 for combo in [(5, 30), (10, 30), (20, 30)]}
    assert load_table(sweep(tmp_path / "b", flat)).warnings == []


def test_categorical_parameters_make_no_neighbours_they_must_match(tmp_path: Path) -> None:
    axes = {"fast": [5, 10, 20], "window": ["jan", "feb"]}
    folder = grid_sweep(tmp_path / "s", axes, {
        (5, "jan"): 0.2, (10, "jan"): 2.0, (20, "jan"): 0.1,
        (5, "feb"): 1.9, (10, "feb"): 1.95, (20, "feb"): 1.8})
    table = load_table(folder)
    assert sorted(step for _cell, step in neighbours(table, "c0003")) == ["fast=20", "fast=5"]
    assert len(table.warnings) == 1  # feb's cells are not its neighbours, however close


def test_a_lower_is_better_metric_flags_a_lonely_minimum(tmp_path: Path) -> None:
    folder = sweep(tmp_path, {combo: 1.0 for combo in
                              [(5, 30), (10, 30), (20, 30), (5, 50), (10, 50), (20, 50)]})
    for path in (folder / "results").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        record["max_drawdown_pct"] = 2.0 if record["cell"] == "c0003" else 30.0
        path.write_text(json.dumps(record), encoding="utf-8")
    table = load_table(folder, "drawdown")
    assert table.best is not None and table.best["cell"] == "c0003"
    assert len(table.warnings) == 1 and "max_drawdown_pct 2.00" in table.warnings[0]
