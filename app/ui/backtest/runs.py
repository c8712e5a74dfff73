"""Past backtest runs, read back from their output folders.

Every run writes its report into a folder of its own (``<workspace>/backtests/<time>/`` from the
window, ``--out DIR`` from the shell), and the command that made the folder leaves a
``.kestrel-output`` marker naming itself. So the runs a person made are found by their markers,
never by guessing at folder names, and each is read back from the files its report wrote
(``summary.json``, ``equity.csv``, ``trades.csv``): the numbers shown are the run's own, the same
ones the shell printed. Qt-free; the reads are plain file reads, run off the window's loop.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from app.backtest.metrics import Metrics, RoundTrip
from app.backtest.report import REPORT_FILES, BacktestResult
from app.runtime.output_folder import MARKER_NAME

# the commands whose folders hold a backtest report the view can show
BACKTEST_COMMANDS = ("kestrel backtest", "kestrel backtest --agents")
_METRIC_FIELDS = frozenset(f.name for f in fields(Metrics))


class RunUnreadable(Exception):  # noqa: N818 - a fact about a folder, said to the person
    """A run's folder lacks a report file or holds one that cannot be read; says which."""


@dataclass(frozen=True, slots=True)
class PastRun:
    """One run's folder and what its summary says about it (enough for a row in the list).

    Attributes:
        command: what made the folder, from its marker (``kestrel backtest``...).
        title: the strategy and its parameters, or the agents, in a few words.
        written_ms: when its summary was written (wall clock), for ordering and the list.
    """

    folder: Path
    command: str
    title: str
    written_ms: int
    start_iso: str
    end_iso: str
    bars: int
    total_return_pct: float | None
    baseline_return_pct: float | None
    trades: int | None
    max_drawdown_pct: float | None

    @property
    def written(self) -> str:
        """When the run was made, in the person's local time."""
        moment = dt.datetime.fromtimestamp(self.written_ms / 1000)
        return moment.strftime("%Y-%m-%d %H:%M:%S")

    @property
    def span(self) -> str:
        """The market range the run covered, to the minute (UTC)."""
        first, last = (t[:16].replace("T", " ") for t in (self.start_iso, self.end_iso))
        return f"{first} → {last}"


def marker_command(folder: Path) -> str | None:
    """The command a folder's ``.kestrel-output`` marker names (its first line), or None."""
    try:
        first = (folder / MARKER_NAME).read_text(encoding="utf-8").splitlines()[:1]
    except (OSError, UnicodeDecodeError):
        return None
    return first[0].strip() if first else None


def run_title(settings: dict[str, Any]) -> str:
    """``sma_cross (10/30)`` for a strategy, the agents' names for an agent run."""
    strategy = settings.get("strategy")
    if strategy:
        params = settings.get("parameters") or {}
        values = "/".join(str(v) for v in params.values())
        return f"{strategy} ({values})" if values else str(strategy)
    agents = [str(a).split(" (", 1)[0] for a in settings.get("agents") or ()]
    title = ", ".join(agents) or "agents"
    return title + (" (blind)" if settings.get("blind") else "")


