"""``kestrel backtest`` through its handler: a good run writes the report; bad input is exit 2 with
one clear line naming the problem, and no report; a run that stops part-way is exit 1 with one line
saying why and where the report of the bars it ran is, never a traceback."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from app.backtest.strategy import BarContext
from app.cli import backtest as cli
from app.cli.backtest import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_STRATEGY_FAILED,
    STRATEGIES,
    add_backtest_arguments,
    backtest_command,
)
from app.domain.clock import ms_to_iso
from app.runtime.strategy_backtest import ERROR_FILE
from tests.integration.test_strategy_backtest import HOUR, START, write_candles, zigzag

HEADER = "timestamp_ms,open,high,low,close,volume"


def _run(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser(prog="kestrel backtest")
    add_backtest_arguments(parser)
    return backtest_command(parser.parse_args([str(a) for a in argv]))


def _rows(*stamps: int) -> list[str]:
    return [f"{s},100,101,99,100.5,3" for s in stamps]


def _file(tmp_path: Path, lines: list[str], header: str = HEADER) -> Path:
    path = tmp_path / "BTC-USDT_1h_bad.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def test_a_good_run_prints_the_summary_and_writes_every_report_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_candles(tmp_path / "BTC-USDT_1h_ok.csv", zigzag(120))
    out = tmp_path / "out"
    code = _run("--data", data, "--fast", "2", "--slow", "5", "--cash", "5000", "--out", out,
                "--no-progress")
    assert code == EXIT_OK
    printed = capsys.readouterr().out
    assert "buy & hold" in printed and "Sharpe" in printed
    for name in ("summary.json", "equity.csv", "trades.csv", "equity.png", "backtest.db"):
        assert (out / name).is_file(), name


BAD_FILES = {
    "gap": (_rows(START, START + HOUR, START + 3 * HOUR), HEADER, "gap of 2 bars"),
    "duplicate": (_rows(START, START + HOUR, START + HOUR), HEADER, "duplicate timestamp"),
    "unsorted": (_rows(START, START + 2 * HOUR, START + HOUR), HEADER, "out-of-order"),
    "header": (_rows(START, START + HOUR), "time,open,high,low,close,volume", "unexpected header"),
    "non-numeric": ([f"{START},100,101,99,abc,3"], HEADER, "field close: 'abc' is not a number"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_a_bad_data_file_is_exit_code_2_with_a_clear_error(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines, header, expected = BAD_FILES[kind]
    path = _file(tmp_path, lines, header)
    out = tmp_path / "out"
    assert _run("--data", path, "--out", out, "--no-progress") == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("kestrel backtest: bad data file: BTC-USDT_1h_bad.csv")
    assert expected in err
    assert "Traceback" not in err
    assert not (out / "summary.json").exists()


def test_a_missing_file_is_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run("--data", tmp_path / "BTC-USDT_1h_none.csv", "--out", tmp_path, "--no-progress")
    assert code == EXIT_BAD_INPUT
    assert "cannot open" in capsys.readouterr().err


def test_gaps_are_accepted_when_allowed(tmp_path: Path) -> None:
    stamps = [START + i * HOUR for i in range(60) if i != 30]
    path = _file(tmp_path, _rows(*stamps))
    assert _run("--data", path, "--out", tmp_path / "o", "--allow-gaps", "--no-progress") == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--fast", "30", "--slow", "10"), "fast < slow"),
        (("--cash", "0"), "--cash must be positive"),
        (("--fee", "1.5"), "--fee must be a fraction"),
    ],
)
def test_invalid_parameters_are_exit_code_2(
    argv: tuple[str, ...], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_candles(tmp_path / "BTC-USDT_1h_ok.csv", zigzag(50))
    assert _run("--data", data, "--out", tmp_path / "o", *argv) == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def test_a_risk_config_with_an_unknown_key_is_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_candles(tmp_path / "BTC-USDT_1h_ok.csv", zigzag(50))
    risk = tmp_path / "risk.yaml"
    risk.write_text("max_position_weight:\n  limit_percent: 50\n")
    assert _run("--data", data, "--out", tmp_path / "o", "--risk-config", risk) == EXIT_BAD_INPUT
    assert "invalid risk config" in capsys.readouterr().err


def test_a_risk_config_file_applies_its_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_candles(tmp_path / "BTC-USDT_1h_ok.csv", zigzag(120))
    risk = tmp_path / "risk.yaml"
    risk.write_text("max_position_weight:\n  limit_pct: 20\n")
    code = _run("--data", data, "--fast", "2", "--slow", "5", "--out", tmp_path / "o",
                "--risk-config", risk, "--no-progress")
    assert code == EXIT_OK
    assert "risk rejections: 0;" not in capsys.readouterr().out


def test_files_with_different_quote_currencies_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usdt = write_candles(tmp_path / "BTC-USDT_1h_a.csv", zigzag(50))
    btc = write_candles(tmp_path / "ETH-BTC_1h_b.csv", zigzag(50, 5.0, 7.0))
    assert _run("--data", usdt, "--data", btc, "--out", tmp_path / "o") == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "BTC/USDT is quoted in USDT, ETH/BTC is quoted in BTC" in err


def test_two_files_for_the_same_symbol_and_interval_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_candles(tmp_path / "BTC-USDT_1h_a.csv", zigzag(50))
    b = write_candles(tmp_path / "BTC-USDT_1h_b.csv", zigzag(50))
    assert _run("--data", a, "--data", b, "--out", tmp_path / "o") == EXIT_BAD_INPUT
    assert "two files for BTC/USDT 1h" in capsys.readouterr().err


class _Broken:
    name = "broken"

    def parameters(self) -> dict[str, object]:
        return {}

    async def on_bar(self, ctx: BarContext) -> None:
        await ctx.call("no call here, just prose")


def test_a_strategy_that_cannot_go_on_is_exit_code_1_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(STRATEGIES, "sma_cross", lambda args: _Broken())
    data = write_candles(tmp_path / "BTC-USDT_1h_ok.csv", zigzag(20))
    assert _run("--data", data, "--out", tmp_path / "o", "--no-progress") == 1
    err = capsys.readouterr().err
    assert "the strategy stopped: not a tool call" in err
    assert "It ran 0 of 20 bars; nothing to report;" in err and "Traceback" not in err
    assert (tmp_path / "o" / ERROR_FILE).is_file()


class _Faulty:
    """A strategy with a bug that shows at bar 15."""

    name = "faulty"

    def parameters(self) -> dict[str, object]:
        return {}

    async def on_bar(self, ctx: BarContext) -> None:
        if ctx.step == 15:
            raise ZeroDivisionError("division by zero in the strategy")


def test_an_unexpected_error_part_way_keeps_the_report_of_the_bars_that_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(STRATEGIES, "sma_cross", lambda args: _Faulty())
    data = write_candles(tmp_path / "BTC-USDT_1h_ok.csv", zigzag(40))
    out = tmp_path / "o"
    assert _run("--data", data, "--out", out, "--no-progress") == EXIT_STRATEGY_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "unexpected error (ZeroDivisionError: division by zero in the strategy)" in err
    assert f"It ran 15 of 40 bars, up to {ms_to_iso(START + 15 * HOUR)}" in err
    assert str(out) in err
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["bars"] == 15 and summary["stats"]["bars_planned"] == 40
    assert "ZeroDivisionError" in summary["stats"]["stopped_early"]
    for name in ("equity.csv", "trades.csv", "equity.png", "backtest.db"):
        assert (out / name).is_file(), name
    details = (out / ERROR_FILE).read_text(encoding="utf-8")
    assert "Traceback" in details and "on_bar" in details


def test_an_unexpected_error_outside_the_run_is_one_line_with_its_details_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object) -> None:
        raise KeyError("a bug before the first bar")

    monkeypatch.setattr(cli, "run_backtest", broken)
    data = write_candles(tmp_path / "BTC-USDT_1h_ok.csv", zigzag(40))
    assert _run("--data", data, "--out", tmp_path / "o") == EXIT_STRATEGY_FAILED
    err = capsys.readouterr().err
    assert err.startswith("kestrel backtest: the run failed on an unexpected error (KeyError:")
    assert "Traceback" not in err and f"details in {tmp_path / 'o' / ERROR_FILE}" in err
    assert "KeyError" in (tmp_path / "o" / ERROR_FILE).read_text(encoding="utf-8")


def test_an_output_folder_that_cannot_be_created_is_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_candles(tmp_path / "BTC-USDT_1h_ok.csv", zigzag(20))
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert _run("--data", data, "--out", blocker / "out", "--no-progress") == EXIT_BAD_INPUT
    assert "cannot write to" in capsys.readouterr().err
