"""A sweep's results as one table: a row per finished cell, a column per swept parameter (named
as in ``--grid``), the figures of each cell's report beside buy-and-hold, sorted by a metric;
written as CSV and JSON, with a heatmap of two parameters and the isolated-peak check.

The CLI and the window read the same table from the sweep's folder (``load_table``), so both
show the numbers the cells' own ``summary.json`` hold.

**Isolated peak.** The best cell of a sweep is often luck: the one combination of parameters that
happened to fit this stretch of data. A robust result has grid neighbours (one numeric parameter
one step up or down, every other parameter the same) that did nearly as well. The check flags the
best cell when *every* neighbour that has a result is *far worse*: more than half of the sweep's
whole range of the metric (best minus worst over all finished cells) below the best. For a
sweep whose Sharpe ratios run from 0.1 to 2.0, a best of 2.0 is isolated when each neighbour is
below 1.05. It needs three cells with a value, a range above zero and at least one neighbour
with a value; categorical parameters (data, symbol, window, templates, models) make no
neighbours, they only have to match.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from app.sweep.cells import BUY_AND_HOLD, METRICS
from app.sweep.sorting import sort_key
from app.sweep.store import (
    HEATMAP,
    TABLE_CSV,
    TABLE_JSON,
    read_manifest,
    read_records,
    write_atomically,
)

FAR_WORSE = 0.5  # of the sweep's range of the metric: a neighbour that far below is "far worse"
FIGURES = [*METRICS.values(), *BUY_AND_HOLD.values(), "vs_bh_return_pct"]
AGENT_FIGURES = ["llm_calls", "cost_usd"]
TAIL = ["bars", "start", "end", "seconds", "cpu_seconds", "error", "folder"]
OK = "ok"


def number(value: Any) -> float | None:
    """A figure as a number (money columns are decimal strings), None when it has none."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(Decimal(str(value)))
    except (InvalidOperation, ValueError):
        return None


@dataclass
class SweepTable:
    """A sweep's table.

    Attributes:
        columns: the swept parameters, in ``--grid`` order.
        rows: one per finished cell, best first (failed cells last), each with its parameters
            (as typed), status, figures, error and folder.
        values: per cell id, its parameters as numbers where they are numeric.
        total: cells the sweep has; ``len(rows)`` of them are finished.
    """

    folder: Path
    columns: list[str]
    rows: list[dict[str, Any]]
    sort: str
    metric: str
    higher_is_better: bool
    total: int
    definition: dict[str, Any]
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return str(self.definition.get("kind", "strategy"))

    @property
    def fields(self) -> list[str]:
        figures = FIGURES + (AGENT_FIGURES if self.kind == "agents" else [])
        figures = [self.metric, *[f for f in figures if f != self.metric]]
        return ["cell", *self.columns, "status", *figures, *TAIL]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] != OK]

    @property
    def best(self) -> dict[str, Any] | None:
        first = self.rows[0] if self.rows else None
        if first is None or first["status"] != OK or number(first.get(self.metric)) is None:
            return None
        return first


def order_rows(rows: Sequence[dict[str, Any]], metric: str, higher_is_better: bool
               ) -> list[dict[str, Any]]:
    """Best first by ``metric``; cells without a value for it, then failed cells, last (each
    group in cell order)."""
    def key(row: dict[str, Any]) -> tuple[int, float, str]:
        value = number(row.get(metric))
        if row.get("status") != OK:
            return 2, 0.0, row["cell"]
        if value is None:
            return 1, 0.0, row["cell"]
        return 0, -value if higher_is_better else value, row["cell"]

    return sorted(rows, key=key)


def load_table(folder: Path, sort: str = "sharpe") -> SweepTable:
    """Read a sweep's folder into its table (finished cells only), sorted by ``sort``.

    Raises:
        OperationalError: the folder holds no readable sweep.
        ValueError: an unknown ``sort``.
    """
    metric, higher = sort_key(sort)
    folder = Path(folder)
    manifest = read_manifest(folder)
    columns = list(manifest.get("columns", []))
    cells = manifest["cells"]
    records = read_records(folder, [c["cell"] for c in cells])
    rows = []
    for cell in cells:
        record = records.get(cell["cell"])
        if record is None:
            continue
        row: dict[str, Any] = {"cell": cell["cell"]}
        row.update({name: cell["labels"].get(name, "") for name in columns})
        row["status"] = record.get("status", "failed")
        for name in (*FIGURES, *AGENT_FIGURES, *TAIL):
            if name in record:
                row[name] = record[name]
        rows.append(row)
    table = SweepTable(
        folder, columns, order_rows(rows, metric, higher), sort, metric, higher, len(cells),
        manifest.get("definition", {}),
        values={c["cell"]: c.get("values", c["labels"]) for c in cells},
        skipped=list(manifest.get("skipped", [])),
    )
    peak = isolated_peak(table)
    if peak is not None:
        table.warnings.append(peak)
    return table