def _summary(folder: Path) -> dict[str, Any]:
    path = folder / REPORT_FILES["summary"]
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunUnreadable(f"{path} cannot be read: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunUnreadable(f"{path} is not a readable summary: {exc}") from exc
    if not isinstance(document, dict):
        raise RunUnreadable(f"{path} is not a readable summary")
    return document


def read_run(folder: Path) -> PastRun | None:
    """The run in ``folder``, or None when the folder holds no backtest report (no marker of a
    backtest command, or no summary yet: a run still going, or stopped before its report)."""
    command = marker_command(folder)
    if command not in BACKTEST_COMMANDS or not (folder / REPORT_FILES["summary"]).is_file():
        return None
    try:
        summary = _summary(folder)
        written_ms = int((folder / REPORT_FILES["summary"]).stat().st_mtime * 1000)
    except (RunUnreadable, OSError):
        return None
    strategy = summary.get("strategy") or {}
    baseline = summary.get("buy_and_hold") or {}
    return PastRun(
        folder=folder, command=str(command), title=run_title(summary.get("settings") or {}),
        written_ms=written_ms, start_iso=str(summary.get("start_iso", "")),
        end_iso=str(summary.get("end_iso", "")), bars=int(summary.get("bars") or 0),
        total_return_pct=strategy.get("total_return_pct"),
        baseline_return_pct=baseline.get("total_return_pct"),
        trades=strategy.get("trades"), max_drawdown_pct=strategy.get("max_drawdown_pct"),
    )


def find_runs(roots: Iterable[Path]) -> list[PastRun]:
    """Every run in ``roots`` (each root itself, and each folder directly inside it), newest
    first; a folder another command made, or none made, is left out."""
    seen: set[Path] = set()
    runs: list[PastRun] = []
    for root in roots:
        if not root.is_dir():
            continue
        try:
            inside = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            continue
        for folder in (root, *inside):
            key = folder.resolve()
            if key in seen:
                continue
            seen.add(key)
            run = read_run(folder)
            if run is not None:
                runs.append(run)
    runs.sort(key=lambda r: (r.written_ms, str(r.folder)), reverse=True)
    return runs


def _metrics(values: dict[str, Any]) -> Metrics:
    known = {k: v for k, v in values.items() if k in _METRIC_FIELDS}
    missing = _METRIC_FIELDS - set(known)
    if missing:
        raise RunUnreadable(f"the summary lacks {', '.join(sorted(missing))}")
    return Metrics(**known)


def _float(text: str) -> float | None:
    return float(text) if text.strip() else None


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    except OSError as exc:
        raise RunUnreadable(f"{path} cannot be read: {exc.strerror or exc}") from exc


def load_result(folder: Path) -> BacktestResult:
    """The run's ``BacktestResult`` as its report files hold it (blocking: call in a thread).

    Raises:
        RunUnreadable: a report file is missing or malformed, naming it.
    """
    summary = _summary(folder)
    equity_path = folder / REPORT_FILES["equity"]
    try:
        rows = _rows(equity_path)
        time_ms = np.array([int(r["time_ms"]) for r in rows], dtype=np.int64)
        equity = np.array([float(r["equity"]) for r in rows])
        baseline = np.array([float(r["buy_hold_equity"]) for r in rows])
        exposed = np.array([r["in_market"] == "1" for r in rows], dtype=bool)
    except (KeyError, ValueError) as exc:
        raise RunUnreadable(f"{equity_path} is not a readable equity file: {exc}") from exc
    if time_ms.size == 0:
        raise RunUnreadable(f"{equity_path} holds no bars")
    trades_path = folder / REPORT_FILES["trades"]
    try:
        trades = [_trade(r) for r in _rows(trades_path)]
    except (KeyError, ValueError) as exc:
        raise RunUnreadable(f"{trades_path} is not a readable trades file: {exc}") from exc
    strategy = dict(summary.get("strategy") or {})
    refused = strategy.get("refused_orders_by")
    return BacktestResult(
        time_ms=time_ms, equity=equity, baseline_equity=baseline, exposed=exposed,
        trades=trades, metrics=_metrics(strategy), baseline=_metrics(summary.get("buy_and_hold")
                                                                     or {}),
        settings=dict(summary.get("settings") or {}), stats=dict(summary.get("stats") or {}),
        faults=tuple(summary.get("faults") or ()),
        # the refusal warning is made again from the counts: only the others are kept
        warnings=tuple(w for w in summary.get("warnings") or () if "were refused" not in w),
        refused=dict(refused) if isinstance(refused, dict) else None,
    )


def _trade(row: dict[str, str]) -> RoundTrip:
    exit_ms = row["exit_time_ms"].strip()
    return RoundTrip(
        symbol=row["symbol"], entry_time_ms=int(row["entry_time_ms"]),
        exit_time_ms=int(exit_ms) if exit_ms else None, quantity=float(row["quantity"]),
        entry_price=float(row["entry_price"]), exit_price=_float(row["exit_price"]),
        pnl=float(row["pnl"]), return_pct=float(row["return_pct"]), fees=float(row["fees"]),
        bars_held=int(row["bars_held"]), open=row["open"] == "1",
    )


def price_files(folder: Path, settings: dict[str, Any],
                known: Sequence[Path] = ()) -> list[Path]:
    """The candle files a run traded on: its own copy (``data/`` in its folder, where the window
    writes the chosen range), else the files its settings name, found among ``known`` ones
    (the bundled sample data, files the person added)."""
    own = sorted((folder / "data").glob("*.csv")) if (folder / "data").is_dir() else []
    if own:
        return own
    by_name = {Path(p).name: Path(p) for p in known}
    return [by_name[name] for name in settings.get("data") or () if name in by_name]
