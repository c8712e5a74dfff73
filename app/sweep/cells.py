"""One cell of a sweep: a full backtest (a strategy or agent templates) in a folder of its own,
with the same report as a single ``kestrel backtest`` run.

Why a cell carries its data and returns its report as bytes: the same function then runs on this
machine's processes and on a Dask worker elsewhere, which shares no file system with the person's
machine. The worker writes the data into a temporary folder, runs the backtest there through the
same entry points as ``kestrel backtest`` (``run_backtest_async``, ``run_agent_backtest``), zips
the output folder and returns it with a small record of the result; only the process that drives
the sweep writes into the sweep's folder. A cell never raises: an error becomes a failed record
(with the error's details in the cell's ``error.txt``), so one bad cell never stops the others.
"""

from __future__ import annotations

import asyncio
import io
import os
import socket
import sys
import tempfile
import time
import traceback
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

ERROR_FILE = "error.txt"
MONEY_PLACES = Decimal("0.00000001")
# the report's figures a sweep's table keeps, under their table names
METRICS = {
    "total_return_pct": "return_pct", "cagr_pct": "cagr_pct", "sharpe": "sharpe",
    "sortino": "sortino", "max_drawdown_pct": "max_drawdown_pct", "trades": "trades",
    "refused_orders": "refused_orders", "win_rate_pct": "win_rate_pct",
    "profit_factor": "profit_factor", "exposure_pct": "exposure_pct",
    "final_equity": "final_equity", "fees_paid": "fees_paid",
}
BUY_AND_HOLD = {"total_return_pct": "bh_return_pct", "sharpe": "bh_sharpe",
                "max_drawdown_pct": "bh_max_drawdown_pct", "final_equity": "bh_final_equity"}
MONEY = frozenset({"final_equity", "fees_paid", "bh_final_equity"})


@dataclass(frozen=True)
class CellTask:
    """What one cell runs; plain values only, so it pickles to any worker and its JSON is the
    cell's part of the sweep's identity.

    Attributes:
        files: (file name, SHA-256 of its bytes) of each data file; the bytes travel beside.
        cash, fee, slippage_bps: decimal strings (money is never a float on its way in).
        parameters: a strategy's parameters (all of them, defaults filled in).
        settings: per agent template, the settings its agents are created with.
        llm: the ``[llm]`` settings the agents run under (provider, model, base_url,
            api_key_name; empty: each template's own provider).
    """

    cell_id: str
    kind: str  # "strategy" or "agents"
    files: tuple[tuple[str, str], ...]
    cash: str
    fee: str
    slippage_bps: str
    allow_gaps: bool = False
    strategy: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    risk: dict[str, Any] | None = None
    templates: tuple[str, ...] = ()
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    warmup: int = 60
    bars: int | None = None
    llm: dict[str, str] = field(default_factory=dict)
    blind: bool = False

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["files"] = [list(f) for f in self.files]
        data["templates"] = list(self.templates)
        return data


@dataclass(frozen=True)
class CellOutcome:
    """A finished cell: its record (status, figures, error) and its output folder, zipped."""

    cell_id: str
    record: dict[str, Any]
    archive: bytes


def money(value: Any) -> str | None:
    """A report's float amount as a decimal string of the ledger's 8 places (the table's money
    columns are decimal text, never binary floats)."""
    if value is None:
        return None
    return str(Decimal(repr(float(value))).quantize(MONEY_PLACES))


def figures(document: Mapping[str, Any]) -> dict[str, Any]:
    """The table's figures of one run, from its ``summary.json`` document (the very numbers the
    single-run report shows)."""
    mine, base = document.get("strategy", {}), document.get("buy_and_hold", {})
    out: dict[str, Any] = {name: mine.get(key) for key, name in METRICS.items()}
    out.update({name: base.get(key) for key, name in BUY_AND_HOLD.items()})
    ret, bh = out.get("return_pct"), out.get("bh_return_pct")
    out["vs_bh_return_pct"] = None if ret is None or bh is None else round(ret - bh, 10)
    for name in MONEY:
        out[name] = money(out.get(name))
    return out


def run_cell(task: CellTask, blobs: Mapping[str, bytes]) -> CellOutcome:
    """Run one cell in a temporary folder and return its record and its zipped output.

    Never raises on the backtest's account: an error is a record with status "failed".
    """
    started, cpu = time.perf_counter(), time.thread_time()
    record: dict[str, Any] = {"cell": task.cell_id, "worker": _where()}
    with tempfile.TemporaryDirectory(prefix="kestrel-cell-") as tmp:
        root = Path(tmp)
        out = root / "out"
        try:
            paths = _write_data(task, blobs, root / "data")
            if task.kind == "strategy":
                record.update(_run_strategy(task, paths, out))
            else:
                record.update(_run_agents(task, paths, out))
        except Exception as exc:  # noqa: BLE001 - a cell's error is its record, not the sweep's
            record.update(status="failed", error=_one_line(exc))
            _keep_error(out, exc)
        record["seconds"] = round(time.perf_counter() - started, 3)
        # the processor time the cell itself took: on a machine busy with other work the wall
        # time says more about the others than about the cell
        record["cpu_seconds"] = round(time.thread_time() - cpu, 3)
        archive = _zip(out) if out.is_dir() else b""
    return CellOutcome(task.cell_id, record, archive)


