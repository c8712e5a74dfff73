"""Every command the README shows works as the README says: each one runs here as a real subprocess.

The commands are read from the README's fenced ``bash`` blocks and each must have an entry in
``COMMANDS`` (and each entry a command in the README), so a command added to the README without a
test, or changed without its test, fails here. The commands run as written with three changes, so
the test touches nothing outside its temporary folder and takes seconds: ``.venv/bin/kestrel`` and
``.venv/bin/python`` become the interpreter running the tests, ``/tmp/ws…`` and ``backtest-out``
move into the test's folder, and a command may get extra options at its end (a workspace where the
README uses the checkout's own, a faster replay speed). The two set-up commands install the
project; they are what ``.ci/run`` runs verbatim, and the window cannot open without a display, so
those are checked as described in their entries.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

README = REPO / "README.md"
Check = Callable[[subprocess.CompletedProcess[str], Path], None]


def readme_commands() -> list[str]:
    """The commands of the README's ``bash`` blocks: continuations joined, comments dropped."""
    text = README.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s{2,}#\s.*$", "", line).strip()
            if line:
                commands.append(re.sub(r"\s+", " ", line))
    return commands


@dataclass(frozen=True)
class Entry:
    """How one README command is run here and what it must do."""

    check: Check
    extra: str = ""  # options appended to the command
    run: bool = True  # False: the command is checked without running it (see ``check``)
    stdin: str | None = None
    env: dict[str, str | None] = field(default_factory=dict)  # None removes the variable


def ok(*expected: str) -> Check:
    def check(done: subprocess.CompletedProcess[str], _tmp: Path) -> None:
        assert done.returncode == 0, done.stderr
        for text in expected:
            assert text in done.stdout, (text, done.stdout[-2000:])
        assert "Traceback" not in done.stderr, done.stderr

    return check


def runs_in_ci(*parts: str) -> Check:
    def check(_done: subprocess.CompletedProcess[str], _tmp: Path) -> None:
        ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
        for part in parts:
            assert part in ci, f".ci/run does not run {part!r}"

    return check


def no_display(done: subprocess.CompletedProcess[str], tmp: Path) -> None:
    assert done.returncode == 3
    assert "no display" in done.stderr and "kestrel chat" in done.stderr
    runs_in_ci("bash scripts/bootstrap")(done, tmp)


def chat(done: subprocess.CompletedProcess[str], _tmp: Path) -> None:
    ok("Talking to Orchestrator", "Try: watch BTC/USD on 1h")(done, _tmp)
    assert "1970" not in done.stdout


