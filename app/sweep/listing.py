"""Sweeps found in folders, for the window's list: what each swept, how far it got, its best.

A sweep's folder is known by its ``.kestrel-output`` marker and its manifest (``store.is_sweep``),
never by its name, the way the Backtest view finds past runs by their markers. A root is either
a sweep itself or a folder of sweeps (``<workspace>/sweeps/``). Qt-free: plain file reads, run off
the window's loop.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.sweep.store import MANIFEST, is_sweep, read_manifest
from app.sweep.table import load_table, number

SWEEPS_FOLDER = "sweeps"  # a workspace's sweeps: <workspace>/sweeps/<name>/


@dataclass(frozen=True, slots=True)
class SweepSummary:
    """One sweep, as a row of the list."""

    folder: Path
    what: str  # "sma_cross" or the agent templates
    parameters: tuple[str, ...]
    cells: int
    finished: int
    failed: int
    best_sharpe: float | None
    best_where: str
    written_ms: int
    isolated_peak: bool

    @property
    def written(self) -> str:
        """When the sweep was made, in the person's local time."""
        return dt.datetime.fromtimestamp(self.written_ms / 1000).strftime("%Y-%m-%d %H:%M")


def find_sweeps(roots: Iterable[Path]) -> list[SweepSummary]:
    """Every readable sweep in ``roots`` (each a sweep or a folder of sweeps), newest first."""
    seen: set[Path] = set()
    found: list[SweepSummary] = []
    for root in roots:
        root = Path(root)
        candidates = [root] if is_sweep(root) else (
            sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
        for folder in candidates:
            key = folder.resolve()
            if key in seen or not is_sweep(folder):
                continue
            seen.add(key)
            summary = summarise(folder)
            if summary is not None:
                found.append(summary)
    return sorted(found, key=lambda s: s.written_ms, reverse=True)


def summarise(folder: Path) -> SweepSummary | None:
    """A sweep's row, or None when its manifest cannot be read."""
    try:
        manifest = read_manifest(folder)
        table = load_table(folder, "sharpe")
    except Exception:  # noqa: BLE001 - an unreadable sweep is left out of the list, not fatal
        return None
    definition = manifest.get("definition", {})
    what = definition.get("strategy") or "+".join(definition.get("templates", [])) or "agents"
    best = table.best
    where = " ".join(f"{c}={best[c]}" for c in table.columns) if best else ""
    return SweepSummary(
        folder=folder, what=str(what), parameters=tuple(table.columns), cells=table.total,
        finished=len(table.rows), failed=len(table.failed),
        best_sharpe=number(best.get("sharpe")) if best else None, best_where=where,
        written_ms=int((folder / MANIFEST).stat().st_mtime * 1000),
        isolated_peak=bool(table.warnings),
    )