def _where() -> str:
    """Which worker runs this cell: its Dask worker's address on a cluster (one process there
    may hold several workers), else this machine and process."""
    if "distributed" in sys.modules:
        from distributed import get_worker

        try:
            return get_worker().address
        except ValueError:  # not in a Dask worker's task
            pass
    return f"{socket.gethostname()}:{os.getpid()}"


def _write_data(task: CellTask, blobs: Mapping[str, bytes], folder: Path) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for name, digest in task.files:
        if digest not in blobs:
            raise RuntimeError(f"the data of {name} did not reach this worker")
        path = folder / Path(name).name
        path.write_bytes(blobs[digest])
        paths.append(path)
    return paths


def _run_strategy(task: CellTask, paths: list[Path], out: Path) -> dict[str, Any]:
    from app.backtest.report import summary
    from app.config import PaperSettings
    from app.config.risk import RiskConfig
    from app.runtime.strategy_backtest import BacktestStopped, RunOptions, run_backtest_async
    from app.sweep.space import STRATEGY_TYPES

    strategy = STRATEGY_TYPES[task.strategy](**task.parameters)
    options = RunOptions(
        paper=PaperSettings(initial_cash=Decimal(task.cash), fee_rate=Decimal(task.fee),
                            slippage_bps=Decimal(task.slippage_bps)),
        risk=RiskConfig.model_validate(task.risk) if task.risk is not None else None,
        out_dir=out, allow_gaps=task.allow_gaps, report_partial=True,
    )
    try:
        result = asyncio.run(run_backtest_async(paths, strategy, options))
    except BacktestStopped as exc:
        return {"status": "failed", "error": _stopped(exc)}
    document = summary(result)
    return {"status": "ok", "error": None, **figures(document), **_span(document)}


def _run_agents(task: CellTask, paths: list[Path], out: Path) -> dict[str, Any]:
    from app.backtest.report import summary
    from app.config import LLMSettings
    from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest
    from app.runtime.strategy_backtest import BacktestStopped

    options = AgentBacktestOptions(
        templates=list(task.templates), cash=Decimal(task.cash), warmup_bars=task.warmup,
        bars=task.bars, llm=LLMSettings(**task.llm), allow_gaps=task.allow_gaps,
        blind=task.blind, template_settings=task.settings,
    )
    try:
        outcome = asyncio.run(run_agent_backtest(paths, options, out))
    except BacktestStopped as exc:
        return {"status": "failed", "error": _stopped(exc)}
    document = summary(outcome.result)
    record = {
        "status": "ok", "error": None, **figures(document), **_span(document),
        "llm_calls": outcome.llm_calls, "cost_usd": str(outcome.cost),
    }
    if outcome.faults:  # a faulted agent's silence is not a result: the cell failed
        record.update(status="faulted",
                      error="; ".join(f"{f.name} FAULTED: {f.reason}" for f in outcome.faults))
    return record


def _span(document: Mapping[str, Any]) -> dict[str, Any]:
    return {"bars": document.get("bars"), "start": document.get("start_iso"),
            "end": document.get("end_iso")}


def _stopped(exc: Any) -> str:
    """A stopped run in one line, pointing into the cell's own folder (the worker's temporary
    folder it names is gone)."""
    ran = f"it ran {exc.done:,} of {exc.total:,} bars"
    return f"{exc.reason}; {ran} (their report and {ERROR_FILE} are in the cell's folder)"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _keep_error(out: Path, exc: BaseException) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / ERROR_FILE).write_text("".join(traceback.format_exception(exc)), encoding="utf-8")


def _zip(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for here, _dirs, files in os.walk(folder):
            for name in sorted(files):
                path = Path(here) / name
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def unzip(archive: bytes, folder: Path) -> None:
    """Write a cell's zipped output into ``folder``, refusing a member that would land outside
    it (the archive came over the network from a worker)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not archive:
        return
    root = folder.resolve()
    with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
        for member in zipped.infolist():
            target = (folder / member.filename).resolve()
            if not target.is_relative_to(root) or member.filename.startswith("/"):
                raise ValueError(f"a cell's output names a file outside its folder: "
                                 f"{member.filename!r}")
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zipped.read(member))
