"""Each tool result kept once: the audit row and the messages that carry it refer to one text,
texts are compressed together in blocks, and every reader still sees each row's full text, in a
new workspace and in one migrated from the schemas before."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.agents.conversation_store import ConversationStore
from app.domain.clock import ReplayClock
from app.store import db, texts
from app.store.audit_trail import read_durations, read_tool_call_detail, read_tool_calls
from app.store.ledger import Ledger
from app.store.texts import BLOCK_BYTES, MIN_SHARED_CHARS, compose, expand, read_text

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
    """What the tables hold as text: the rows' own columns, the texts waiting to be packed and
    the packed blocks."""
    return int(conn.execute(
        "SELECT (SELECT total(length(result_xml)) + total(length(params_json)) "
        "        FROM tool_call_rows)"
        " + (SELECT total(length(content)) + total(length(parts)) FROM message_rows)"
        " + (SELECT total(length(body)) FROM texts)"
        " + (SELECT total(length(body)) FROM text_pending)"
        " + (SELECT total(length(data)) FROM text_blocks)").fetchone()[0])


def all_texts(conn: sqlite3.Connection) -> list[str]:
    return [read_text(conn, text_id) for (text_id,) in conn.execute("SELECT id FROM texts")]


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
    assert sorted(all_texts(conn)) == sorted([RESULT, OTHER])
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
    # and a result kept once the way the schema before kept it, in its text's row
    old.execute("INSERT INTO texts (id, key, body) VALUES (7, 0, ?)", (OTHER,))
    old.execute("INSERT INTO tool_call_rows (agent_id, tool_name, params_json, status, result_xml, "
                "result_id, started_ms, duration_ms) VALUES ('analyst-1', 'get_ticker', '{}', "
                "'success', '', 7, 5, 1.0)")
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
    assert [r["result_xml"] for r in ledger.tool_calls()] == [RESULT, OTHER, OTHER, RESULT]
    assert count(conn, "texts") == 3
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


def candles(first: int, count: int = 40) -> str:
    """A klines result as the Analyst reads one each bar: the window moves by one candle."""
    rows = "".join(f'<kline t="{t}" o="{9000 + t % 97}.5" c="{9001 + t % 89}.25" v="{t % 13}.1"/>\n'
                   for t in range(first, first + count))
    return f'<tool_result tool_name="get_historical_klines"><data>\n{rows}</data></tool_result>'


def compressions_done() -> None:
    """Wait for the blocks being compressed on the side (what a later write puts in)."""
    for block in list(texts._compressing.values()):
        block.compressed.result()


def test_a_long_run_is_packed_into_compressed_blocks_and_every_row_reads_whole(tmp_path: Path):
    path = tmp_path / "kestrel.db"
    ledger = Ledger(path)
    conversations = ConversationStore(path, ReplayClock(1_570_000_000_000))
    results = [candles(bar) for bar in range(400)]
    params = [f'{{"symbol": "BTC/USD", "interval": "1h", "limit": 40, "note": "{"x" * bar}"}}'
              for bar in range(400)]
    for bar, result in enumerate(results):
        ledger.record_tool_call(("analyst-1", "get_historical_klines", params[bar], "success",
                                 None, result, bar, 1.0))
        ledger.flush()
        conversations.add("analyst-1", f"t{bar}", 0, "user", "task",
                          f"<task_data>\n{result}\n</task_data>\nDecide: BUY, SELL or HOLD.")
        compressions_done()  # as a run's own pace would let it
    conn = ledger.connection
    raw = sum(len(r) for r in results) * 2 + sum(len(p) for p in params)

    assert count(conn, "text_blocks") >= raw // 2 // BLOCK_BYTES
    assert stored_bytes(conn) < raw / 10
    rows = conn.execute("SELECT params_json, result_xml FROM tool_calls ORDER BY id").fetchall()
    assert rows == list(zip(params, results, strict=True))
    assert [conversations.messages(f"t{bar}")[0].content for bar in (0, 199, 399)] == [
        f"<task_data>\n{results[bar]}\n</task_data>\nDecide: BUY, SELL or HOLD."
        for bar in (0, 199, 399)]
    # a result seen again is found among the latest texts, packed or not (its parameters are
    # not looked for: only their own row holds them)
    ledger.record_tool_call(("analyst-1", "get_historical_klines", params[-1], "success", None,
                             results[-1], 400, 1.0))
    ledger.flush()
    (again, first) = conn.execute(
        "SELECT result_id FROM tool_call_rows ORDER BY id DESC LIMIT 2").fetchall()
    assert again == first
    conversations.close()
    ledger.close()


def test_a_pack_undone_with_its_transaction_loses_no_text(tmp_path: Path):
    conn = db.connect(tmp_path / "kestrel.db")
    # each ~30 KB: a block at every check (every PACK_EVERY-th text)
    results = [candles(bar, 400) for bar in range(3 * texts.PACK_EVERY)]
    conn.execute("BEGIN IMMEDIATE")
    for result in results:
        compose(conn, result)
        compressions_done()  # so each check finds the block before it compressed
    assert count(conn, "text_blocks") > 0
    assert texts._compressing, "a block of this transaction is being compressed"
    compressions_done()
    conn.execute("ROLLBACK")
    assert count(conn, "texts") == count(conn, "text_blocks") == 0

    # another connection uses the same ids for other texts; the block compressed from the
    # texts rolled back, ready since, must not be written over them
    other = db.connect(tmp_path / "kestrel.db")
    others = [candles(bar + 5000, 400) for bar in range(4 * texts.PACK_EVERY)]
    later = [candles(bar + 9000, 400) for bar in range(texts.PACK_EVERY)]  # its next check
    parts = []
    for writer, result in [*((other, r) for r in others), *((conn, r) for r in later)]:
        parts.append(compose(writer, result))
        compressions_done()
    assert [expand(conn, p) for p in parts if p is not None] == [*others, *later]
    assert conn.execute("SELECT count(*) FROM text_blocks WHERE length(data) < size").fetchone()[0]
    other.close()
    conn.close()


def test_a_plain_connection_given_the_function_reads_the_views(tmp_path: Path):
    """What a person's own script (or the sqlite3 shell, which has ``sqlar_uncompress``) does."""
    path = tmp_path / "kestrel.db"
    ledger = Ledger(path)
    results = [candles(bar, 200) for bar in range(3 * texts.PACK_EVERY)]
    for bar, result in enumerate(results):
        ledger.record_tool_call(("analyst-1", "get_historical_klines", "{}", "success", None,
                                 result, bar, 1.0))
        compressions_done()
    ledger.close()
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    conn.create_function("sqlar_uncompress", 2,
                         lambda data, size: data if len(data) == size else zlib.decompress(data))
    assert [r for (r,) in conn.execute("SELECT result_xml FROM tool_calls ORDER BY id")] == results
    assert conn.execute("SELECT count(*) FROM text_blocks").fetchone()[0] > 0
    conn.close()


