"""No command with an output folder destroys a workspace, or anything else it did not make.

``kestrel backtest``, ``kestrel backtest --agents`` and ``kestrel eval`` write into ``--out DIR``.
Each creates it, or reuses it only when it is empty or its own (the ``.kestrel-output`` marker it
wrote there); a workspace (a real one: database, backups, memory, lock), another command's output
or a folder with other files is refused with exit 2 and every file in it is left byte for byte as
it was, and a workspace another process writes is never touched. The commands run in this process
(``run_main``); the writer holding a workspace is a real second process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.workspace import Workspace
from tests.helpers.cli import run_main
from tests.helpers.files import tree
from tests.helpers.paths import BTC_USDT_1H, REPO
from tests.integration.test_backtest_gaps import TRADER, TREND
from tests.integration.test_strategy_backtest import write_candles, zigzag

EXIT_REFUSED = 2
MARKER_NAME = ".kestrel-output"  # what a command writes into the output folder it made
ORDER = ("<create_order><symbol>BTC/USD</symbol><side>BUY</side><quote_amount>500"
         "</quote_amount></create_order>")
NOTE = ("<write_note><key>plan</key><content>buy dips</content></write_note>")

Command = Callable[[Path, Path], list[str]]  # (folder of the test, --out) -> argv


def strategy_backtest(tmp: Path, out: Path) -> list[str]:
    data = tmp / "BTC-USDT_1h_zigzag.csv"
    if not data.exists():
        write_candles(data, zigzag(40))
    return ["backtest", "--data", str(data), "--fast", "2", "--slow", "5", "--out", str(out),
            "--no-progress"]


def agent_backtest(_tmp: Path, out: Path) -> list[str]:
    return ["backtest", "--agents", TREND, TRADER, "--data", str(BTC_USDT_1H), "--bars", "3",
            "--out", str(out), "--no-progress"]


def evaluation(tmp: Path, out: Path) -> list[str]:
    return ["eval", "--provider", "rule-engine", "--windows", "1", "--bars", "3",
            "--workspace", str(tmp / "eval-settings"), "--no-progress", "--out", str(out)]


COMMANDS = {"backtest": strategy_backtest, "backtest-agents": agent_backtest,
            "eval": evaluation}
# where a run of each command keeps a workspace of its own inside its output folder
OWN_WORKSPACE = {"backtest-agents": Path("workspace"),
                 "eval": Path("windows", "1-falling", "model", "workspace")}


@pytest.fixture(scope="module")
def used_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace as a person's is: an order in its ledger, a note in memory, its backups,
    lock and logs; made once, copied into each test."""
    root = tmp_path_factory.mktemp("template") / "ws"
    assert run_main(["tool", "--workspace", str(root), "--at", "2019-10-10T00:00:00Z",
                     ORDER]) == 0
    assert run_main(["tool", "--workspace", str(root), "--at", "2019-10-10T00:00:00Z",
                     "--agent", "analyst-1", NOTE]) == 0
    ws = Workspace.at(root)
    for path in (ws.db_path, ws.lock_path, ws.memory_root, ws.log_dir):
        assert path.exists(), path
    assert list(ws.backup_dir.glob("kestrel-*.db")), "the workspace has backups"
    return root


def copy_of(workspace: Path, to: Path) -> Path:
    shutil.copytree(workspace, to, symlinks=True)
    return to


