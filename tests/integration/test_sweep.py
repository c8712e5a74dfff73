"""``kestrel sweep`` end to end: each cell is the very report ``kestrel backtest`` writes; a
2-worker Dask ``LocalCluster`` gives the same table as the local pool; a sweep killed with
SIGKILL half-way resumes and ends with every cell exactly once; a failing cell (or a worker
dying in one) is recorded while the others finish; agent settings, template sets and models are
swept; and every mistake on the command line is one sentence, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from app.sweep.driver import run_sweep
from app.sweep.executors import DaskCluster, InProcess, LocalPool
from app.sweep.space import SweepRequest, plan_sweep
from app.sweep.table import load_table, table_document
from tests.helpers.cli import run_main
from tests.helpers.eventually import eventually_blocking
from tests.helpers.files import tree
from tests.helpers.paths import BTC_USD_1H, BTC_USDT_1H, REPO
from tests.helpers.sweep_cells import DYING_CELL, dies_in_one_cell

TREND, TRADER = "AnalystAgent_Trend_v1", "TraderAgent_Default_v1"
MEAN = "AnalystAgent_MeanReversion_v1"
GRID = ("--grid", "fast=5,10,20", "--grid", "slow=30,50")
# what differs between two runs of the same cell: when and where it ran
RUN_FIELDS = frozenset({"seconds", "cpu_seconds", "worker", "run"})


def sweep(*argv: str | Path) -> int:
    return run_main(["sweep", *(str(a) for a in argv)])


def comparable(table_folder: Path) -> list[dict[str, Any]]:
    rows = table_document(load_table(table_folder))["rows"]
    return [{k: v for k, v in row.items() if k not in RUN_FIELDS} for row in rows]


def summary_without_timing(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    for key in ("seconds", "bars_per_second"):
        document["stats"].pop(key, None)
    return document


def test_each_cell_is_the_report_a_single_backtest_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    assert sweep("--data", BTC_USDT_1H, *GRID, "--out", out, "--workers", "2",
                 "--no-progress") == 0
    printed = capsys.readouterr().out
    assert "6 cell(s) ran on 2 local processes" in printed
    assert "Buy and hold of the same data: return -6.85%" in printed
    table = load_table(out)
    assert [r["status"] for r in table.rows] == ["ok"] * 6
    best = table.rows[0]
    assert run_main(["backtest", "--data", str(BTC_USDT_1H), "--fast", best["fast"], "--slow",
                     best["slow"], "--out", str(tmp_path / "single"), "--no-progress"]) == 0
    cell = out / best["folder"]
    assert summary_without_timing(cell / "summary.json") == \
        summary_without_timing(tmp_path / "single" / "summary.json")
    for name in ("equity.csv", "trades.csv"):
        assert (cell / name).read_bytes() == (tmp_path / "single" / name).read_bytes()
    single = json.loads((tmp_path / "single" / "summary.json").read_text(encoding="utf-8"))
    assert best["sharpe"] == single["strategy"]["sharpe"]
    assert best["bh_return_pct"] == single["buy_and_hold"]["total_return_pct"]
    assert sorted(p.name for p in (out / "cells").iterdir()) == [f"c000{i}" for i in range(1, 7)]
    assert (out / "heatmap.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_a_two_worker_local_cluster_gives_the_same_table_as_the_local_pool(
    tmp_path: Path
) -> None:
    distributed = pytest.importorskip("distributed")
    plan = plan_sweep(SweepRequest(data=[BTC_USDT_1H], grid=["fast=5,10,20", "slow=30,50"]))
    run_sweep(plan, tmp_path / "pool", lambda: LocalPool(2), progress=False)
    # the workers are threads of this process, but the cells and their reports go over TCP
    # as to a cluster elsewhere; two cells at once in one process also share no state
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  protocol="tcp://", dashboard_address=None) as cluster:
        outcome = run_sweep(plan, tmp_path / "cluster",
                            lambda: DaskCluster(cluster.scheduler_address), progress=False)
        both = {w.address for w in cluster.workers.values()}
    assert outcome.label.endswith("(2 workers)") and outcome.ran == 6
    assert cluster.scheduler_address.startswith("tcp://")
    workers = {json.loads(p.read_text(encoding="utf-8"))["worker"]
               for p in (tmp_path / "cluster" / "results").glob("*.json")}
    assert workers == both  # each worker ran cells
    assert comparable(tmp_path / "cluster") == comparable(tmp_path / "pool")
    for cell in (tmp_path / "pool" / "cells").iterdir():
        assert summary_without_timing(cell / "summary.json") == summary_without_timing(
            tmp_path / "cluster" / "cells" / cell.name / "summary.json")


@pytest.mark.slow
def test_a_sweep_killed_half_way_resumes_and_runs_every_cell_exactly_once(
    tmp_path: Path
) -> None:
    out = tmp_path / "sweep"
    command = [sys.executable, "-m", "app", "sweep", "--data", str(BTC_USDT_1H),
               "--grid", "fast=5,10,15,20", "--grid", "slow=30,40,50,60",
               "--set", "window=2019-10-01..2019-10-20", "--out", str(out), "--workers", "2",
               "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        driver = psutil.Process(first.pid)
        results = out / "results"

        def finished() -> list[Path]:
            return sorted(results.glob("c*.json")) if results.is_dir() else []

        eventually_blocking(lambda: len(finished()) >= 4, 240, what="4 cells finished")
        workers = driver.children(recursive=True)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()
    # the workers end with their driver: nobody computes cells for a dead sweep
    eventually_blocking(lambda: not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE
                                        for w in workers), what="the workers ended")
    kept = {p.name: p.read_bytes() for p in (out / "results").glob("c*.json")}
    assert 4 <= len(kept) < 16, "the sweep was not killed half-way"

    resumed = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(kept)} cell(s) had finished before and were kept; {16 - len(kept)} ran " \
           "now" in resumed.stdout
    records = {p.name: p.read_bytes() for p in (out / "results").glob("*.json")}
    assert sorted(records) == [f"c{i:04d}.json" for i in range(1, 17)]
    for name, content in kept.items():
        assert records[name] == content  # a finished cell is never run again
    runs = {json.loads(content)["run"] for content in records.values()}
    assert len(runs) == 2
    assert sorted(p.name for p in (out / "cells").iterdir()) == [
        f"c{i:04d}" for i in range(1, 17)]
    assert not [p for p in out.rglob("*") if p.name.endswith((".partial", ".tmp"))]
    table = load_table(out)
    assert len(table.rows) == 16 == len({r["cell"] for r in table.rows})
    assert all(r["status"] == "ok" for r in table.rows)


def test_a_failing_cell_is_recorded_with_its_error_and_the_others_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    mixed = f"{BTC_USDT_1H}+{BTC_USD_1H}"  # two quote currencies cannot share an account
    argv = ["--grid", f"data={BTC_USDT_1H},{mixed}", "--grid", "fast=5,10", "--set",
            "slow=30", "--out", out, "--workers", "2", "--no-progress"]
    assert sweep(*argv) == 1
    printed = capsys.readouterr().out
    assert "FAILED c0003" in printed and "quote currency" in printed
    table = load_table(out)
    assert [r["status"] for r in table.rows] == ["ok", "ok", "failed", "failed"]
    failed = table.rows[-1]
    assert "share one quote currency" in failed["error"]
    assert (out / failed["folder"] / "error.txt").is_file()
    runs = {r["cell"]: json.loads((out / "results" / f"{r['cell']}.json").read_text(
        encoding="utf-8"))["run"] for r in table.rows}

    assert sweep(*argv) == 1  # finished cells, failed ones too, are not run again
    assert "All 4 cells had finished before" in capsys.readouterr().out
    assert sweep(*argv, "--retry-failed") == 1
    again = {r["cell"]: json.loads((out / "results" / f"{r['cell']}.json").read_text(
        encoding="utf-8"))["run"] for r in load_table(out).rows}
    assert again["c0001"] == runs["c0001"] and again["c0003"] != runs["c0003"]


def test_the_progress_bar_shows_cells_done_time_left_and_the_best_so_far(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = plan_sweep(SweepRequest(data=[BTC_USDT_1H], grid=["fast=5,10"], fixed=["slow=30"]))
    outcome = run_sweep(plan, tmp_path / "sweep", InProcess, progress=True)
    best = outcome.table.rows[0]
    shown = capsys.readouterr().err.splitlines()[-1]
    assert shown.startswith("sweep on 1 worker") and "2/2 cells" in shown
    assert "<00:00 left" in shown  # nothing left to run
    assert f"best sharpe {best['sharpe']:,.2f} (fast={best['fast']})" in shown


def test_a_worker_dying_in_a_cell_fails_that_cell_alone(tmp_path: Path) -> None:
    plan = plan_sweep(SweepRequest(data=[BTC_USDT_1H], grid=["fast=5,10,15,20"],
                                   fixed=["slow=30"]))
    outcome = run_sweep(plan, tmp_path / "sweep",
                        lambda: LocalPool(2, function=dies_in_one_cell), progress=False)
    status = {r["cell"]: (r["status"], r.get("error") or "") for r in outcome.table.rows}
    assert status[DYING_CELL][0] == "failed"
    assert "worker process died" in status[DYING_CELL][1]
    assert [s for cell, (s, _e) in status.items() if cell != DYING_CELL] == ["ok"] * 3


def test_agent_settings_and_template_sets_are_swept_into_each_cells_agents(
    tmp_path: Path
) -> None:
    out = tmp_path / "sweep"
    plan = plan_sweep(SweepRequest(
        data=[BTC_USDT_1H], grid=[f"agents={TREND}+{TRADER},{MEAN}+{TRADER}",
                                  "rsi_period=10,21", f"{TRADER}.risk_per_trade_pct=1.5"],
        warmup=60, bars=8))
    outcome = run_sweep(plan, out, InProcess, progress=False)
    assert [r["status"] for r in outcome.table.rows] == ["ok"] * 4
    assert outcome.table.columns == ["agents", "rsi_period",
                                     f"{TRADER}.risk_per_trade_pct"]
    for row in outcome.table.rows:
        with sqlite3.connect(out / row["folder"] / "workspace" / "kestrel.db") as db:
            configs = dict(db.execute("SELECT template, config_json FROM agents").fetchall())
        analyst = row["agents"].split("+")[0]
        assert sorted(configs) == sorted(row["agents"].split("+"))
        assert json.loads(configs[analyst])["rsi_period"] == int(row["rsi_period"])
        assert json.loads(configs[TRADER])["risk_per_trade_pct"] == "1.5"
        assert row["llm_calls"] == 0 and row["bars"] == 9


def test_language_models_are_swept_after_their_cost_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.fake_llm_servers import FakeOpenAIServer
    from tests.helpers.prompt_rule_model import PromptRuleModel

    out = tmp_path / "sweep"
    with FakeOpenAIServer(default=PromptRuleModel()) as server:
        argv = ["--data", BTC_USDT_1H, "--agents", TREND, TRADER, "--provider",
                "openai-compatible", "--base-url", server.base_url, "--grid",
                "model=gpt-4o,gpt-4o-mini", "--warmup", "100", "--bars", "2", "--out", out,
                "--workers", "2", "--no-progress"]
        assert sweep(*argv) == 1
        said = capsys.readouterr()
        assert "2 cell(s) call a language model" in said.out and "--yes" in said.err
        assert not out.exists()
        assert sweep(*argv, "--yes") == 0
    table = load_table(out)
    assert sorted(r["model"] for r in table.rows) == ["gpt-4o", "gpt-4o-mini"]
    for row in table.rows:
        assert row["status"] == "ok" and row["llm_calls"] > 0
        with sqlite3.connect(out / row["folder"] / "workspace" / "kestrel.db") as db:
            models = {m for (m,) in db.execute("SELECT DISTINCT model FROM agents")}
        assert models == {row["model"]}


# -- what the person typed wrong ----------------------------------------------------------------
@pytest.mark.parametrize(("argv", "says"), [
    (["--grid", "fast=5,,10"], "an empty value"),
    (["--grid", "fast"], "write NAME=VALUE"),
    (["--grid", "fast=5", "--grid", "fast=10"], "fast is given twice"),
    (["--grid", "fsat=5,10"], "sma_cross has no parameter 'fsat' (did you mean fast?)"),
    (["--grid", "fast=5", "--strategy", "rsi_magic"], "unknown strategy 'rsi_magic'; known: "
                                                      "sma_cross"),
    (["--grid", "rsi_period=10", "--agents", "Nope_v1"], "unknown agent template(s) Nope_v1"),
    (["--grid", "rsi_period=1", "--agents", TREND], "rsi_period must be between 2 and 100"),
    (["--grid", "fast=5", "--sort", "luck"], "cannot sort by 'luck'"),
    (["--grid", "fast=5", "--heatmap", "fast,slow"], "--heatmap takes two of the swept"),
    (["--grid", "fast=5", "--cash", "-5"], "--cash must be positive"),
    (["--grid", "fast=5", "--cluster", "tcp://h:8786", "--workers", "2"], "give one of them"),
    ([], "a sweep needs at least one --grid"),
])
def test_a_mistake_on_the_command_line_is_one_sentence_and_nothing_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    out = tmp_path / "sweep"
    assert sweep("--data", BTC_USDT_1H, *argv, "--out", out, "--no-progress") == 2
    said = capsys.readouterr()
    assert said.err.startswith("kestrel sweep: ") and says in said.err
    assert len(said.err.strip().splitlines()) == 1 and "Traceback" not in said.err
    assert not out.exists()


def test_a_cluster_without_dask_installed_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if it were not installed
    out = tmp_path / "sweep"
    assert sweep("--data", BTC_USDT_1H, "--grid", "fast=5", "--cluster", "tcp://h:8786",
                 "--out", out) == 2
    said = capsys.readouterr().err
    assert "--cluster needs dask.distributed" in said and "kestrel[cluster]" in said
    assert "Traceback" not in said and not out.exists()


def test_resuming_with_another_grid_is_refused_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    assert sweep("--data", BTC_USDT_1H, "--grid", "fast=5,10", "--set", "slow=30", "--out",
                 out, "--workers", "1", "--no-progress") == 0
    before = tree(out)
    capsys.readouterr()
    assert sweep("--data", BTC_USDT_1H, "--grid", "fast=5,20", "--set", "slow=30", "--out",
                 out, "--workers", "1", "--no-progress") == 2
    said = capsys.readouterr().err
    assert f"{out} holds another sweep (its fast is 5, 10, not 5, 20)" in said
    assert "Traceback" not in said
    assert tree(out) == before


def test_a_workspace_or_another_commands_folder_is_never_a_sweeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kestrel.db").write_bytes(b"")
    assert sweep("--data", BTC_USDT_1H, "--grid", "fast=5", "--out", workspace) == 2
    assert "is a Kestrel workspace" in capsys.readouterr().err
    assert run_main(["backtest", "--data", str(BTC_USDT_1H), "--out", str(tmp_path / "bt"),
                     "--no-progress"]) == 0
    capsys.readouterr()
    assert sweep("--data", BTC_USDT_1H, "--grid", "fast=5", "--out", tmp_path / "bt") == 2
    assert "holds the output of kestrel backtest" in capsys.readouterr().err
