"""SQLite connection and schema migrations for the workspace database (ledger, agents, queues).

The schema version lives in ``PRAGMA user_version``; ``MIGRATIONS`` is an ordered list of SQL
steps and step *n* brings a database from version *n* to *n + 1*. Each step runs in its own
transaction together with the version bump, so a crash during an upgrade leaves the old version
intact, never half a schema. ``StoreDb`` is what each table store holds: its connection (opened
and migrated here), its ``BEGIN IMMEDIATE`` unit of work, and sqlite-utils' dict rows and dict
inserts for the queries that are not hot; each store keeps only its own queries.
WAL mode lets the UI read while the broker writes, and makes each commit cheap. A commit that
finds the WAL over its limit (1,000 pages) copies it back into the database first, which takes
tens of milliseconds; while a ``WalCheckpointer`` (app.store.checkpointer) serves a database, the
connections opened to it leave that copy to the checkpointer's thread, so no commit made on the
event loop pays for it.

A world whose commits are grouped (a backtest: its crash safety is its partial report, not each
statement) gives every store one ``GroupedDb`` instead of a path: one connection, on which the
caller commits everything written since its last commit in one transaction (per bar); each
store's own unit of work is then a savepoint inside it, still all or nothing.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.domain.errors import OperationalError
from app.store.disk_full import disk_full_error, disk_full_reason
from app.store.texts import install, text_sql

if TYPE_CHECKING:
    import sqlite_utils

# After a checkpoint has moved the WAL back into the database, a WAL file larger than this is cut
# back to it. Not smaller: agents under load grow the WAL to ~100 MB between restarts, and a WAL
# cut shorter than it grows is regrown block by block; those allocations wait on the file
# system's journal while other threads fsync, and the commits on the event loop stalled 50-300 ms
# (bench_desk). The file goes when the last connection closes.
WAL_SIZE_LIMIT_BYTES = 256 * 1024 * 1024

# inserting into the ``tool_calls`` or ``messages`` view stores the row's text in place
_TOOL_CALLS_INSERT = """CREATE TRIGGER tool_calls_insert INSTEAD OF INSERT ON tool_calls BEGIN
        INSERT INTO tool_call_rows (id, agent_id, tool_name, params_json, status, error_code,
                                    result_xml, started_ms, duration_ms)
        VALUES (NEW.id, NEW.agent_id, NEW.tool_name, NEW.params_json, NEW.status,
                NEW.error_code, NEW.result_xml, NEW.started_ms, NEW.duration_ms);
    END;"""
_MESSAGES_INSERT = """CREATE TRIGGER messages_insert INSTEAD OF INSERT ON messages BEGIN
        INSERT INTO message_rows (id, agent_id, task_id, step, role, kind, content, market_ms,
                                  wall_ms)
        VALUES (NEW.id, NEW.agent_id, NEW.task_id, NEW.step, NEW.role, NEW.kind, NEW.content,
                NEW.market_ms, NEW.wall_ms);
    END;"""

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the trading core.
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE orders (
        seq INTEGER PRIMARY KEY,
        order_id TEXT NOT NULL UNIQUE,
        client_order_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        symbol TEXT NOT NULL,
        side TEXT NOT NULL,
        order_type TEXT NOT NULL,
        quantity TEXT NOT NULL,
        price TEXT,
        stop_price TEXT,
        reduce_only INTEGER NOT NULL,
        exit_kind TEXT NOT NULL,
        status TEXT NOT NULL,
        filled_quantity TEXT NOT NULL,
        average_price TEXT,
        fee TEXT NOT NULL,
        fee_currency TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        triggered INTEGER NOT NULL,
        quote_amount TEXT,
        reserved TEXT NOT NULL,
        UNIQUE (agent_id, client_order_id)
    );
    CREATE TABLE fills (
        seq INTEGER PRIMARY KEY,
        fill_id TEXT NOT NULL UNIQUE,
        order_id TEXT NOT NULL REFERENCES orders(order_id),
        agent_id TEXT NOT NULL,
        symbol TEXT NOT NULL,
        side TEXT NOT NULL,
        quantity TEXT NOT NULL,
        price TEXT NOT NULL,
        fee TEXT NOT NULL,
        fee_currency TEXT NOT NULL,
        time_ms INTEGER NOT NULL,
        realized_pnl TEXT NOT NULL,
        is_maker INTEGER NOT NULL
    );
    CREATE TABLE balances (asset TEXT PRIMARY KEY, total TEXT NOT NULL);
    CREATE TABLE positions (
        symbol TEXT PRIMARY KEY, size TEXT NOT NULL, avg_price TEXT NOT NULL,
        realized_pnl TEXT NOT NULL
    );
    CREATE TABLE equity_curve (
        time_ms INTEGER PRIMARY KEY, equity TEXT NOT NULL, cash TEXT NOT NULL
    );
    CREATE TABLE risk_decisions (
        id INTEGER PRIMARY KEY,
        now_ms INTEGER NOT NULL, agent_id TEXT NOT NULL, symbol TEXT NOT NULL,
        side TEXT NOT NULL, order_type TEXT NOT NULL, quantity TEXT NOT NULL,
        notional TEXT NOT NULL, accepted INTEGER NOT NULL, rule TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    CREATE TABLE tool_calls (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL, tool_name TEXT NOT NULL, params_json TEXT NOT NULL,
        status TEXT NOT NULL, error_code TEXT, result_xml TEXT NOT NULL,
        started_ms INTEGER NOT NULL, duration_ms REAL NOT NULL
    );
    """,
    # 1 -> 2: per-agent holdings (capital budgets) and lookup indexes.
    """
    CREATE TABLE holdings (
        agent_id TEXT NOT NULL, symbol TEXT NOT NULL, size TEXT NOT NULL, cost TEXT NOT NULL,
        PRIMARY KEY (agent_id, symbol)
    );
    CREATE INDEX fills_symbol_time ON fills (symbol, time_ms);
    CREATE INDEX orders_open ON orders (status, symbol);
    CREATE INDEX tool_calls_agent ON tool_calls (agent_id, started_ms);
    """,
    # 2 -> 3: agents, their inboxes, jobs, conversations, questions, notifications, LLM usage.
    """
    CREATE TABLE agents (
        agent_id TEXT PRIMARY KEY, name TEXT NOT NULL, template TEXT NOT NULL,
        role TEXT NOT NULL, state TEXT NOT NULL, config_json TEXT NOT NULL,
        provider TEXT NOT NULL, model TEXT NOT NULL, created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL, fault_reason TEXT, current_task_id TEXT,
        last_action TEXT NOT NULL DEFAULT '', last_action_ms INTEGER,
        deleted INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE tasks (
        seq INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL UNIQUE, agent_id TEXT NOT NULL, task_type TEXT NOT NULL,
        payload_json TEXT NOT NULL, source TEXT NOT NULL, reply_to TEXT,
        reply_expected INTEGER NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL,
        created_ms INTEGER NOT NULL, taken_ms INTEGER, done_ms INTEGER, result TEXT,
        dedupe_key TEXT UNIQUE
    );
    CREATE INDEX tasks_inbox ON tasks (agent_id, status, seq);
    CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, job_type TEXT NOT NULL,
        cron TEXT, interval_s INTEGER, target_agent_id TEXT NOT NULL, task_type TEXT NOT NULL,
        payload_json TEXT NOT NULL, enabled INTEGER NOT NULL, created_ms INTEGER NOT NULL,
        next_run_ms INTEGER, last_run_ms INTEGER, created_by TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY, agent_id TEXT NOT NULL, task_id TEXT NOT NULL,
        step INTEGER NOT NULL, role TEXT NOT NULL, kind TEXT NOT NULL, content TEXT NOT NULL,
        market_ms INTEGER NOT NULL, wall_ms INTEGER NOT NULL
    );
    CREATE INDEX messages_task ON messages (task_id, id);
    CREATE INDEX messages_agent ON messages (agent_id, id);
    CREATE TABLE llm_usage (
        id INTEGER PRIMARY KEY, agent_id TEXT NOT NULL, task_id TEXT NOT NULL,
        run_id TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
        cached_tokens INTEGER NOT NULL, cost TEXT NOT NULL, latency_ms REAL NOT NULL,
        market_ms INTEGER NOT NULL, wall_ms INTEGER NOT NULL
    );
    CREATE INDEX llm_usage_agent ON llm_usage (agent_id, wall_ms);
    CREATE TABLE questions (
        question_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, task_id TEXT NOT NULL,
        kind TEXT NOT NULL, text TEXT NOT NULL, suggested_json TEXT NOT NULL,
        format_hint TEXT NOT NULL, asked_ms INTEGER NOT NULL, answer TEXT,
        answered_ms INTEGER, details_json TEXT NOT NULL
    );
    CREATE INDEX questions_open ON questions (agent_id, answered_ms);
    CREATE TABLE notifications (
        notification_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, channels TEXT NOT NULL,
        message TEXT NOT NULL, subject TEXT NOT NULL, urgency TEXT NOT NULL,
        created_ms INTEGER NOT NULL, statuses_json TEXT NOT NULL
    );
    CREATE TABLE approvals (
        id INTEGER PRIMARY KEY, question_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        task_id TEXT NOT NULL, client_order_id TEXT, tool_name TEXT NOT NULL,
        params_json TEXT NOT NULL, reason TEXT NOT NULL, decision TEXT,
        decided_ms INTEGER, order_id TEXT
    );
    """,
    # 3 -> 4: the live order journal (app.store.order_journal): every order sent to a real
    # exchange is written here before it is sent, with the fills learnt of it.
    """
    CREATE TABLE order_journal (
        seq INTEGER PRIMARY KEY,
        venue TEXT NOT NULL, client_order_id TEXT NOT NULL, agent_id TEXT NOT NULL,
        agent_order_id TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL,
        order_type TEXT NOT NULL, quantity TEXT NOT NULL, price TEXT, stop_price TEXT,
        quote_amount TEXT, reduce_only INTEGER NOT NULL, exit_kind TEXT NOT NULL,
        note TEXT NOT NULL, state TEXT NOT NULL, exchange_order_id TEXT,
        filled_quantity TEXT NOT NULL, average_price TEXT, fee TEXT NOT NULL,
        fee_currency TEXT NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
        sent_ms INTEGER, last_checked_ms INTEGER, checks INTEGER NOT NULL,
        attempts INTEGER NOT NULL, reason TEXT NOT NULL, escalated INTEGER NOT NULL,
        adopted INTEGER NOT NULL,
        UNIQUE (venue, client_order_id),
        UNIQUE (venue, agent_id, agent_order_id)
    );
    CREATE INDEX order_journal_state ON order_journal (venue, state);
    CREATE INDEX order_journal_exchange_id ON order_journal (venue, exchange_order_id);
    CREATE TABLE journal_fills (
        venue TEXT NOT NULL, trade_id TEXT NOT NULL, client_order_id TEXT NOT NULL,
        exchange_order_id TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL,
        quantity TEXT NOT NULL, price TEXT NOT NULL, cost TEXT NOT NULL, fee TEXT NOT NULL,
        fee_currency TEXT NOT NULL, time_ms INTEGER NOT NULL, is_maker INTEGER NOT NULL,
        PRIMARY KEY (venue, trade_id)
    );
    CREATE INDEX journal_fills_symbol_time ON journal_fills (venue, symbol, time_ms);
    CREATE TABLE journal_meta (
        venue TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (venue, key)
    );
    CREATE TABLE journal_ignored (
        venue TEXT NOT NULL, exchange_order_id TEXT NOT NULL, symbol TEXT NOT NULL,
        ignored_ms INTEGER NOT NULL, PRIMARY KEY (venue, exchange_order_id)
    );
    """,
    # 4 -> 5: the kill switch (app.store.kill_switch_log): every trip, and its reset, in order;
    # the switch is tripped while the newest trip has no reset.
    """
    CREATE TABLE kill_switch_trips (
        trip_id INTEGER PRIMARY KEY,
        cause TEXT NOT NULL, cause_key TEXT NOT NULL, reason TEXT NOT NULL,
        tripped_by TEXT NOT NULL, tripped_ms INTEGER NOT NULL, market_ms INTEGER NOT NULL,
        actions TEXT, reset_ms INTEGER, reset_market_ms INTEGER, reset_by TEXT
    );
    CREATE INDEX kill_switch_trips_key ON kill_switch_trips (cause_key);
    """,
    # 5 -> 6: a live account's equity history (app.store.order_journal), one point per account
    # reading, which the account panel's curve draws as the paper ledger's equity_curve.
    """
    CREATE TABLE journal_equity (
        venue TEXT NOT NULL, time_ms INTEGER NOT NULL, equity TEXT NOT NULL,
        PRIMARY KEY (venue, time_ms)
    );
    """,
    # 6 -> 7: order entry's requests as they were asked (app.store.order_requests), by owner
    # and client order id: what makes a repeated call the same order on every venue; and the
    # stops Kestrel holds itself where the exchange can hold none (app.store.held_stops).
    """
    CREATE TABLE order_requests (
        owner TEXT NOT NULL, client_order_id TEXT NOT NULL, task_id TEXT NOT NULL,
        explicit INTEGER NOT NULL, request TEXT NOT NULL, created_ms INTEGER NOT NULL,
        PRIMARY KEY (owner, client_order_id)
    );
    CREATE INDEX order_requests_task ON order_requests (owner, task_id);
    CREATE TABLE held_stops (
        stop_id INTEGER PRIMARY KEY,
        owner TEXT NOT NULL, symbol TEXT NOT NULL, quantity TEXT NOT NULL,
        stop_price TEXT NOT NULL, created_ms INTEGER NOT NULL, state TEXT NOT NULL,
        order_id TEXT, reason TEXT NOT NULL DEFAULT ''
    );
    """,
    # 7 -> 8: each model call says whether Kestrel counted its tokens (the server reported no
    # usage: ``estimated``) and whether the server cut its answer at the token limit (``cut``).
    """
    ALTER TABLE llm_usage ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE llm_usage ADD COLUMN cut INTEGER NOT NULL DEFAULT 0;
    """,
    # 8 -> 9: each tool result kept once (app.store.texts). A result was stored in its audit row
    # and again in the message that carried it to the model (a task's data block, a tool's
    # answer, a final answer's block results), half of a backtest's database. ``texts`` holds
    # the text once; an audit row refers to its result there, and a message to the results it
    # carries (``parts``: its text as a JSON array of literal strings and text ids). ``key`` is a
    # hash of the text, compared before the text when a writer looks for it among the latest
    # texts; it has no index (one with random keys would dirty a random page per row written).
    # ``tool_calls`` and ``messages`` are now views that put the texts back, so every reader
    # sees every row as it was; what they replace are the tables ``tool_call_rows`` and
    # ``message_rows``, with their rows and indexes as they were (rows written before keep their
    # text in place). Inserting into a view stores the text in place, as before.
    f"""
    CREATE TABLE texts (id INTEGER PRIMARY KEY, key INTEGER NOT NULL, body TEXT NOT NULL);
    ALTER TABLE tool_calls RENAME TO tool_call_rows;
    ALTER TABLE tool_call_rows ADD COLUMN result_id INTEGER REFERENCES texts (id);
    CREATE VIEW tool_calls AS SELECT
        id, agent_id, tool_name, params_json, status, error_code,
        CASE WHEN result_id IS NULL THEN result_xml
             ELSE (SELECT body FROM texts WHERE texts.id = result_id) END AS result_xml,
        started_ms, duration_ms
        FROM tool_call_rows;
    {_TOOL_CALLS_INSERT}
    ALTER TABLE messages RENAME TO message_rows;
    ALTER TABLE message_rows ADD COLUMN parts TEXT;
    CREATE VIEW messages AS SELECT
        id, agent_id, task_id, step, role, kind,
        CASE WHEN parts IS NULL THEN content ELSE (
            SELECT group_concat(piece, '') FROM (
                SELECT CASE part.type WHEN 'integer'
                           THEN (SELECT body FROM texts WHERE texts.id = part.value)
                           ELSE part.value END AS piece
                FROM json_each(message_rows.parts) AS part ORDER BY part.key))
        END AS content,
        market_ms, wall_ms
        FROM message_rows;
    {_MESSAGES_INSERT}
    """,  # noqa: S608 - the SQL is this module's own
    # 9 -> 10: texts compressed together (app.store.texts). A new text's body waits in
    # ``text_pending`` until the pending texts fill a block, then they are packed into one zlib
    # block (``text_blocks``) holding the texts of its range of ids in order (each text's
    # ``size`` in bytes says where it lies; its own ``body`` is empty). Texts written before
    # keep their body in their row and have no size: they are never packed. A new text's
    # ``key`` was its CRC-32 then, and is a 64-bit digest since (app.store.texts); the column
    # is the same. An
    # audit row's parameters are a text too (``params_id``), and a message's long literal
    # pieces; the views read them back through ``sqlar_uncompress`` (registered by
    # ``app.store.texts.install``, and built into the ``sqlite3`` shell). A view's triggers go
    # with it, so both are made again; the messages view differs from the one before only in
    # how a piece's text is read.
    f"""
    DROP VIEW tool_calls;
    DROP VIEW messages;
    CREATE TABLE text_blocks (last_id INTEGER PRIMARY KEY, first_id INTEGER NOT NULL,
                              size INTEGER NOT NULL, data BLOB NOT NULL);
    CREATE TABLE text_pending (id INTEGER PRIMARY KEY REFERENCES texts (id),
                               size INTEGER NOT NULL, body TEXT NOT NULL);
    ALTER TABLE texts ADD COLUMN size INTEGER;
    ALTER TABLE tool_call_rows ADD COLUMN params_id INTEGER REFERENCES texts (id);
    CREATE VIEW tool_calls AS SELECT
        id, agent_id, tool_name,
        CASE WHEN params_id IS NULL THEN params_json
             ELSE {text_sql("tool_call_rows.params_id")} END AS params_json,
        status, error_code,
        CASE WHEN result_id IS NULL THEN result_xml
             ELSE {text_sql("tool_call_rows.result_id")} END AS result_xml,
        started_ms, duration_ms
        FROM tool_call_rows;
    {_TOOL_CALLS_INSERT}
    CREATE VIEW messages AS SELECT
        id, agent_id, task_id, step, role, kind,
        CASE WHEN parts IS NULL THEN content ELSE (
            SELECT group_concat(piece, '') FROM (
                SELECT CASE part.type WHEN 'integer' THEN {text_sql("part.value")}
                           ELSE part.value END AS piece
                FROM json_each(message_rows.parts) AS part ORDER BY part.key))
        END AS content,
        market_ms, wall_ms
        FROM message_rows;
    {_MESSAGES_INSERT}
    """,  # noqa: S608 - the SQL is this module's own
)

SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path | str, *, durable: bool = True) -> sqlite3.Connection:
    """Open (or create) a ledger database, in WAL mode, migrated to the current schema.

    Args:
        durable: ``synchronous=FULL`` (every commit survives power loss) when true; NORMAL
            (survives a killed process, the OS may lose the last commits) otherwise.

    Raises:
        DiskFullError: the disk holding it is full (creating or upgrading it needs room).
        OperationalError: the file is not a database, or was written by a newer Kestrel.
    """
    try:
        conn = install(sqlite3.connect(str(path), isolation_level=None,
                                       check_same_thread=False))
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        conn.execute("PRAGMA foreign_keys=ON")
        # several stores (ledger, agents, queue, scheduler) each hold a connection to one file
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
        if is_checkpointed_in_background(path):
            conn.execute("PRAGMA wal_autocheckpoint=0")
        migrate(conn)
    except sqlite3.DatabaseError as exc:
        reason = disk_full_reason(exc, Path(path).parent)
        if reason is not None:
            raise disk_full_error(
                Path(path).parent, reason, f"the database {path} could not be opened"
            ) from exc
        raise OperationalError(f"cannot open the ledger {path}: {exc}") from exc
    return conn


def connect_read_only(path: Path | str) -> sqlite3.Connection:
    """Open an existing ledger for reading only (another process writes it): nothing here can
    write, not even a schema upgrade; any write raises.

    Raises:
        OperationalError: the file is missing, not a database, or not at this Kestrel's schema.
    """
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    try:
        conn = install(sqlite3.connect(uri, uri=True, isolation_level=None,
                                       check_same_thread=False))
        conn.execute("PRAGMA query_only=ON")
        conn.execute("PRAGMA busy_timeout=10000")
        version = schema_version(conn)
    except sqlite3.DatabaseError as exc:
        raise OperationalError(f"cannot read the ledger {path}: {exc}") from exc
    if version != SCHEMA_VERSION:
        conn.close()
        raise OperationalError(
            f"the ledger {path} has schema version {version}, not {SCHEMA_VERSION}; it can be "
            "read only once the process writing it has opened it with this Kestrel"
        )
    return conn


