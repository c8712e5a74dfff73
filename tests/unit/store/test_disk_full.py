"""A full disk is recognised in each shape it comes in, and the account of a full disk names
what could not be recorded."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import threading

import pytest

from app.domain.errors import ErrorCode, ToolError
from app.store.disk_full import (
    AUDIT_CALLS,
    MEMORY_WRITES,
    DiskFullStop,
    DiskFullWatch,
    disk_full_reason,
)


def sqlite_error(code: int, text: str) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(text)
    exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


def test_no_space_a_quota_a_size_limit_and_sqlite_full_are_each_a_full_disk():
    assert disk_full_reason(OSError(errno.ENOSPC, "No space left on device")) == (
        "no space left on the device")
    assert disk_full_reason(OSError(errno.EDQUOT, "Disk quota exceeded")) == (
        "the disk quota is used up")
    assert "largest size this process may write" in (
        disk_full_reason(OSError(errno.EFBIG, "File too large")) or "")
    assert disk_full_reason(sqlite_error(13, "database or disk is full")) == (
        "database or disk is full")


def test_a_full_disk_is_found_behind_the_error_it_was_turned_into():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise ToolError("'a.md' could not be saved", code=ErrorCode.INTERNAL_ERROR) from exc
    except ToolError as wrapped:
        assert disk_full_reason(wrapped) == "no space left on the device"


def test_other_failures_are_not_a_full_disk(tmp_path):
    assert disk_full_reason(OSError(errno.EACCES, "Permission denied")) is None
    assert disk_full_reason(sqlite3.OperationalError("no such table: x")) is None
    assert disk_full_reason(ValueError("bad")) is None
    # an I/O error on a disk with room and no size limit is a failing disk, not a full one
    assert disk_full_reason(sqlite_error(778, "disk I/O error"), tmp_path) is None


def test_the_account_counts_and_names_what_was_not_recorded(tmp_path):
    watch = DiskFullWatch(tmp_path)
    assert watch.not_recorded() == "Nothing waiting to be written was lost."
    watch.agent_names["agent-1"] = "BTC/USDT Trader"
    watch.unrecorded(AUDIT_CALLS, "get_market_snapshot at 2019-10-03 06:00", "agent-1")
    watch.unrecorded(AUDIT_CALLS, "get_market_snapshot at 2019-10-03 06:00", "agent-1")
    watch.unrecorded(AUDIT_CALLS, "place_order at 2019-10-03 06:00", "agent-1")
    watch.unrecorded(MEMORY_WRITES, "analysis_log.md", "agent-2")
    assert watch.not_recorded() == (
        "3 tool calls of the audit trail and 1 memory write were not recorded: "
        "2 x get_market_snapshot at 2019-10-03 06:00 (BTC/USDT Trader), place_order at "
        "2019-10-03 06:00 (BTC/USDT Trader); analysis_log.md (agent-2)."
    )


def test_the_first_full_disk_error_trips_the_watch_and_keeps_its_reason(tmp_path):
    watch = DiskFullWatch(tmp_path)
    assert not watch.check(OSError(errno.EACCES, "Permission denied"))
    assert not watch.full
    assert watch.check(OSError(errno.ENOSPC, "No space left on device"))
    assert watch.check(sqlite_error(13, "database or disk is full"))
    assert watch.reason == "no space left on the device"
    message = str(watch.error("the run stopped"))
    assert message.startswith(
        f"the disk holding {tmp_path} is full (no space left on the device): the run stopped. "
        "Free space on that disk and run again.")


def test_work_is_stopped_when_the_disk_fills_in_another_thread(tmp_path):
    watch = DiskFullWatch(tmp_path)
    stopped = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.Event().wait()  # a run that would go on for ever
        finally:
            stopped.set()

    async def scenario() -> None:
        writer = threading.Thread(target=watch.trip, args=("no space left on the device",))
        asyncio.get_running_loop().call_soon(writer.start)
        with pytest.raises(DiskFullStop):
            await watch.run(work())
        writer.join()
        assert stopped.is_set()

    asyncio.run(scenario())


def test_work_that_fails_of_a_full_disk_stops_and_other_failures_pass_through(tmp_path):
    async def failing(exc: Exception) -> None:
        raise exc

    watch = DiskFullWatch(tmp_path)
    with pytest.raises(ValueError, match="a bug"):
        asyncio.run(watch.run(failing(ValueError("a bug"))))
    with pytest.raises(DiskFullStop):
        asyncio.run(watch.run(failing(OSError(errno.ENOSPC, "No space left on device"))))
    assert watch.full