# -- the isolated-peak check --------------------------------------------------------------------
def neighbours(table: SweepTable, cell: str) -> list[tuple[str, str]]:
    """The finished cells one step away from ``cell`` along one numeric parameter, every other
    parameter equal: (the neighbour's cell id, which step, e.g. "fast=5")."""
    numeric = [c for c in table.columns
               if all(isinstance(v.get(c), int | float) for v in table.values.values())]
    here = table.values[cell]
    found = []
    for column in numeric:
        steps = sorted({v[column] for v in table.values.values()})
        index = steps.index(here[column])
        for near in (index - 1, index + 1):
            if not 0 <= near < len(steps):
                continue
            wanted = {**here, column: steps[near]}
            for other, values in table.values.items():
                if values == wanted:
                    found.append((other, f"{column}={_label(steps[near])}"))
    return found


def isolated_peak(table: SweepTable) -> str | None:
    """The warning for a best cell whose grid neighbours are all far worse (see the module's
    docstring), or None."""
    best = table.best
    scored = {r["cell"]: number(r.get(table.metric)) for r in table.rows if r["status"] == OK}
    scored = {cell: v for cell, v in scored.items() if v is not None}
    if best is None or len(scored) < 3:
        return None
    top = scored[best["cell"]]
    worst = min(scored.values()) if table.higher_is_better else max(scored.values())
    spread = abs(top - worst)
    if spread <= 0:
        return None
    near = [(cell, step, scored[cell]) for cell, step in neighbours(table, best["cell"])
            if cell in scored]
    if not near:
        return None
    limit = spread * FAR_WORSE
    if not all(abs(top - value) > limit and _worse(value, top, table.higher_is_better)
               for _cell, _step, value in near):
        return None
    where = ", ".join(f"{name}={best[name]}" for name in table.columns)
    listed = ", ".join(f"{step}: {_fmt(value)}" for _cell, step, value in near)
    which = "its only grid neighbour is" if len(near) == 1 else \
        f"all {len(near)} of its grid neighbours are"
    each = "more" if len(near) == 1 else "each more"
    return (f"the best cell ({where}; {table.metric} {_fmt(top)}) is an isolated peak: "
            f"{which} far worse ({listed}), {each} than {FAR_WORSE:.0%} of the sweep's range "
            f"({_fmt(min(top, worst))} to {_fmt(max(top, worst))}) below it. A result that "
            "does not survive a one-step change of its parameters is likely overfit to this "
            "data")


def _worse(value: float, top: float, higher_is_better: bool) -> bool:
    return value < top if higher_is_better else value > top


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _label(value: Any) -> str:
    return str(value)


# -- writing ------------------------------------------------------------------------------------
def table_document(table: SweepTable) -> dict[str, Any]:
    """The JSON document: what was swept, the counts, the warnings, and the rows (parameters
    typed as numbers where they are numeric)."""
    rows = []
    for row in table.rows:
        typed = dict(row)
        typed.update({c: table.values.get(row["cell"], {}).get(c, row.get(c))
                      for c in table.columns})
        rows.append({name: typed.get(name) for name in table.fields if name in typed})
    failed = len(table.failed)
    return {
        "sort": table.sort, "metric": table.metric,
        "better": "higher" if table.higher_is_better else "lower",
        "parameters": table.columns, "cells": table.total, "finished": len(table.rows),
        "failed": failed, "skipped": table.skipped, "warnings": table.warnings,
        "definition": table.definition, "rows": rows,
    }


def table_csv(table: SweepTable) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=table.fields, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in table.rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def write_table(table: SweepTable, heatmap: Sequence[str] | None = None) -> dict[str, Path]:
    """Write ``results.csv``, ``results.json`` and, for two parameters, ``heatmap.png``.

    ``heatmap``: the two parameters (x, y) to draw; default: the two swept parameters when the
    sweep has exactly two with more than one value.
    """
    paths = {"csv": table.folder / TABLE_CSV, "json": table.folder / TABLE_JSON}
    write_atomically(paths["csv"], table_csv(table).encode("utf-8"))
    document = json.dumps(table_document(table), indent=2, ensure_ascii=False) + "\n"
    write_atomically(paths["json"], document.encode("utf-8"))
    axes = heatmap_axes(table, heatmap)
    if axes is not None and table.rows:
        paths["heatmap"] = table.folder / HEATMAP
        draw_heatmap(table, axes[0], axes[1], paths["heatmap"])
    return paths


