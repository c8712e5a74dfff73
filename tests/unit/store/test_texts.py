"""Each tool result kept once: the audit row and the messages that carry it refer to one text,
and every reader still sees each row's full text, in a new workspace and in one migrated from
the schema before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.agents.conversation_store import ConversationStore
from app.domain.clock import ReplayClock
from app.store import db
from app.store.audit_trail import read_durations, read_tool_call_detail, read_tool_calls
from app.store.ledger import Ledger
from app.store.texts import MIN_SHARED_CHARS, compose, expand

RESULT = ('<tool_result tool="get_klines" status="success"><klines symbol="BTC/USD">'
          + "".join(f"<k t='{i}' o='9000.{i}' c='9001.{i}'/>" for i in range(40))
          + "</klines></tool_result>")
OTHER = ('<tool_result tool="get_ticker" status="success"><ticker symbol="BTC/USD" '
         'last="9001.5" bid="9001.4" ask="9001.6"/></tool_result>')
SHORT = '<tool_result tool="x" status="success"/></tool_result>'
TASK = f"<task_data>\n{RESULT}\n{OTHER}\n{SHORT}\n</task_data>\nDecide: BUY, SELL or HOLD."


def call(result: str, started: int = 1) -> tuple[object, ...]:
    return ("analyst-1", "get_klines", '{"symbol": "BTC/USD"}', "success", None, result,
            started, 1.5)


def count(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608


def stored_bytes(conn: sqlite3.Connection) -> int:
    """What the three tables hold as text: the rows' own columns and the shared texts."""
    return int(conn.execute(
        "SELECT (SELECT total(length(result_xml)) FROM tool_call_rows)"
        " + (SELECT total(length(content)) + total(length(parts)) FROM message_rows)"
        " + (SELECT total(length(body)) FROM texts)").fetchone()[0])


def test_a_result_in_the_audit_and_in_messages_is_stored_once_and_read_whole(tmp_path: Path):
    path = tmp_path / "kestrel.db"
    ledger = Ledger(path)
    conversations = ConversationStore(path, ReplayClock(1_570_000_000_000))
    ledger.record_tool_call(call(RESULT))
    ledger.record_tool_call(call(OTHER, 2))
    ledger.flush()
    task = conversations.add("analyst-1", "t1", 0, "user", "task", TASK)
    answer = conversations.add("analyst-1", "t1", 1, "user", "tool_result", RESULT)
    plain = conversations.add("analyst-1", "t1", 2, "assistant", "final", "HOLD, nothing new.")

    assert [m.content for m in conversations.messages("t1")] == [TASK, RESULT, "HOLD, nothing new."]
    assert (task.content, answer.content, plain.content) == (TASK, RESULT, "HOLD, nothing new.")
    conn = ledger.connection
    assert [r["result_xml"] for r in ledger.tool_calls()] == [RESULT, OTHER]
    (first, second) = read_tool_calls(conn, 0, 10)
    detail = read_tool_call_detail(conn, first.call_id)
    assert detail is not None and detail.result_xml == RESULT
    assert read_durations(conn, "analyst-1", 0, 10) == {RESULT: 1.5, OTHER: 1.5}
    # RESULT and OTHER once each; the short result stays inside its message
    assert sorted(r[0] for r in conn.execute("SELECT body FROM texts")) == sorted([RESULT, OTHER])
    # the task's text holds both results: with them once, the rest is a few references
    assert stored_bytes(conn) < len(TASK) + len(plain.content) + 100
    assert conn.execute("SELECT content FROM message_rows WHERE id = ?",
                        (plain.id,)).fetchone()[0] == "HOLD, nothing new."
    conversations.close()
    ledger.close()


def test_a_workspace_of_the_schema_before_migrates_and_reads_as_it_did(tmp_path: Path):
    path = tmp_path / "kestrel.db"
    old = sqlite3.connect(path, isolation_level=None)
    assert db.migrate(old, target=db.SCHEMA_VERSION - 1) == db.SCHEMA_VERSION - 1
    old.executemany(
        "INSERT INTO tool_calls (agent_id, tool_name, params_json, status, error_code, "
        "result_xml, started_ms, duration_ms) VALUES (?,?,?,?,?,?,?,?)",
        [call(RESULT), call(OTHER, 2)])
    old.executemany(
        "INSERT INTO messages (agent_id, task_id, step, role, kind, content, market_ms, wall_ms) "
        "VALUES ('analyst-1', 't1', ?, 'user', ?, ?, 1, 1)",
        [(0, "task", TASK), (1, "tool_result", RESULT)])
    before = {table: old.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()  # noqa: S608
              for table in ("tool_calls", "messages")}
    old.close()

    ledger = Ledger(path)
    conn = ledger.connection
    assert db.schema_version(conn) == db.SCHEMA_VERSION
    for table, rows in before.items():
        assert conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall() == rows  # noqa: S608
    names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert {"messages_task", "messages_agent", "tool_calls_agent", "texts"} <= names
    # rows written before keep their text in place; rows written now share theirs
    conversations = ConversationStore(path, ReplayClock(1_570_000_000_000))
    ledger.record_tool_call(call(RESULT, 3))
    ledger.flush()
    conversations.add("analyst-1", "t2", 0, "user", "task", TASK)
    assert [m.content for m in conversations.messages("t1")] == [TASK, RESULT]
    assert [m.content for m in conversations.messages("t2")] == [TASK]
    assert [r["result_xml"] for r in ledger.tool_calls()] == [RESULT, OTHER, RESULT]
    assert count(conn, "texts") == 2
    # a row inserted the way the schema before took it is kept in place, and read back whole
    conn.execute("INSERT INTO messages (agent_id, task_id, step, role, kind, content, market_ms, "
                 "wall_ms) VALUES ('analyst-1', 't3', 0, 'user', 'task', ?, 1, 1)", (TASK,))
    assert [m.content for m in conversations.messages("t3")] == [TASK]
    conversations.close()
    ledger.close()


_piece = st.one_of(
    st.text(max_size=40),
    st.builds(lambda body: f'<tool_result tool="t">{body}</tool_result>',
              st.text(max_size=2 * MIN_SHARED_CHARS)),
    st.just("<tool_result unclosed "),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_piece, max_size=8).map("".join))
def test_a_message_put_back_together_is_the_message_added(content: str) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    db.migrate(conn)
    parts = compose(conn, content)
    if parts is not None:
        assert expand(conn, parts) == content
    conn.execute(
        "INSERT INTO message_rows (agent_id, task_id, step, role, kind, content, parts, "
        "market_ms, wall_ms) VALUES ('a', 't', 0, 'user', 'task', ?, ?, 0, 0)",
        ("" if parts is not None else content, parts))
    assert conn.execute("SELECT content FROM messages").fetchone()[0] == content