def test_a_text_remembered_elsewhere_is_never_taken_for_another_text(tmp_path: Path):
    """The latest texts are remembered by the process, not by a database: one seen in another
    workspace, or in a transaction since rolled back, is used only where that id holds it."""
    first = db.connect(tmp_path / "first.db")
    second = db.connect(tmp_path / "second.db")
    shared = candles(1, 60)
    shared_id = texts.put_text(first, shared)
    # the second workspace gives that id (and many more, packed into blocks) to other texts
    others = [candles(bar + 100, 60) for bar in range(shared_id + 3 * texts.PACK_EVERY)]
    for text in others:
        texts.put_text(second, text)
        compressions_done()
    assert count(second, "text_blocks") > 0
    assert read_text(second, shared_id) != shared
    found = texts.put_text(second, shared)
    assert found != shared_id and read_text(second, found) == shared
    # a text found again after it was packed is the same row, not a copy
    assert texts.put_text(second, others[0]) == 1
    assert count(second, "texts") == len(others) + 1

    # a rolled-back text's id goes to another text; the rolled-back text is stored anew
    first.execute("BEGIN IMMEDIATE")
    undone = candles(7, 60)
    undone_id = texts.put_text(first, undone)
    first.execute("ROLLBACK")
    assert texts.put_text(first, candles(8, 60)) == undone_id
    again = texts.put_text(first, undone)
    assert again != undone_id and read_text(first, again) == undone
    first.close()
    second.close()


def test_a_text_whose_row_holds_an_older_kind_of_key_is_stored_anew(tmp_path: Path):
    """Rows written when a text's key was its CRC-32 are never confirmed by a digest: a text
    remembered under such a row is stored again, and both rows read back as that text."""
    conn = db.connect(tmp_path / "kestrel.db")
    text = candles(3, 60)
    old_id = texts.put_text(conn, text)
    crc = zlib.crc32(text.encode("utf-8"))
    conn.execute("UPDATE texts SET key = ? WHERE id = ?",
                 (crc - (1 << 32) if crc >= 1 << 31 else crc, old_id))
    new_id = texts.put_text(conn, text)
    assert new_id != old_id
    assert read_text(conn, old_id) == read_text(conn, new_id) == text
    assert texts.put_text(conn, text) == new_id  # and the new row is the one found from now on
    conn.close()