_background_lock = threading.Lock()
_background: Counter[str] = Counter()


def _key(path: Path | str) -> str:
    return str(Path(path).resolve())


def register_background_checkpoints(path: Path | str) -> None:
    """From now on, connections opened to ``path`` don't checkpoint on commit (a thread does)."""
    with _background_lock:
        _background[_key(path)] += 1


def unregister_background_checkpoints(path: Path | str) -> None:
    with _background_lock:
        key = _key(path)
        _background[key] -= 1
        if _background[key] <= 0:
            del _background[key]


def is_checkpointed_in_background(path: Path | str) -> bool:
    with _background_lock:
        return _background[_key(path)] > 0


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply the missing migration steps up to ``target``; return the resulting version.

    Raises:
        OperationalError: the database is newer than this code knows.
    """
    install(conn)  # what the views call, for a connection opened elsewhere
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise OperationalError(
            f"the ledger has schema version {current} but this Kestrel knows only up to "
            f"{SCHEMA_VERSION}; upgrade Kestrel to open it"
        )
    if current >= target:
        return current
    for version in range(current, target):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # statement by statement (executescript would commit first), so the step and its
            # version bump are one unit
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={version + 1}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return schema_version(conn)


@functools.cache
def _statements(script: str) -> tuple[str, ...]:
    """``script`` cut into its statements, once per process: every new database runs every
    migration, and finding where each statement ends (SQLite's own test, at each semicolon, so
    one inside a string, a comment or a trigger's body does not end it) costs more than
    running it."""
    statements = []
    start = 0
    for end in (i + 1 for i, char in enumerate(script) if char == ";"):
        if sqlite3.complete_statement(script[start:end]):
            statements.append(script[start:end])
            start = end
    if script[start:].strip():
        statements.append(script[start:])
    return tuple(statements)


def _utils(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """sqlite-utils over an open connection, changing nothing about it (no pragmas, no plugins).

    Imported here, not at the top: it loads pandas when present (~0.5 s cold), which the
    window's first second and the light commands must not pay; the stores are built after the
    market data has loaded pandas anyway.
    """
    import sqlite_utils

    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


@contextmanager
def unit_of_work(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """All or nothing: ``BEGIN IMMEDIATE`` ... ``COMMIT``, or, when a grouped commit already
    holds a transaction open on ``conn`` (``GroupedDb``), a savepoint inside it."""
    if conn.in_transaction:
        conn.execute("SAVEPOINT unit")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK TO unit")
            conn.execute("RELEASE unit")
            raise
        conn.execute("RELEASE unit")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.Error:
        # a COMMIT that failed (a full disk, a deferred constraint) may leave the transaction
        # open; the next unit would then be a savepoint inside it, "committed" only in memory
        # and gone at close: end it here
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def store_db(
    path: Path | str | StoreDb, *, durable: bool = True, read_only: bool = False
) -> StoreDb:
    """A store's handle: ``path`` itself when it is an open ``StoreDb`` (a ``GroupedDb`` several
    stores share), else a new connection to the file."""
    if isinstance(path, StoreDb):
        return path
    return StoreDb(path, durable=durable, read_only=read_only)


class StoreDb:
    """One table store's connection to the workspace database.

    Args:
        path: the workspace's ``kestrel.db`` (``":memory:"`` for a store nobody else reads).
        durable: ``synchronous=FULL`` (survives power loss) or NORMAL (survives a killed
            process); see ``connect``.
        read_only: read a database another process writes (``connect_read_only``).

    Raises:
        OperationalError: the file is not a database, or was written by a newer Kestrel.
    """

    def __init__(
        self, path: Path | str, *, durable: bool = True, read_only: bool = False
    ) -> None:
        self.path = path
        self.conn = connect_read_only(path) if read_only else connect(path, durable=durable)
        # serialises the store's own threads inside ``transaction`` (one connection, one unit);
        # re-entrant, as stores sharing a ``GroupedDb`` share it
        self.lock = threading.RLock()
        self._utils = _utils(self.conn)

    def close(self) -> None:
        # under the store's lock: a read on another thread (a panel's refresh in an executor)
        # finishes its statement first; closing a connection under a running statement crashes
        # the process, where a read after the close gets an error it can report
        with self.lock:
            self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` unit: the write lock is taken up front, so a read followed by
        a write inside it cannot race another connection (or process) doing the same."""
        with self.lock, unit_of_work(self.conn) as conn:
            yield conn

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """The rows of a query as dicts keyed by column name."""
        return list(self._utils.query(sql, params))

    def insert(self, table: str, row: Mapping[str, Any]) -> None:
        """Insert one row given as ``{column: value}`` (for rows written now and then: building
        the statement costs more than a hand-written one; hot paths keep theirs)."""
        self._utils.table(table).insert(dict(row))


