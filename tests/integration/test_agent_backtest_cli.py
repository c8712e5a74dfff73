"""``kestrel backtest --agents`` on real data with gaps: it says how many candles were missing, and
an error part-way is one line saying why and where the report of the bars that ran is, never a
traceback; a run the person cancels returns what it ran and writes no report."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.cli.backtest import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STRATEGY_FAILED,
    add_backtest_arguments,
    backtest_command,
)
from app.domain.clock import ms_to_iso
from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest
from app.runtime.replay import ReplayDriver
from app.runtime.strategy_backtest import ERROR_FILE
from tests.helpers.eventually import eventually_blocking
from tests.helpers.paths import BTC_USD_1D, BTC_USDT_1H, REPO
from tests.integration.test_backtest_gaps import GAP_ROW, TRADER, TREND, closes_of

AGENTS = ("--agents", TREND, TRADER)
NEAR_THE_GAP = ("--warmup", str(GAP_ROW - 20), "--bars", "40")


def _run(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser(prog="kestrel backtest")
    add_backtest_arguments(parser)
    return backtest_command(parser.parse_args([str(a) for a in argv]))


def fail_at_the_eleventh_step(monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    """Make the 11th step after the start of a NEAR_THE_GAP run fail as an unexpected error;
    the file's close times."""
    closes = closes_of(BTC_USD_1D)
    fatal = int(closes[GAP_ROW - 20 + 11])
    advance = ReplayDriver.advance_to

    def failing(self: ReplayDriver, now_ms: int) -> int:
        if now_ms == fatal:
            raise IndexError("index 11 is out of bounds")
        return advance(self, now_ms)

    monkeypatch.setattr(ReplayDriver, "advance_to", failing)
    return closes


def test_an_agent_run_over_missing_days_says_how_many_candles_were_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = _run(*AGENTS, "--allow-gaps", "--data", BTC_USD_1D, *NEAR_THE_GAP, "--out", out,
                "--no-progress")
    printed = capsys.readouterr()
    assert code == EXIT_OK, printed.err
    assert "The data lacks 12 candles within the run (BTC/USD 12); the clock stepped over them" \
        in printed.out
    assert json.loads((out / "summary.json").read_text())["stats"]["missing_candles"] == {
        "BTC/USD": 12}


def test_an_agent_run_over_data_with_gaps_is_refused_without_allow_gaps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(*AGENTS, "--data", BTC_USD_1D, "--out", tmp_path / "out", "--no-progress")
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert err.startswith("kestrel backtest: bad data file: BTC-USD_1d_20141201-20191017_")
    assert "gap of 13 bars" in err and "Traceback" not in err


def test_an_error_part_way_through_an_agent_run_keeps_the_report_of_the_bars_that_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    closes = fail_at_the_eleventh_step(monkeypatch)
    out = tmp_path / "out"
    code = _run(*AGENTS, "--allow-gaps", "--data", BTC_USD_1D, *NEAR_THE_GAP, "--out", out,
                "--no-progress")
    err = capsys.readouterr().err
    assert code == EXIT_STRATEGY_FAILED
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "unexpected error (IndexError: index 11 is out of bounds)" in err
    assert f"It ran 10 of 40 bars, up to {ms_to_iso(int(closes[GAP_ROW - 20 + 10]))}" in err
    assert str(out) in err
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["bars"] == 11  # the start and the ten bars that ran
    assert summary["stats"]["bars_run"] == 10 and summary["stats"]["bars_planned"] == 40
    assert "IndexError" in (out / ERROR_FILE).read_text(encoding="utf-8")


def test_an_agent_run_shows_its_progress_with_its_speed_and_the_time_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(*AGENTS, "--allow-gaps", "--data", BTC_USD_1D, *NEAR_THE_GAP,
                "--out", tmp_path / "out")
    printed = capsys.readouterr()
    assert code == EXIT_OK, printed.err
    final = printed.err.split("\r")[-1]  # the line as it is left on the terminal
    assert final.startswith("backtest agents: 100%") and "40/40" in final
    assert re.search(r"\[\d\d:\d\d<00:00, +[\d.]+(bar/s|s/bar)\]", final), final
    assert "backtest agents" not in printed.out  # the report on stdout stays clean


def test_an_agent_runs_workspace_is_its_output_and_is_not_copied_into_backups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy doubled the run's size on disk (800 MB for two years of hourly bars) and added
    seconds to its end; running it again makes the same workspace."""
    out = tmp_path / "out"
    code = _run(*AGENTS, "--allow-gaps", "--data", BTC_USD_1D, *NEAR_THE_GAP, "--out", out,
                "--no-progress")
    assert code == EXIT_OK, capsys.readouterr().err
    assert (out / "workspace" / "kestrel.db").stat().st_size > 0
    assert list(out.rglob("kestrel-*.db")) == []


def test_an_error_part_way_is_printed_on_its_own_line_under_the_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_at_the_eleventh_step(monkeypatch)
    code = _run(*AGENTS, "--allow-gaps", "--data", BTC_USD_1D, *NEAR_THE_GAP,
                "--out", tmp_path / "out")
    lines = capsys.readouterr().err.splitlines()
    assert code == EXIT_STRATEGY_FAILED
    (error,) = [line for line in lines if "unexpected error" in line]
    assert error.startswith("kestrel backtest: ")
    assert "10/40" in lines[lines.index(error) - 1].split("\r")[-1]  # where it stopped


def test_a_cancelled_agent_run_returns_the_bars_it_ran_and_writes_no_report(
    tmp_path: Path,
) -> None:
    seen: list[int] = []
    options = AgentBacktestOptions(
        templates=[TREND, TRADER], progress=lambda done, _total: seen.append(done),
        cancelled=lambda: len(seen) >= 12,
    )
    out = tmp_path / "out"
    outcome = asyncio.run(run_agent_backtest([BTC_USDT_1H], options, out))
    assert outcome.result.time_ms.size == 13
    assert outcome.result.stats["stopped_early"] == "cancelled"
    assert outcome.files == {} and not (out / "summary.json").exists()


def _ctrl_c_reaches_it() -> None:
    """In the child, before it starts: Ctrl-C as a terminal's shell leaves it (the default
    action, unblocked), whatever the test process inherited or an earlier test in it set."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_during_an_agent_run_keeps_the_report_of_the_bars_that_ran(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = subprocess.Popen(  # noqa: S603 - our own command line
        [sys.executable, "-m", "app", "backtest", *AGENTS, "--data", str(BTC_USDT_1H),
         "--out", str(out), "--no-progress"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_ctrl_c_reaches_it,  # noqa: PLW1509 - two signal calls, no locks taken
    )
    try:
        db = out / "workspace" / "kestrel.db"
        # until the agents have analysed a few bars (or the run ended before, which fails below)
        eventually_blocking(
            lambda: run.poll() is not None or (db.exists() and _analyses(db) >= 5))
        assert run.poll() is None, run.communicate()
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == EXIT_INTERRUPTED, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines() == [
        f"kestrel backtest: interrupted; the report of the bars that ran (if any) is in {out}"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["stats"]["stopped_early"] == "interrupted"
    assert 5 <= summary["stats"]["bars_run"] < 525 - 1


def _analyses(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
    try:
        return int(conn.execute(
            "SELECT COUNT(*) FROM tasks WHERE task_type='RUN_ANALYSIS' AND status='DONE'"
        ).fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0
    finally:
        conn.close()