def heatmap_axes(table: SweepTable, chosen: Sequence[str] | None) -> tuple[str, str] | None:
    """The heatmap's (x, y) parameters, or None when the sweep does not say which two.

    Raises:
        ValueError: ``chosen`` names a parameter the sweep does not have, or not two.
    """
    if chosen:
        if len(chosen) != 2 or chosen[0] == chosen[1]:
            raise ValueError(f"--heatmap takes two different parameters X,Y, got "
                             f"{','.join(chosen)}")
        unknown = [c for c in chosen if c not in table.columns]
        if unknown:
            raise ValueError(f"--heatmap {unknown[0]}: not a swept parameter; the sweep's are "
                             f"{', '.join(table.columns)}")
        return chosen[0], chosen[1]
    varied = [c for c in table.columns if len({v.get(c) for v in table.values.values()}) > 1]
    if len(varied) == 2:
        return varied[0], varied[1]
    return None


def draw_heatmap(table: SweepTable, x: str, y: str, path: Path) -> None:
    """The metric over two parameters, one square per pair; where other parameters vary, each
    square shows the best cell among them. Missing and failed cells are left grey; the best
    square is outlined.

    Drawn on its own ``Figure`` (no ``pyplot``), like the backtest's chart.
    """
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    xs = _axis_values(table, x)
    ys = _axis_values(table, y)
    grid = np.full((len(ys), len(xs)), np.nan)
    for row in table.rows:
        value = number(row.get(table.metric))
        if row["status"] != OK or value is None:
            continue
        values = table.values[row["cell"]]
        i, j = ys.index(values[y]), xs.index(values[x])
        current = grid[i, j]
        if np.isnan(current) or _worse(current, value, table.higher_is_better):
            grid[i, j] = value
    fig = Figure(figsize=(1.2 + 0.9 * max(len(xs), 4), 1.4 + 0.6 * max(len(ys), 3)))
    ax = fig.add_subplot()
    colours = colormaps["RdYlGn" if table.higher_is_better else "RdYlGn_r"]
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=colours.with_extremes(bad="#dddddd"),
                      aspect="auto", origin="lower")
    fig.colorbar(image, ax=ax, label=table.metric)
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    for i in range(len(ys)):
        for j in range(len(xs)):
            text = "n/a" if np.isnan(grid[i, j]) else f"{grid[i, j]:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    best = table.best
    if best is not None:
        values = table.values[best["cell"]]
        j, i = xs.index(values[x]), ys.index(values[y])
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, linewidth=2.2,
                               edgecolor="black"))
    others = [c for c in table.columns if c not in (x, y)
              and len({v.get(c) for v in table.values.values()}) > 1]
    title = f"{table.metric} by {x} and {y}"
    if others:
        title += f" (best over {', '.join(others)})"
    if table.warnings:
        title += "\nisolated peak: likely overfit"
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _axis_values(table: SweepTable, column: str) -> list[Any]:
    """A parameter's values in the order the sweep gave them (numbers ascending)."""
    seen: list[Any] = []
    for values in table.values.values():
        if values.get(column) not in seen:
            seen.append(values.get(column))
    if all(isinstance(v, int | float) for v in seen):
        seen.sort()
    return seen


def text_table(table: SweepTable, top: int = 10) -> str:
    """The best ``top`` rows for the terminal: parameters, the sort metric, return, drawdown,
    trades and buy-and-hold's return beside."""
    shown = [*table.columns, table.metric]
    for name in ("return_pct", "max_drawdown_pct", "trades", "bh_return_pct"):
        if name not in shown:
            shown.append(name)
    rows = [row for row in table.rows if row["status"] == OK][:top]
    cells = [[_cell(row.get(name)) for name in shown] for row in rows]
    widths = [max([len(name), *(len(c[k]) for c in cells)]) for k, name in enumerate(shown)]
    lines = ["  ".join(name.rjust(w) for name, w in zip(shown, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def buy_and_hold_line(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Buy-and-hold of the cells' data, in one line (one value when every cell ran the same
    data, else the range)."""
    values = [number(r.get("bh_return_pct")) for r in rows if r.get("status") == OK]
    values = [v for v in values if v is not None]
    if not values:
        return None
    low, high = min(values), max(values)
    if abs(high - low) < 1e-9:
        return f"Buy and hold of the same data: return {low:,.2f}%."
    return f"Buy and hold of the cells' data: return {low:,.2f}% to {high:,.2f}%."