class GroupedDb(StoreDb):
    """One connection that every store of a world shares, committed when its owner says so.

    Only for a world that nothing else writes and whose crash safety is not each statement (a
    backtest, which is run again, and whose partial report is written from what it ran): a
    statement per transaction costs more there than the statement. ``commit`` ends the open
    transaction and begins the next; until the first ``commit`` every statement commits on its
    own. A store's ``close`` leaves the connection open for the others; ``finish`` commits and
    closes it.

    With a transaction always open, the WAL could never start over (a checkpoint can only reuse
    it between transactions) and would grow with every bar, in file and in memory; so every
    ``CHECKPOINT_EVERY`` commits the connection checkpoints it itself, between two transactions
    (without syncing to disk: ``synchronous=OFF``, as for the rest of a backtest's workspace).
    """

    CHECKPOINT_EVERY = 128

    def __init__(self, path: Path | str) -> None:
        super().__init__(path, durable=False)
        self.conn.execute("PRAGMA synchronous=OFF")
        self._commits = 0

    def commit(self) -> None:
        with self.lock:
            if self.conn.in_transaction:
                self.conn.execute("COMMIT")
                self._commits += 1
                if self._commits % self.CHECKPOINT_EVERY == 0:
                    self.conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
            self.conn.execute("BEGIN IMMEDIATE")

    def close(self) -> None:
        """Nothing: the stores sharing this connection close it with ``finish``."""

    def finish(self) -> None:
        """Commit what is open and close the connection."""
        with self.lock:
            try:
                if self.conn.in_transaction:
                    self.conn.execute("COMMIT")
            finally:
                self.conn.close()
