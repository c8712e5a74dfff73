"""A full analysis log is rolled over to an archive and started again, losing no entry.

The analyst's answers are read back from a conversation exactly as the rule engine reads them:
its final answer carries the entry as a block, whose append the runtime makes, and each test
plays the memory tools' answers (the append refused, a failed write) and checks the next call.
"""

from __future__ import annotations

import base64

from app.agents.answer_blocks import NOT_WRITTEN_NOTE
from app.agents.llm.port import ChatMessage
from app.agents.rules.analyst import ASSESSMENT_BLOCK, LOG_BLOCK, TREND, AnalystPolicy
from app.agents.rules.calls import Answer, b64, final
from app.agents.rules.rollover import archive_path, log_content, refused_as_full
from app.agents.rules.transcript import Transcript, read_transcript
from app.domain.errors import ErrorCode
from app.memory.roles import ANALYSIS_LOG, MARKET_ASSESSMENT
from app.tools.protocol.render import el, render_error, render_success
from app.tools.protocol.result import parse_result

SYMBOL = "BTC/USDT"
NOW_MS = 1_570_694_400_000  # 2019-10-10T08:00:00Z
ENTRY = "\n## 2019-10-10T08:00:00Z · BTC/USDT 1h · HOLD (confidence 0.1)\n\n```yaml\nx: 1\n```\n"
OLD_LOG = (
    "\n## 2019-09-01T00:00:00Z · BTC/USDT 1h · HOLD (confidence 0.1)\n\n```yaml\nx: 1\n```\n"
    "\n## 2019-10-10T07:00:00Z · BTC/USDT 1h · BUY (confidence 0.7)\n\n```yaml\nx: 2\n```\n"
)
TASK = f'<task task_id="t1" task_type="RUN_ANALYSIS">{{"symbol": "{SYMBOL}"}}</task>'


def full(path: str = ANALYSIS_LOG) -> str:
    return render_error(
        "append_to_agent_memory_file", ErrorCode.INVALID_PARAMETER,
        f"'{path}' would be 1048700 bytes; the limit is 1048576 bytes per file. Split the "
        "content over several files.", {"path": path, "size": 1_048_700, "limit": 1_048_576},
    ).xml


def read_result(text: str | None) -> str:
    return render_success("read_agent_memory_file", el(
        "memory_file_content", None,
        el("content_base64", b64(text or "")), el("file_exists", text is not None),
        el("file_type_hint", "MARKDOWN"), file_path_read=ANALYSIS_LOG,
    )).xml


def listed(*paths: str) -> str:
    return render_success("list_agent_memory_files", el(
        "memory_files", None, *(el("file", path=p, size=10) for p in paths)
    )).xml


def written(path: str) -> str:
    return render_success("write_agent_memory_file", el(
        "memory_file_written", file_path_written=path, status_message="File saved successfully."
    )).xml


def refused_write(path: str) -> str:
    return render_error("write_agent_memory_file", ErrorCode.ACCESS_DENIED,
                        "over the quota", {"path": path}).xml


def conversation(*turns: tuple[Answer, str]) -> Transcript:
    messages = [ChatMessage("user", TASK)]
    for answer, result in turns:
        messages += [ChatMessage("assistant", answer.render()), ChatMessage("user", result)]
    return read_transcript(messages)


ANSWER = final(f"{SYMBOL} 1h: HOLD (confidence 0.1), nothing to dispatch.",
               {LOG_BLOCK: ENTRY, ASSESSMENT_BLOCK: "schema_version: 1\n"})
POLICY = AnalystPolicy(TREND, "analyst-1", {"trader_agent_id": "trader-1"})


def blocks_written(log_result: str) -> str:
    """What the runtime answers after writing the answer's blocks: the log's append refused,
    the assessment written."""
    return f"{NOT_WRITTEN_NOTE}\n{log_result}\n{written(MARKET_ASSESSMENT)}"


LOG_CALL = (ANSWER, blocks_written(full()))


def next_call(*turns: tuple[Answer, str]) -> Answer | None:
    t = conversation(*turns)
    logged = t.block(LOG_BLOCK)
    assert logged is not None
    return POLICY._roll(t, "log", logged, b64(ENTRY), NOW_MS)


def log_note(*turns: tuple[Answer, str]) -> list[str]:
    t = conversation(*turns)
    return POLICY._log_note(t, "log", t.block(LOG_BLOCK))


def params(answer: Answer | None) -> dict[str, object]:
    assert answer is not None
    t = conversation((answer, written("x")))
    step = t.steps[-1]
    return {"tool": step.name, **step.params}