@pytest.fixture
def writer() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    """Start a real second process that holds a workspace for writing, as ``kestrel run`` does,
    and wait until it does; it is killed at the end of the test."""
    started: list[subprocess.Popen[str]] = []

    def hold(root: Path) -> subprocess.Popen[str]:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter
            [sys.executable, "-c",
             "import sys; from pathlib import Path; from app.workspace import Workspace;"
             f"Workspace.at(Path({str(root)!r})).hold_for_writing(backups=False);"
             "print('held', flush=True); sys.stdin.read()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        )
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in started:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("name", COMMANDS)
def test_a_workspace_given_as_out_is_refused_and_left_byte_for_byte(
    name: str, tmp_path: Path, used_workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = copy_of(used_workspace, tmp_path / "ws")
    before = tree(ws)

    code = run_main(COMMANDS[name](tmp_path, ws))

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert f"the output folder {ws} is a Kestrel workspace" in err
    assert "kestrel.db, memory/, kestrel.lock, backups/" in err
    assert "give --out another folder" in err and "Traceback" not in err
    after = tree(ws)
    assert sorted(set(before) - set(after)) == [], "files deleted"
    assert sorted(set(after) - set(before)) == [], "files added"
    assert after == before, "files changed"


@pytest.mark.parametrize("name", COMMANDS)
def test_a_folder_with_files_the_command_did_not_make_is_refused_and_left_as_it_was(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "photos"
    (folder / "2019").mkdir(parents=True)
    (folder / "2019" / "beach.jpg").write_bytes(b"\xff\xd8 not really a photo")
    (folder / "summary.json").write_text('{"mine": true}\n')  # a name the command writes too
    before = tree(folder)

    code = run_main(COMMANDS[name](tmp_path, folder))

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert f"the output folder {folder} already holds files" in err
    assert "(2019, summary.json)" in err
    assert "delete this one yourself" in err and "Traceback" not in err
    assert tree(folder) == before


@pytest.mark.parametrize("name", COMMANDS)
def test_a_workspace_a_writer_holds_is_untouched_when_given_as_out(
    name: str, tmp_path: Path, used_workspace: Path,
    writer: Callable[[Path], subprocess.Popen[str]], capsys: pytest.CaptureFixture[str],
) -> None:
    ws = copy_of(used_workspace, tmp_path / "ws")
    holder = writer(ws)
    before = tree(ws)

    code = run_main(COMMANDS[name](tmp_path, ws))

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert f"it is in use by process {holder.pid}" in err
    assert tree(ws) == before
    assert holder.poll() is None, "the writer goes on"


@pytest.mark.parametrize("name", sorted(OWN_WORKSPACE))
def test_the_run_workspace_of_an_earlier_run_is_untouched_while_a_writer_holds_it(
    name: str, tmp_path: Path, writer: Callable[[Path], subprocess.Popen[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    assert run_main(COMMANDS[name](tmp_path, out)) == 0, capsys.readouterr().err
    inner = out / OWN_WORKSPACE[name]
    holder = writer(inner)  # e.g. someone opened the run's workspace to look at its agents
    before = tree(out)

    code = run_main(COMMANDS[name](tmp_path, out))

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert f"the workspace {inner} in the output folder {out} is in use by process " \
           f"{holder.pid}" in err
    assert tree(out) == before


@pytest.mark.parametrize("name", COMMANDS)
def test_an_empty_folder_is_used_and_marked_as_the_commands_output(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "empty"
    out.mkdir()

    assert run_main(COMMANDS[name](tmp_path, out)) == 0, capsys.readouterr().err

    report = "eval.json" if name == "eval" else "summary.json"
    assert (out / report).is_file()
    assert (out / MARKER_NAME).read_text().splitlines()[0] == (
        {"backtest": "kestrel backtest", "backtest-agents": "kestrel backtest --agents",
         "eval": "kestrel eval"}[name])


@pytest.mark.parametrize("name", COMMANDS)
def test_a_folder_the_command_made_before_is_reused_and_only_its_own_files_replaced(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert run_main(COMMANDS[name](tmp_path, out)) == 0, capsys.readouterr().err
    (out / "my notes.txt").write_text("what I think of this run\n")
    (out / "error.txt").write_text("an error of an earlier run\n")
    report = out / ("eval.json" if name == "eval" else "summary.json")
    report.write_text("{}\n")  # an earlier run's report

    assert run_main(COMMANDS[name](tmp_path, out)) == 0, capsys.readouterr().err

    assert (out / "my notes.txt").read_text() == "what I think of this run\n"
    assert report.read_text() != "{}\n", "the report is the new run's"
    if name != "eval":  # a backtest's error.txt is its own: an earlier run's does not linger
        assert not (out / "error.txt").exists()


def test_a_command_refuses_another_commands_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "backtest-out"
    assert run_main(strategy_backtest(tmp_path, out)) == 0, capsys.readouterr().err
    before = tree(out)

    code = run_main(evaluation(tmp_path, out))

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert f"{out} holds the output of kestrel backtest, not of kestrel eval" in err
    assert tree(out) == before


def test_a_replay_into_the_run_it_replays_is_refused_and_the_recording_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert run_main(evaluation(tmp_path, run)) == 0, capsys.readouterr().err
    before = tree(run)

    code = run_main(["eval", "--replay", str(run), "--out", str(run), "--no-progress"])

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert f"holds the recorded run {run} being replayed" in err
    assert tree(run) == before
    assert run_main(["eval", "--replay", str(run), "--no-progress"]) == 0
    assert (run / "replay" / "eval.json").is_file()
