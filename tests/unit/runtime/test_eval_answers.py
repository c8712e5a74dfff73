"""How the eval counts a final answer that carries memory blocks: one answer, refused when one
of its blocks was refused, taken once when all were written (its stored 'final' is the same
answer, not another)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.agents.answer_blocks import results_message
from app.domain.errors import ErrorCode
from app.runtime.eval_reading import read_answers
from app.runtime.task_endings import Ending, TaskEnding
from app.tools.protocol.render import el, render_error, render_success

ANSWER = ("BTC/USDT 1h: HOLD.\n<analysis_log>\n## entry\n</analysis_log>\n"
          "<assessment>\nschema_version: 1\n</assessment>")


def _run(tmp_path: Path, rows: list[tuple[str, str]]) -> Path:
    (tmp_path / "workspace").mkdir()
    with sqlite3.connect(tmp_path / "workspace" / "kestrel.db") as db:
        db.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, task_id TEXT, kind TEXT, "
                   "content TEXT)")
        db.executemany("INSERT INTO messages (task_id, kind, content) VALUES ('t1', ?, ?)", rows)
    return tmp_path



def test_a_block_answer_fully_written_is_one_taken_answer(tmp_path: Path) -> None:
    results = results_message([render_success("append_to_agent_memory_file", el("ok")),
                               render_success("write_agent_memory_file", el("ok"))])
    run = _run(tmp_path, [("answer_blocks", ANSWER), ("block_results", results),
                          ("final", "BTC/USDT 1h: HOLD.")])
    answers = read_answers(run, [TaskEnding("t1", "T", "analyst", 0, Ending.DECISION)])
    assert (answers.responses, answers.accepted, dict(answers.refused)) == (1, 1, {})


def test_a_block_answer_with_a_refused_block_counts_as_refused_then_its_correction_as_taken(
    tmp_path: Path,
) -> None:
    refused = results_message([
        render_success("append_to_agent_memory_file", el("ok")),
        render_error("write_agent_memory_file", ErrorCode.INVALID_PARAMETER, "not YAML"),
    ])
    fixed = results_message([render_success("write_agent_memory_file", el("ok"))])
    run = _run(tmp_path, [
        ("answer_blocks", ANSWER), ("block_results", refused),
        ("answer_blocks", ANSWER), ("block_results", fixed),
        ("final", "BTC/USDT 1h: HOLD."),
    ])
    answers = read_answers(run, [TaskEnding("t1", "T", "analyst", 0, Ending.DECISION)])
    assert answers.responses == 2 and answers.accepted == 1
    assert dict(answers.refused) == {"INVALID_PARAMETER": 1}


def test_block_answers_in_an_undecided_task_are_not_taken(tmp_path: Path) -> None:
    written = results_message([render_success("append_to_agent_memory_file", el("ok"))])
    run = _run(tmp_path, [("answer_blocks", ANSWER), ("block_results", written),
                          ("final", "BTC/USDT 1h: HOLD.")])
    answers = read_answers(run, [TaskEnding("t1", "T", "analyst", 0, Ending.INCOMPLETE)])
    assert answers.responses == 1 and answers.accepted == 0