def test_only_the_size_refusal_of_that_file_counts_as_full() -> None:
    assert refused_as_full(parse_result(full()), ANALYSIS_LOG)
    assert not refused_as_full(parse_result(full("notes/x.md")), ANALYSIS_LOG)
    bad_base64 = render_error("append_to_agent_memory_file", ErrorCode.INVALID_PARAMETER,
                              "not base64", {"parameter": "content_to_append_base64"}).xml
    assert not refused_as_full(parse_result(bad_base64), ANALYSIS_LOG)
    assert not refused_as_full(parse_result(refused_write(ANALYSIS_LOG)), ANALYSIS_LOG)


def test_the_archive_is_named_by_its_first_and_last_entry_and_never_overwrites_one() -> None:
    log = log_content(parse_result(read_result(OLD_LOG)))
    assert log is not None and log.entries == 2
    name = "analysis_log_archive/2019-09-01_2019-10-10"
    assert archive_path(log, frozenset(), "2019-10-10") == f"{name}.md"
    assert archive_path(log, {f"{name}.md", f"{name}_2.md"}, "2019-10-10") == f"{name}_3.md"
    headless = log_content(parse_result(read_result("edited by hand\n")))
    assert headless is not None
    assert archive_path(headless, frozenset(), "2019-10-10") == (
        "analysis_log_archive/2019-10-10_2019-10-10.md"
    )


def test_a_full_log_is_archived_byte_for_byte_then_started_again_with_the_refused_entry() -> None:
    read = next_call(LOG_CALL)
    assert params(read) == {"tool": "read_agent_memory_file", "file_path": ANALYSIS_LOG}
    assert read is not None
    listing = next_call(LOG_CALL, (read, read_result(OLD_LOG)))
    assert params(listing) == {"tool": "list_agent_memory_files",
                               "folder": "analysis_log_archive"}
    assert listing is not None
    missing = render_error("list_agent_memory_files", ErrorCode.NOT_FOUND,
                           "Folder 'analysis_log_archive' does not exist.").xml
    turns = [LOG_CALL, (read, read_result(OLD_LOG)), (listing, missing)]
    archive = next_call(*turns)
    path = "analysis_log_archive/2019-09-01_2019-10-10.md"
    got = params(archive)
    assert got["tool"] == "write_agent_memory_file" and got["file_path"] == path
    assert base64.b64decode(str(got["content_base64"])).decode() == OLD_LOG
    assert archive is not None
    turns.append((archive, written(path)))
    restart = next_call(*turns)
    got = params(restart)
    assert got["tool"] == "write_agent_memory_file" and got["file_path"] == ANALYSIS_LOG
    assert base64.b64decode(str(got["content_base64"])).decode() == ENTRY
    assert restart is not None
    turns.append((restart, written(ANALYSIS_LOG)))
    assert next_call(*turns) is None  # done: the analysis goes on (dispatch, assessment)
    (note,) = log_note(*turns)
    assert path in note and "starts again" in note


def test_when_the_archive_cannot_be_written_the_log_is_left_whole() -> None:
    read = next_call(LOG_CALL)
    assert read is not None
    listing = next_call(LOG_CALL, (read, read_result(OLD_LOG)))
    assert listing is not None
    turns = [LOG_CALL, (read, read_result(OLD_LOG)), (listing, listed())]
    archive = next_call(*turns)
    assert archive is not None
    turns.append((archive, refused_write("analysis_log_archive/x.md")))
    assert next_call(*turns) is None  # no restart: the log is not overwritten
    (note,) = log_note(*turns)
    assert "could not be rolled over" in note and "over the quota" in note


def test_an_entry_too_big_for_an_empty_log_is_reported_not_rolled_forever() -> None:
    read = next_call(LOG_CALL)
    assert read is not None
    turns = [LOG_CALL, (read, read_result(None))]
    assert next_call(*turns) is None
    (note,) = log_note(*turns)
    assert "nothing to archive" in note and "not recorded" in note


def test_another_refused_append_is_reported_in_the_final_answer() -> None:
    quota = render_error("append_to_agent_memory_file", ErrorCode.ACCESS_DENIED,
                         "over its quota", {"path": ANALYSIS_LOG}).xml
    assert next_call((ANSWER, blocks_written(quota))) is None
    (note,) = log_note((ANSWER, blocks_written(quota)))
    assert "Could not record the analysis" in note and "over its quota" in note
