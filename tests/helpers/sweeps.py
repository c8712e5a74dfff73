"""A sweep's folder written directly (manifest and records, no backtest run), so the table, the
isolated-peak check and the window's list are tested on chosen numbers in milliseconds."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.runtime.output_folder import MARKER_NAME
from app.sweep.store import MANIFEST, RESULTS


def grid_sweep(folder: Path, axes: Mapping[str, Sequence[Any]],
               sharpe: Mapping[tuple[Any, ...], float | None | str],
               *, definition: Mapping[str, Any] | None = None) -> Path:
    """A finished strategy sweep over ``axes`` (name: values) whose cells have the Sharpe ratio
    ``sharpe[combination]`` (None: no value; "failed": a failed cell; a missing combination: a
    cell not run yet). Returns the folder."""
    names = list(axes)
    cells = []
    records = {}
    for index, combo in enumerate(itertools.product(*axes.values()), start=1):
        cell = f"c{index:04d}"
        labels = {n: str(v) for n, v in zip(names, combo, strict=True)}
        cells.append({"cell": cell, "labels": labels, "values": dict(zip(names, combo,
                                                                         strict=True))})
        if combo not in sharpe:
            continue
        value = sharpe[combo]
        if value == "failed":
            records[cell] = {"cell": cell, "status": "failed", "error": "ValueError: boom",
                             "params": labels}
        else:
            records[cell] = {
                "cell": cell, "status": "ok", "error": None, "params": labels,
                "sharpe": value, "return_pct": None if value is None else float(value) * 3,
                "max_drawdown_pct": 10.0, "trades": 4, "bh_return_pct": -6.85,
                "final_equity": "10123.45000000", "folder": f"cells/{cell}",
            }
    write_sweep(folder, names, cells, records, definition)
    return folder


def write_sweep(folder: Path, columns: Sequence[str], cells: Sequence[Mapping[str, Any]],
                records: Mapping[str, Mapping[str, Any]],
                definition: Mapping[str, Any] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER_NAME).write_text("kestrel sweep\n", encoding="utf-8")
    manifest = {
        "identity": "test", "definition": dict(definition or {"kind": "strategy",
                                                             "strategy": "sma_cross"}),
        "columns": list(columns), "cells": list(cells), "skipped": [], "grid_size": len(cells),
    }
    (folder / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    (folder / RESULTS).mkdir(exist_ok=True)
    for cell, record in records.items():
        (folder / RESULTS / f"{cell}.json").write_text(json.dumps(record), encoding="utf-8")