def run_setup(done: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok("Offline replay from 2019-10-02T19:00:00Z", "Balances: USDT 10000")(done, tmp)
    out = done.stdout
    assert "0 bars visible" not in out and "no analysis" not in out, out
    analyses = re.findall(r"BTC/USDT 1h Trend Analyst: BTC/USDT 1h: (HOLD|BUY|SELL)", out)
    assert len(analyses) >= 12, out  # one every hour of the 12, each over real candles
    assert "Market time now 2019-10-03T07:00:00Z" in out


def agent_backtest(done: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok("buy & hold", "built-in rule engine (not an LLM)")(done, tmp)
    summary = json.loads((tmp / "backtest-out" / "agents" / "summary.json").read_text())
    assert summary["bars"] == 585 - 60  # after the warm-up
    # the rule engine decided everything; no language model was called
    assert summary["stats"]["rule_engine_decisions"] > 0 and summary["stats"]["llm_calls"] == 0


def strategy_backtest(done: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok("buy & hold", "20111 bars")(done, tmp)
    for name in ("summary.json", "equity.csv", "trades.csv", "equity.png", "backtest.db"):
        assert (tmp / "backtest-out" / "sma" / name).is_file(), name


def strategy_sweep(done: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok("6 cell(s) ran on", "Best by sharpe", "Buy and hold of the same data")(done, tmp)
    out = tmp / "backtest-out" / "sweep"
    with (out / "results.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6 and {(r["fast"], r["slow"]) for r in rows} == {
        (f, s) for f in ("5", "10", "20") for s in ("30", "50")}
    assert {r["status"] for r in rows} == {"ok"}
    assert (out / "heatmap.png").is_file()
    for row in rows:
        assert (out / row["folder"] / "summary.json").is_file()


def agents_sweep(done: subprocess.CompletedProcess[str], tmp: Path) -> None:
    ok("6 cell(s) ran on", "Best by sharpe")(done, tmp)
    document = json.loads((tmp / "backtest-out" / "sweep-agents" / "results.json").read_text())
    assert document["parameters"] == ["rsi_period", "window"] and document["failed"] == 0
    assert {r["rsi_period"] for r in document["rows"]} == {10, 14, 21}


def cluster_sweep(_done: subprocess.CompletedProcess[str], _tmp: Path) -> None:
    """The cluster command needs a scheduler at HOST (test_sweep runs a real LocalCluster): here
    its options are checked as kestrel reads them."""
    from app.cli.main import build_parser

    command = next(c for c in readme_commands() if "--cluster" in c)
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert args.command == "sweep" and args.cluster == "tcp://HOST:8786"
    assert args.grid == ["fast=5:50:5", "slow=60:200:20"]


def refused_and_kept(*said: str) -> Check:
    """Refused with exit 2 and its reason, the workspace /tmp/ws (the README's earlier commands
    placed an order and wrote a note there) still whole."""

    def check(done: subprocess.CompletedProcess[str], tmp: Path) -> None:
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        for text in said:
            assert text in done.stderr, (text, done.stderr)
        ws = tmp / "ws"
        assert (ws / "memory" / "analyst-1" / "notes" / "plan.md").is_file()
        assert not list(ws.glob("kestrel.db.damaged-*")), "nothing was restored"
        conn = sqlite3.connect(ws / "kestrel.db")
        try:
            assert conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0] >= 1
        finally:
            conn.close()

    return check


def envelope(status: str, *expected: str) -> Check:
    def check(done: subprocess.CompletedProcess[str], _tmp: Path) -> None:
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"<status>{status}</status>" in done.stdout
        for text in expected:
            assert text in done.stdout, (text, done.stdout)

    return check


def built_and_checked(_done: subprocess.CompletedProcess[str], _tmp: Path) -> None:
    """The executable the README names is where the build puts it and what the checks run."""
    build = (REPO / "packaging" / "build.sh").read_text(encoding="utf-8")
    check = (REPO / "packaging" / "check.sh").read_text(encoding="utf-8")
    spec = (REPO / "packaging" / "kestrel.spec").read_text(encoding="utf-8")
    assert '--distpath "$OUT/dist"' in build and "OUT=packaging/build\n" in build
    assert 'name="kestrel"' in spec and "BIN=$OUT/dist/kestrel/kestrel" in build
    assert "BIN=packaging/build/dist/kestrel/kestrel" in check
    assert 'bash packaging/check.sh --python "$PY" "$BIN"' in build
    runs_in_ci("bash packaging/build.sh")(_done, _tmp)


def desktop_entry_installs(_done: subprocess.CompletedProcess[str], tmp: Path) -> None:
    """The script the README names, run in a stand-in for the bundle's folder (the built
    bundle's is run by packaging/check.sh in CI): the menu entry runs that folder's kestrel."""
    bundle = tmp / "bundle folder"
    bundle.mkdir()
    for source in [*(REPO / "packaging" / "linux").iterdir(),
                   *(REPO / "resources" / "icons").iterdir()]:
        (bundle / source.name).write_bytes(source.read_bytes())
        (bundle / source.name).chmod(source.stat().st_mode)
    (bundle / "kestrel").write_text("#!/bin/sh\n", encoding="utf-8")
    (bundle / "kestrel").chmod(0o755)
    data = tmp / "xdg-data"
    done = subprocess.run(  # noqa: S603 - the repository's own script
        [str(bundle / "install-desktop-entry.sh")], capture_output=True, text=True, timeout=60,
        env={**os.environ, "XDG_DATA_HOME": str(data)}, check=False)
    assert done.returncode == 0, done.stderr
    entry = (data / "applications" / "kestrel.desktop").read_text(encoding="utf-8")
    assert f'Exec="{bundle}/kestrel"' in entry.splitlines() and "Icon=kestrel" in entry
    assert (data / "icons/hicolor/scalable/apps/kestrel.svg").is_file()
    assert (data / "icons/hicolor/256x256/apps/kestrel.png").is_file()
    spec = (REPO / "packaging" / "kestrel.spec").read_text(encoding="utf-8")
    assert '"install-desktop-entry.sh"' in spec and '"kestrel.desktop"' in spec


DEFAULT_WS = "--workspace {tmp}/default-ws"  # where the README uses the checkout's own workspace
HEADLESS = {"DISPLAY": None, "WAYLAND_DISPLAY": None, "QT_QPA_PLATFORM": None}
COMMANDS: dict[str, Entry] = {
    "bash scripts/bootstrap && .venv/bin/kestrel":
        # installing is .ci/run's first step; here the window is asked for without a display
        Entry(no_display, env=HEADLESS),
    "bash scripts/bootstrap && .venv/bin/python -m pytest -q -n auto":
        # this suite itself, run verbatim by .ci/run (running it here would run itself)
        Entry(runs_in_ci("bash scripts/bootstrap", ".venv/bin/python -m pytest -q -n auto"),
              run=False),
    ".venv/bin/kestrel chat --workspace /tmp/ws": Entry(chat, stdin="/agents\n"),
    '.venv/bin/kestrel run --workspace /tmp/ws-usdt --setup "watch BTC/USDT on 1h every 1h with a '
    'trend analyst and a trader" --for 12h': Entry(run_setup, extra="--speed 36000"),
    ".venv/bin/kestrel backtest --agents AnalystAgent_Trend_v1 TraderAgent_Default_v1 --data "
    "resources/sample_data/BTC-USDT_1h_20190930-20191024_unknown.csv --out backtest-out/agents":
        Entry(agent_backtest, extra="--no-progress"),
    ".venv/bin/kestrel demo": Entry(
        ok("Kestrel offline demo", "report and equity chart in"),
        extra=f"--speed 0 {DEFAULT_WS}"),
    ".venv/bin/kestrel tools": Entry(ok("get_historical_klines", "create_order"), extra=DEFAULT_WS),
    ".venv/bin/kestrel tools --template TraderAgent_Default_v1": Entry(
        ok("create_order", "get_account_balance"), extra=DEFAULT_WS),
    ".venv/bin/kestrel prompt AnalystAgent_Trend_v1": Entry(
        ok("Your agent id: `AGENT_ID`", "dispatch_task_to_agent"), extra=DEFAULT_WS),
    ".venv/bin/kestrel indicators": Entry(ok("RSI", "MACD", "BBANDS")),
    ".venv/bin/kestrel tool '<get_historical_klines><symbol>BTC/USD</symbol><interval>4h"
    "</interval><limit>3</limit></get_historical_klines>'":
        Entry(envelope("success", "<kline "), extra=DEFAULT_WS),
    "echo '<get_order_book><symbol>BTC/USDT</symbol><limit>5</limit></get_order_book>' | "
    ".venv/bin/kestrel tool -": Entry(envelope("success", "<bids>", "<asks>"), extra=DEFAULT_WS),
    ".venv/bin/kestrel tool --workspace /tmp/ws-2019 --at 2019-01-01T00:00:00Z "
    "'<calculate_technical_indicator><symbol>BTC/USD</symbol><interval>1d</interval>"
    "<indicator_name>RSI</indicator_name></calculate_technical_indicator>'":
        Entry(envelope("success", "RSI")),
    ".venv/bin/kestrel tool --workspace /tmp/ws --at 2019-10-10T00:00:00Z '<create_order><symbol>"
    "BTC/USD</symbol><side>BUY</side><quote_amount>500</quote_amount></create_order>'":
        Entry(envelope("success", "order_id")),
    ".venv/bin/kestrel tool --workspace /tmp/ws --at 2019-10-10T02:00:00Z '<get_open_positions/>'":
        Entry(envelope("success", "BTC/USD")),
    ".venv/bin/kestrel tool --workspace /tmp/ws --agent analyst-1 '<write_note><key>plan</key>"
    "<content>buy dips</content></write_note>'": Entry(envelope("success", "notes/plan.md")),
    ".venv/bin/kestrel tool --workspace /tmp/ws --agent analyst-1 '<recall_memory><query>dips"
    "</query></recall_memory>'": Entry(envelope("success", "buy dips")),
    ".venv/bin/kestrel eval --provider rule-engine --out /tmp/ws-eval-rules": Entry(
        ok("Eval of rule-engine:rules", "100.00", "Answers the toolset refused: none"),
        extra=f"--windows 1 --bars 4 --no-progress {DEFAULT_WS}"),
    ".venv/bin/kestrel eval --replay /tmp/ws-eval-rules": Entry(
        ok("Eval of rule-engine:rules", "no model called"), extra="--no-progress"),
    ".venv/bin/kestrel backtest --data resources/sample_data/BTC-USD_1h_20170701-20191017_coinbase"
    ".csv --strategy sma_cross --fast 10 --slow 30 --cash 10000 --out backtest-out/sma":
        Entry(strategy_backtest, extra="--no-progress"),
    ".venv/bin/kestrel sweep --data resources/sample_data/BTC-USDT_1h_20190930-20191024_unknown"
    ".csv --strategy sma_cross --grid fast=5,10,20 --grid slow=30,50 --out backtest-out/sweep":
        Entry(strategy_sweep, extra="--no-progress"),
    ".venv/bin/kestrel sweep --data resources/sample_data/BTC-USDT_1h_20190930-20191024_unknown"
    ".csv --agents AnalystAgent_Trend_v1 TraderAgent_Default_v1 --grid rsi_period=10,14,21 "
    "--grid window=2019-10-01..2019-10-08,2019-10-08..2019-10-15 --out backtest-out/"
    "sweep-agents": Entry(agents_sweep, extra="--no-progress"),
    ".venv/bin/kestrel sweep --data resources/sample_data/BTC-USD_1h_20170701-20191017_coinbase"
    ".csv --grid fast=5:50:5 --grid slow=60:200:20 --cluster tcp://HOST:8786 --out backtest-out/"
    "sweep-cluster": Entry(cluster_sweep, run=False),
    ".venv/bin/kestrel eval --provider rule-engine --out /tmp/ws": Entry(
        refused_and_kept("is a Kestrel workspace", "kestrel.db, memory/, kestrel.lock, backups/",
                         "nothing in it was changed", "give --out another folder"),
        extra=f"--no-progress {DEFAULT_WS}"),
    ".venv/bin/kestrel restore-backup --workspace /tmp/ws --backup /tmp/ws/kestrel.db": Entry(
        refused_and_kept("it is the workspace's live database itself, not a backup of it",
                         "nothing was changed")),
    # the bundle: CI builds it and checks the built executable (packaging/check_bundle.py), the
    # minutes that takes are not spent again here
    "bash packaging/build.sh": Entry(runs_in_ci("bash packaging/build.sh"), run=False),
    "packaging/build/dist/kestrel/kestrel": Entry(built_and_checked, run=False),
    "packaging/build/dist/kestrel/install-desktop-entry.sh": Entry(
        desktop_entry_installs, run=False),
}


def test_every_readme_command_has_a_test_and_every_test_a_readme_command() -> None:
    shown = readme_commands()
    assert len(shown) == len(set(shown)), "a command is shown twice"
    assert set(shown) - set(COMMANDS) == set(), "README commands without a test"
    assert set(COMMANDS) - set(shown) == set(), "tests of commands no longer in the README"


DATA_SECTION = "What Kestrel never does to your data"
# each promise the section makes, and the tests that prove it
PROMISES: dict[str, tuple[str, ...]] = {
    "It never writes an output folder over something else.": (
        "integration/test_output_folders.py::"
        "test_a_workspace_given_as_out_is_refused_and_left_byte_for_byte",
        "integration/test_output_folders.py::"
        "test_a_folder_with_files_the_command_did_not_make_is_refused_and_left_as_it_was",
        "integration/test_output_folders.py::"
        "test_a_workspace_a_writer_holds_is_untouched_when_given_as_out",
        "integration/test_output_folders.py::"
        "test_the_run_workspace_of_an_earlier_run_is_untouched_while_a_writer_holds_it",
        "integration/test_output_folders.py::"
        "test_an_empty_folder_is_used_and_marked_as_the_commands_output",
        "integration/test_output_folders.py::"
        "test_a_folder_the_command_made_before_is_reused_and_only_its_own_files_replaced",
        "integration/test_output_folders.py::test_a_command_refuses_another_commands_output",
        "integration/test_sweep.py::test_a_workspace_or_another_commands_folder_is_never_a_sweeps",
        "integration/test_sweep.py::"
        "test_resuming_with_another_grid_is_refused_and_changes_nothing",
    ),
    "It never restores a file that is not this workspace's backup.": (
        "unit/store/test_workspace_identity.py::"
        "test_a_new_workspace_gets_one_id_in_its_file_its_database_and_its_backups",
        "integration/test_restore_backup.py::test_the_live_database_itself_is_refused",
        "integration/test_restore_backup.py::"
        "test_a_backup_of_another_workspace_is_refused_even_in_this_ones_backups_folder",
        "integration/test_restore_backup.py::"
        "test_a_file_that_is_not_a_kestrel_database_is_refused",
        "integration/test_restore_backup.py::"
        "test_the_restore_shows_what_the_backup_holds_and_restores_once_the_person_says_yes",
        "integration/test_restore_backup.py::test_nothing_is_restored_when_the_person_says_no",
        "integration/test_database_damage.py::"
        "test_restore_backup_brings_the_account_back_and_keeps_the_damaged_file",
    ),
    "It never lets two processes write one workspace.": (
        "integration/test_one_writer.py::"
        "test_while_kestrel_run_holds_a_workspace_writers_are_refused_and_readers_answered",
        "integration/test_one_writer.py::"
        "test_deleting_the_lock_file_under_a_running_writer_lets_no_second_writer_in",
        "integration/test_database_damage.py::test_restore_is_refused_while_the_workspace_is_open",
    ),
    "It never keeps a backup it has not checked.": (
        "integration/test_database_damage.py::"
        "test_backups_are_healthy_copies_and_only_the_newest_five_are_kept",
        "integration/test_database_damage.py::"
        "test_the_keeper_backs_up_when_due_and_at_the_end_only_after_changes",
    ),
    "It never opens a damaged database as if it were new.": (
        "integration/test_database_damage.py::"
        "test_a_damaged_database_is_refused_at_open_and_left_untouched",
        "integration/test_database_damage.py::"
        "test_a_backup_rebuilds_an_index_that_disagrees_with_its_table_and_says_so",
    ),
    "It never loses a record to a full disk without saying so.": (
        "integration/test_disk_full.py::"
        "test_a_disk_filling_up_under_a_new_workspace_stops_the_run_with_one_message",
        "integration/test_disk_full.py::"
        "test_a_trading_workspace_keeps_its_orders_and_fills_and_names_the_backup_not_taken",
        "integration/test_disk_full.py::"
        "test_what_the_full_disk_kept_from_being_written_is_named_call_by_call",
    ),
    "It never reads an answer from outside without a bound.": (
        "integration/test_llm_providers.py::"
        "test_an_answer_that_streams_forever_is_cut_at_its_character_bound",
        "integration/test_llm_providers.py::"
        "test_an_answer_whose_body_never_ends_is_cut_at_its_byte_bound",
        "integration/test_mcp_stdio_transport.py::"
        "test_a_line_that_never_ends_is_given_up_at_its_bound_and_the_next_call_restarts",
        "integration/test_ccxt_faults.py::"
        "test_an_answer_that_never_ends_is_cut_at_the_size_bound_and_retried_like_a_bad_one",
        "integration/test_telegram_bot.py::"
        "test_an_endless_answer_to_a_poll_is_cut_at_the_size_bound_and_polling_goes_on",
    ),
    "It never takes a setting it cannot honour.": (
        "unit/config/test_money_settings.py::"
        "test_a_money_setting_out_of_range_is_refused_with_its_reason",
        "unit/config/test_settings_nesting.py::"
        "test_kestrel_refuses_a_too_deep_settings_file_with_exit_2_and_one_line",
        "integration/test_paper_account_out_of_range.py::"
        "test_a_workspace_with_a_huge_stored_cash_is_refused_clearly_and_the_reset_recovers_it",
    ),
    "It never writes a known key into a file.": (
        "integration/test_secret_leaks.py::"
        "test_a_key_echoed_in_base64_reversed_hex_or_url_encoded_reaches_no_file",
    ),
}


def readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def test_the_readme_says_what_kestrel_never_does_to_your_data_and_tests_prove_each_promise(
) -> None:
    headings = re.findall(r"^## (.+)$", README.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert DATA_SECTION in headings
    assert headings.index(DATA_SECTION) == headings.index("Kill switch") + 1
    section = readme_section(DATA_SECTION)
    promises = re.findall(r"^- \*\*(.+?)\*\*", section, flags=re.MULTILINE)
    assert promises == list(PROMISES), "a promise without the tests that prove it, or the reverse"
    for proofs in PROMISES.values():
        for proof in proofs:
            file, name = proof.split("::")
            source = (REPO / "tests" / file).read_text(encoding="utf-8")
            assert f"def {name}(" in source, f"{proof} does not exist"
    # the commands the section shows run with the README's (test_the_readme_command_works...),
    # in its order, on the workspace its earlier commands made: each must be refused
    flat = re.sub(r"\s+", " ", section)
    shown = [command for command in readme_commands() if command in flat]
    assert len(shown) == 2
    for command in shown:
        assert COMMANDS[command].check.__qualname__.startswith("refused_and_kept."), command


def _as_run_here(command: str, tmp: Path) -> str:
    python = shlex.quote(sys.executable)
    command = re.sub(r"\.venv/bin/(kestrel|python)\b",
                     lambda m: f"{python} -m app" if m.group(1) == "kestrel" else python, command)
    command = re.sub(r"/tmp/ws\b", shlex.quote(str(tmp)) + "/ws", command)
    return command.replace("--out backtest-out", f"--out {shlex.quote(str(tmp))}/backtest-out")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for all the commands, as one person's /tmp: they run in the README's order."""
    return tmp_path_factory.mktemp("readme")


@pytest.mark.slow
@pytest.mark.parametrize("command", readme_commands(), ids=lambda c: c[:60])
def test_the_readme_command_works_as_the_readme_says(command: str, folder: Path) -> None:
    entry = COMMANDS[command]
    done = subprocess.CompletedProcess[str]([], 0, "", "")
    if entry.run:
        if command.startswith("bash scripts/bootstrap && "):
            command = command.removeprefix("bash scripts/bootstrap && ")
        line = _as_run_here(command, folder)
        if entry.extra:
            line += " " + entry.extra.format(tmp=shlex.quote(str(folder)))
        env = {k: v for k, v in os.environ.items() if entry.env.get(k, v) is not None}
        done = subprocess.run(  # noqa: S603 - the README's own commands
            ["bash", "-c", line], input=entry.stdin, capture_output=True, text=True,
            timeout=300, cwd=REPO, env=env, check=False,
        )
    entry.check(done, folder)
