"""Many writers at once: asyncio tasks, threads and separate processes append to one file and
lose nothing, interleave no bytes, and leave the recall index consistent with the file."""

import asyncio
import base64
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from app.domain.clock import ReplayClock, parse_time
from app.events import EventBus, MemoryFileChanged
from app.memory.bank import MemoryBank
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.memory_tools import MemoryTools
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext

AGENT = "trader-1"
START = parse_time("2024-02-20T14:00:00Z")
REPO = Path(__file__).resolve().parents[2]


def line(writer: str, n: int, width: int) -> str:
    head = f"{writer}-line-{n:04d}:"
    return head + "x" * (width - len(head))


def assert_every_line_whole(text: str, expected: set[str]) -> None:
    lines = text.split("\n")
    assert lines[-1] == ""  # ends with a newline: no torn last line
    assert len(lines) - 1 == len(expected)
    assert set(lines[:-1]) == expected  # each line intact: nothing lost, nothing interleaved


def test_concurrent_asyncio_tasks_appending_through_the_tool_lose_nothing(tmp_path: Path) -> None:
    bus = EventBus()
    seen: list[MemoryFileChanged] = []
    bus.subscribe(MemoryFileChanged, seen.append)
    bank = MemoryBank(tmp_path / "memory", ReplayClock(START), bus)
    executor = ToolExecutor(ToolRegistry(MemoryTools(bank).specs()), MemoryRecorder())
    ctx = AgentContext(AGENT)
    expected = {line(f"task{t}", n, 300) for t in range(30) for n in range(8)}

    async def writer(t: int) -> None:
        for n in range(8):
            content = base64.b64encode(line(f"task{t}", n, 300).encode()).decode()
            result = await executor.execute_text(
                ctx,
                "<append_to_agent_memory_file><file_path>shared/log.md</file_path>"
                f"<content_to_append_base64>{content}</content_to_append_base64>"
                "</append_to_agent_memory_file>",
            )
            assert result is not None and result.ok, result

    async def journal(t: int) -> None:
        result = await executor.execute_text(
            ctx, f"<log_journal_entry><content>journal note {t} sigma</content></log_journal_entry>"
        )
        assert result is not None and result.ok

    async def scenario() -> None:
        await asyncio.gather(*(writer(t) for t in range(30)), *(journal(t) for t in range(20)))

    asyncio.run(scenario())
    assert_every_line_whole(bank.read_file(AGENT, "shared/log.md").data.decode(), expected)
    assert len(bank.recall(AGENT, "sigma", limit=50)) == 20
    assert len([e for e in seen if e.path == "shared/log.md"]) == 240
    hits = bank.recall(AGENT, "task7-line-0005")
    assert len(hits) == 1
    text = bank.read_file(AGENT, "shared/log.md").data.decode().split("\n")
    assert text[hits[0].line - 1].startswith("task7-line-0005")
    bank.close()


def test_concurrent_threads_appending_through_the_sync_api_lose_nothing(tmp_path: Path) -> None:
    bank = MemoryBank(tmp_path / "memory", ReplayClock(START))
    expected = {line(f"thread{t}", n, 3000) for t in range(6) for n in range(40)}

    def writer(t: int) -> None:
        for n in range(40):
            bank.append_file(AGENT, "log.md", line(f"thread{t}", n, 3000).encode())

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert_every_line_whole(bank.read_file(AGENT, "log.md").data.decode(), expected)
    bank.close()


WORKER = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from app.domain.clock import ReplayClock
    from app.memory.bank import MemoryBank

    root, name, count, width = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    bank = MemoryBank(root, ReplayClock(1708437600000))
    deadline = time.monotonic() + 30
    while not (root.parent / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.005)  # start together, so the appends really overlap
    for n in range(count):
        head = f"{name}-line-{n:04d}:"
        bank.append_file("trader-1", "log.md", (head + "x" * (width - len(head))).encode())
    bank.close()
    """
)


def test_concurrent_processes_appending_to_one_file_lose_nothing(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(root), f"proc{p}", "25", "9000"], cwd=REPO
        )
        for p in range(4)
    ]
    (tmp_path / "go").touch()
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    expected = {line(f"proc{p}", n, 9000) for p in range(4) for n in range(25)}
    bank = MemoryBank(root, ReplayClock(START))
    text = bank.read_file(AGENT, "log.md").data.decode()
    assert_every_line_whole(text, expected)
    hits = bank.recall(AGENT, "proc2-line-0017")
    assert len(hits) == 1  # the shared index holds each line once
    assert text.split("\n")[hits[0].line - 1].startswith("proc2-line-0017")
    bank.close()
