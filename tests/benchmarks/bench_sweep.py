"""Benchmark: cells per minute of ``kestrel sweep`` on 1 and 2 local workers and on a 2-worker Dask
``LocalCluster``, against the same cells run one by one.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_sweep.py [--cells 8] [--window 2017-07-01..2018-07-01]

or ``pytest tests/benchmarks/bench_sweep.py -s``.

The cells are ``sma_cross`` backtests over a year of the bundled Coinbase BTC/USD hourly candles
(8,760 bars each), ``fast`` varying and ``slow`` 60, each with its whole report (summary, equity
and trades CSVs, chart, ledger) as ``kestrel backtest`` writes it. The baseline is what a person
without ``kestrel sweep`` does: one ``kestrel backtest`` after another, each a fresh process (its
start-up included). Also shown, the same cells one after another in one process (``InProcess``:
the backtests' own work, no start-up). Then ``kestrel sweep`` itself, a fresh process each time
as a person runs it, on local processes (``--workers 1``, ``--workers 2``; its start-up and its
pool's included) and with ``--cluster`` on a ``LocalCluster`` of 2 worker processes with one
thread each (the cluster is started before the clock starts, as an existing cluster would be;
connecting to it is timed). Every sweep's table must equal the one-process table.
Each way runs ``--repeats`` times (2), in turn, and keeps its best rate, so a burst of other
work on the machine falls on one run of each rather than on every run of one; the load average
is printed with the numbers. Ratios are cells per minute over the baseline's; each cell's own
wall and processor seconds are shown too: where the wall time is well above the processor time,
the cell waited for a processor (2 workers on 2 cores shared with other work can give at most
2x the one-process rate, and less the busier the machine is).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from app.sweep.driver import run_sweep  # noqa: E402
from app.sweep.executors import InProcess  # noqa: E402
from app.sweep.space import SweepPlan, SweepRequest, plan_sweep  # noqa: E402
from app.sweep.table import load_table, table_document  # noqa: E402

pytestmark = pytest.mark.benchmark
SOURCE = REPO / "resources" / "sample_data" / "BTC-USD_1h_20170701-20191017_coinbase.csv"
FAST = (5, 8, 10, 12, 15, 20, 25, 30, 35, 40, 45, 50)
SLOW = 60
RUN_FIELDS = frozenset({"seconds", "cpu_seconds", "worker", "run"})
REPEATS = 2  # each way is run this many times, alternating, and its best rate kept


def sweep_options(cells: int, window: str) -> tuple[list[str], list[str]]:
    """The grid and the fixed parameters, as ``--grid`` and ``--set`` take them."""
    return [f"fast={','.join(str(f) for f in FAST[:cells])}"], [f"slow={SLOW}",
                                                                 f"window={window}"]


def make_plan(cells: int, window: str) -> SweepPlan:
    grid, fixed = sweep_options(cells, window)
    return plan_sweep(SweepRequest(data=[SOURCE], grid=grid, fixed=fixed))


def one_by_one(plan: SweepPlan, folder: Path) -> float:
    """Each cell as its own ``kestrel backtest`` process, one after another; the seconds."""
    data = folder / "data"
    data.mkdir(parents=True)
    started = time.perf_counter()
    for cell in plan.cells:
        (name, digest), = cell.task.files
        path = data / digest[:12] / name
        if not path.exists():
            path.parent.mkdir()
            path.write_bytes(plan.blobs[digest])
        params = cell.task.parameters
        subprocess.run(  # noqa: S603 - this interpreter running kestrel
            [sys.executable, "-m", "app", "backtest", "--data", str(path), "--fast",
             str(params["fast"]), "--slow", str(params["slow"]), "--out",
             str(folder / cell.task.cell_id), "--no-progress"],
            cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - started


BASELINE = "one by one (kestrel backtest each)"


def swept(plan: SweepPlan, folder: Path, how: list[str] | None,
          options: tuple[list[str], list[str]]) -> tuple[float, list[dict[str, Any]]]:
    """Run the sweep (``how``: ``kestrel sweep``'s options saying where, in a process of its
    own; None: in this process, one cell after another); its seconds and its rows (with each
    cell's own timings)."""
    grid, fixed = options
    command = [sys.executable, "-m", "app", "sweep", "--data", str(SOURCE),
               *(a for g in grid for a in ("--grid", g)),
               *(a for f in fixed for a in ("--set", f)), "--out", str(folder), "--no-progress"]
    started = time.perf_counter()
    if how is None:
        run_sweep(plan, folder, InProcess, progress=False)
    else:
        subprocess.run([*command, *how], cwd=REPO, check=True,  # noqa: S603
                       capture_output=True)
    seconds = time.perf_counter() - started
    return seconds, table_document(load_table(folder))["rows"]


def without_timing(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in RUN_FIELDS} for r in rows]


