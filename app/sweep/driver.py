"""Drive a sweep: take up its folder, run the cells it lacks, keep each as it finishes, and write
the table.

A cell's record is stored the moment it arrives, so an interruption (Ctrl-C, a kill, a crash)
loses at most the cells that were running; the next run with the same options runs only those
and the ones never started. Where the cells run is decided by the caller (``executor``), and the
executor is started only when there is something to run: a finished sweep run again just
rewrites its table.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.sweep.executors import Executor
from app.sweep.space import SweepPlan
from app.sweep.store import SweepFolder
from app.sweep.table import OK, SweepTable, load_table, number, sort_key, write_table


class SweepInterrupted(Exception):  # noqa: N818 - the person's decision, not an error
    """The sweep was stopped; every cell that finished is kept and a rerun resumes."""

    def __init__(self, done: int, total: int, folder: Path) -> None:
        super().__init__(f"interrupted with {done} of {total} cells done and kept in {folder}; "
                         "run the same command again to run the rest")
        self.done, self.total, self.folder = done, total, folder


@dataclass
class SweepOutcome:
    table: SweepTable
    files: dict[str, Path]
    ran: int  # cells run now
    reused: int  # cells a previous run had finished
    label: str  # where the cells ran ("2 local processes", "the Dask cluster at ...")


class _Best:
    """The best finished cell so far, for the progress line."""

    def __init__(self, metric: str, higher: bool, columns: Sequence[str]) -> None:
        self.metric, self.higher, self.columns = metric, higher, columns
        self.value: float | None = None
        self.where = ""

    def offer(self, record: dict[str, Any]) -> None:
        value = number(record.get(self.metric))
        if record.get("status") != OK or value is None:
            return
        if self.value is None or (value > self.value if self.higher else value < self.value):
            self.value = value
            params = record.get("params", {})
            self.where = " ".join(f"{c}={params.get(c)}" for c in self.columns)

    def text(self) -> str:
        if self.value is None:
            return "best: none yet"
        return f"best {self.metric} {self.value:,.2f} ({self.where})"


def run_sweep(
    plan: SweepPlan,
    out: Path,
    executor: Callable[[], Executor],
    *,
    sort: str = "sharpe",
    heatmap: Sequence[str] | None = None,
    progress: bool = True,
    retry_failed: bool = False,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> SweepOutcome:
    """Run (or resume) ``plan`` into ``out`` and write its table.

    Raises:
        OutputFolderRefused, SweepRefused, SweepBusy: the folder cannot take this sweep.
        ClusterUnavailable: (from ``executor``) the cluster cannot be used.
        SweepInterrupted: Ctrl-C (or SIGTERM, where the caller turns it into
            ``KeyboardInterrupt``); what finished is kept and the table of it written.
    """
    metric, higher = sort_key(sort)
    folder = SweepFolder.open(out, plan)
    label = ""
    try:
        done = folder.done()
        if retry_failed:
            for cell_id, record in list(done.items()):
                if record.get("status") != OK:
                    folder.forget(cell_id)
                    del done[cell_id]
        best = _Best(metric, higher, plan.columns)
        for record in done.values():
            best.offer(record)
        todo = [c for c in plan.cells if c.task.cell_id not in done]
        labels = {c.task.cell_id: c.labels for c in plan.cells}
        for cell in todo:
            folder.prepare(cell.task.cell_id)
        ran = 0
        if todo:
            bar = _bar(len(plan.cells), len(done)) if progress else None
            run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
            runner: Executor | None = None
            try:
                runner = executor()
                label = runner.label
                if bar is not None:
                    bar.set_description(f"sweep on {runner.workers} worker"
                                        f"{'s' if runner.workers != 1 else ''}")
                    bar.set_postfix_str(best.text())
                failures = 0
                for outcome in runner.run([c.task for c in todo], plan.blobs):
                    record = folder.keep(outcome, labels[outcome.cell_id], run_id)
                    ran += 1
                    best.offer(record)
                    failures += record.get("status") != OK
                    if on_record is not None:
                        on_record(record)
                    if bar is not None:
                        failed = f"; {failures} failed" if failures else ""
                        bar.set_postfix_str(best.text() + failed, refresh=False)
                        bar.update(1)
            except KeyboardInterrupt:
                if runner is not None:
                    runner.close()
                    runner = None
                if bar is not None:
                    bar.close()
                    bar = None
                table = load_table(folder.root, sort)
                write_table(table, _usable(table, heatmap))
                raise SweepInterrupted(len(table.rows), len(plan.cells), folder.root) from None
            finally:
                if runner is not None:
                    runner.close()
                if bar is not None:
                    bar.close()
        table = load_table(folder.root, sort)
        files = write_table(table, heatmap)
        return SweepOutcome(table, files, ran, len(done), label)
    finally:
        folder.close()


def _usable(table: SweepTable, heatmap: Sequence[str] | None) -> Sequence[str] | None:
    """The heatmap asked for, if it names the sweep's parameters (an interrupted sweep still
    writes its table; a wrong --heatmap was refused before it started)."""
    if heatmap and all(name in table.columns for name in heatmap):
        return heatmap
    return None


def _bar(total: int, initial: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="cell", desc="sweep (starting): ",
                file=sys.stderr,
                mininterval=0.5, dynamic_ncols=True,
                bar_format="{desc}{n_fmt}/{total_fmt} cells |{bar}| {elapsed}<{remaining} "
                           "left{postfix}")
