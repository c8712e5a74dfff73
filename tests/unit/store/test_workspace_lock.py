"""The one-writer lock: a second holder is refused and told who holds the workspace; the lock,
not a file left behind, decides."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.store.lock import WorkspaceBusyError, WorkspaceLock, read_holder


def test_a_second_writer_is_refused_with_the_holders_pid_command_and_start(tmp_path):
    path = tmp_path / "kestrel.lock"
    first = WorkspaceLock.acquire(path, command="kestrel run --workspace ws")
    try:
        with pytest.raises(WorkspaceBusyError) as refused:
            WorkspaceLock.acquire(path, command="kestrel tool ...")
        message = str(refused.value)
        assert f"process {os.getpid()} (kestrel run --workspace ws), since 20" in message
        assert refused.value.holder is not None and refused.value.holder.pid == os.getpid()
    finally:
        first.release()
    second = WorkspaceLock.acquire(path, command="kestrel tool ...")
    assert read_holder(path).command == "kestrel tool ..."
    second.release()
    second.release()  # idempotent


def test_a_lock_file_left_by_a_dead_process_does_not_block(tmp_path):
    path = tmp_path / "kestrel.lock"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    path.write_text(json.dumps({"pid": int(dead.stdout), "command": "kestrel run",
                                "since_ms": 0}), encoding="utf-8")
    assert read_holder(path) is None, "a dead holder is nobody"
    lock = WorkspaceLock.acquire(path)
    assert read_holder(path).pid == os.getpid()
    lock.release()


def test_a_holder_killed_with_sigkill_releases_the_workspace(tmp_path):
    path = tmp_path / "kestrel.lock"
    holder = subprocess.Popen(  # noqa: S603 - our own interpreter
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from app.store.lock import WorkspaceLock;"
         f"WorkspaceLock.acquire(Path({str(path)!r}), command='holder'); print('held', flush=True);"
         "time.sleep(600)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(WorkspaceBusyError, match=rf"process {holder.pid} \(holder\)"):
            WorkspaceLock.acquire(path)
    finally:
        holder.kill()
        holder.wait()
    WorkspaceLock.acquire(path).release()


def test_deleting_the_lock_file_does_not_release_the_workspace(tmp_path):
    path = tmp_path / "kestrel.lock"
    first = WorkspaceLock.acquire(path, command="kestrel run --workspace ws")
    try:
        path.unlink()
        with pytest.raises(WorkspaceBusyError, match=rf"in use by process {os.getpid()} "):
            WorkspaceLock.acquire(path, command="kestrel tool ...")
        assert not path.exists(), "the refused one wrote no lock file of its own"
    finally:
        first.release()
    WorkspaceLock.acquire(path).release()
