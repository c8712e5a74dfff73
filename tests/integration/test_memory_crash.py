"""A process killed in the middle of a memory write or append leaves the old or the new content,
never a truncated file or a torn line (SIGKILL of a real subprocess, at chosen and random times)."""

import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.domain.clock import ReplayClock, parse_time
from app.memory.bank import MemoryBank

AGENT = "trader-1"
START = parse_time("2024-02-20T14:00:00Z")
REPO = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from app.domain.clock import ReplayClock
    from app.memory import fsops
    from app.memory.bank import MemoryBank

    root, mode = Path(sys.argv[1]), sys.argv[2]
    bank = MemoryBank(root, ReplayClock(1708437600000))
    real_fsync, calls = os.fsync, []

    def pause(label):
        print(label, flush=True)
        time.sleep(60)

    def fsync_then_pause_at(n):
        def hook(fd):
            real_fsync(fd)
            calls.append(fd)
            if len(calls) == n:
                pause("PAUSED")
        return hook

    if mode == "write-before-rename":
        os.fsync = fsync_then_pause_at(1)  # the temp file is synced, not yet renamed
        bank.write_file("trader-1", "notes/plan.md", b"N" * 600_000)
    elif mode == "write-after-rename":
        os.fsync = fsync_then_pause_at(2)  # renamed, the folder not yet synced
        bank.write_file("trader-1", "notes/plan.md", b"N" * 600_000)
    elif mode == "append-torn":
        def torn(fd, data):
            os.write(fd, data[: len(data) // 2])
            pause("PAUSED")
        fsops.write_all = torn
        bank.append_file("trader-1", "log.md", b"Y" * 200_000)
    elif mode == "append-before-index":
        os.fsync = fsync_then_pause_at(1)  # every byte written, the index not yet updated
        bank.append_file("trader-1", "log.md", b"complete line psi")
    elif mode == "loop":
        print("READY", flush=True)
        for i in range(10_000):
            letter = b"AB"[i % 2 : i % 2 + 1]
            bank.write_file("trader-1", "state.md", letter * 300_000)
            bank.append_file("trader-1", f"log{i // 100}.md", (f"{i:06d}:" + "z" * 6000).encode())
    """
)


def run_until_paused(root: Path, mode: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root), mode],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "PAUSED"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    bank = MemoryBank(root, ReplayClock(START))
    bank.write_file(AGENT, "notes/plan.md", b"old plan omega\n")
    bank.append_file(AGENT, "log.md", b"old line omega")
    bank.close()
    return root


def test_a_write_killed_before_its_rename_leaves_the_old_file(root: Path) -> None:
    run_until_paused(root, "write-before-rename")
    bank = MemoryBank(root, ReplayClock(START))
    assert bank.read_file(AGENT, "notes/plan.md").data == b"old plan omega\n"
    assert [f.path for f in bank.list_files(AGENT)] == ["log.md", "notes/plan.md"]  # no temp
    bank.close()


def test_a_write_killed_after_its_rename_leaves_the_whole_new_file(root: Path) -> None:
    run_until_paused(root, "write-after-rename")
    bank = MemoryBank(root, ReplayClock(START))
    assert bank.read_file(AGENT, "notes/plan.md").data == b"N" * 600_000
    bank.close()


def test_a_torn_append_is_rolled_back_to_the_old_content(root: Path) -> None:
    run_until_paused(root, "append-torn")
    assert (root / AGENT / "log.md").stat().st_size > len(b"old line omega\n")  # torn on disk
    bank = MemoryBank(root, ReplayClock(START))
    assert bank.read_file(AGENT, "log.md").data == b"old line omega\n"
    bank.append_file(AGENT, "log.md", b"next line")
    assert bank.read_file(AGENT, "log.md").data == b"old line omega\nnext line\n"
    assert [h.line for h in bank.recall(AGENT, "omega")] == [1, 1]  # log.md and the plan
    bank.close()


def test_an_append_killed_before_indexing_is_kept_and_indexed_on_restart(root: Path) -> None:
    run_until_paused(root, "append-before-index")
    bank = MemoryBank(root, ReplayClock(START))
    assert bank.read_file(AGENT, "log.md").data == b"old line omega\ncomplete line psi\n"
    hits = bank.recall(AGENT, "psi")
    assert [(h.path, h.line) for h in hits] == [("log.md", 2)]
    bank.close()


def test_random_kills_during_writes_and_appends_never_leave_a_torn_file(tmp_path: Path) -> None:
    rng = random.Random(4)
    root = tmp_path / "memory"
    for _ in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(root), "loop"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        try:
            proc.wait(timeout=rng.uniform(0.05, 0.4))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        bank = MemoryBank(root, ReplayClock(START))
        state = bank.read_file(AGENT, "state.md").data
        assert state in (b"A" * 300_000, b"B" * 300_000)
        for info in bank.list_files(AGENT):
            if info.path.startswith("log"):
                text = bank.read_file(AGENT, info.path).data.decode()
                assert text.endswith("\n")
                assert all(len(row) == 6007 for row in text.split("\n")[:-1])
        bank.close()