@dataclass
class Way:
    """One way of running the cells: its best rate over the repeats and its cells' timings."""

    rate: float = 0.0  # cells per minute, the best of the repeats
    cell_s: list[float] = field(default_factory=list)  # wall seconds inside each cell
    cell_cpu_s: list[float] = field(default_factory=list)  # processor seconds of each cell


def bench(cells: int, window: str, repeats: int = REPEATS) -> dict[str, Way]:
    """Each way of running the cells, ``repeats`` times in turn (so a burst of other work on
    the machine falls on one run of each, not on all runs of one)."""
    from distributed import LocalCluster

    plan = make_plan(cells, window)
    count = len(plan.cells)
    ways: dict[str, Way] = {}
    reference: list[dict[str, Any]] | None = None
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, worker_dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        executors: dict[str, list[str] | None] = {
            "one process, one after another": None,
            "sweep --workers 1": ["--workers", "1"],
            "sweep --workers 2": ["--workers", "2"],
            "sweep --cluster (LocalCluster, 2 workers)": ["--cluster", address],
        }
        for repeat in range(repeats):
            with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
                root = Path(tmp)
                way = ways.setdefault(BASELINE, Way())
                way.rate = max(way.rate, count / one_by_one(plan, root / "single") * 60)
                for index, (name, executor) in enumerate(executors.items()):
                    seconds, rows = swept(plan, root / f"sweep-{repeat}-{index}", executor,
                                          sweep_options(cells, window))
                    reference = reference or without_timing(rows)
                    assert without_timing(rows) == reference, f"{name} gave another table"
                    way = ways.setdefault(name, Way())
                    way.rate = max(way.rate, count / seconds * 60)
                    way.cell_s += [r["seconds"] for r in rows]
                    way.cell_cpu_s += [r["cpu_seconds"] for r in rows]
    return ways


def report(ways: dict[str, Way], cells: int, window: str, load: tuple[float, ...]) -> str:
    baseline = ways[BASELINE].rate
    lines = [f"{cells} sma_cross cells over {window} of {SOURCE.name}; best of {REPEATS} runs "
             f"each; load average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after, on "
             f"{os.cpu_count()} processors", "",
             f"{'':<44}{'cells/min':>10}{'vs one by one':>15}{'cell s':>9}{'cell cpu s':>12}"]
    for name, way in ways.items():
        inside = (f"{statistics.median(way.cell_s):>9.2f}"
                  f"{statistics.median(way.cell_cpu_s):>12.2f}") if way.cell_s else ""
        lines.append(f"{name:<44}{way.rate:>10.1f}{way.rate / baseline:>14.2f}x{inside}")
    lines += ["", "cell s / cell cpu s: the median wall and processor seconds one cell took "
                  "where it ran (start-up and transfer excluded); where wall is well above "
                  "processor time, the cell waited for a processor"]
    return "\n".join(lines)


def test_every_way_of_running_the_cells_gives_the_same_table() -> None:
    """Prints the cells per minute of each way; the rates depend on the machine and what else
    it runs, so only the tables are checked (``bench`` compares each with the first)."""
    pytest.importorskip("distributed")
    load = os.getloadavg()
    ways = bench(8, "2017-07-01..2018-07-01")
    print("\n" + report(ways, 8, "2017-07-01..2018-07-01", load))
    assert sorted(ways) == sorted([BASELINE, "one process, one after another",
                                   "sweep --workers 1", "sweep --workers 2",
                                   "sweep --cluster (LocalCluster, 2 workers)"])
    assert all(len(way.cell_s) == 8 * REPEATS for name, way in ways.items() if name != BASELINE)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=8, choices=range(2, len(FAST) + 1),
                        metavar=f"2..{len(FAST)}")
    parser.add_argument("--window", default="2017-07-01..2018-07-01")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    options = parser.parse_args()
    REPEATS = options.repeats
    before = os.getloadavg()
    print(report(bench(options.cells, options.window, options.repeats), options.cells,
                 options.window, before))
