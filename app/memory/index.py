"""The recall index of one agent: SQLite FTS5 (trigram tokenizer, BM25 ranking) over its chunks.

One database per agent, ``<memory root>/.index/<agent_id>.sqlite3``, outside every agent's folder
so no memory tool can read or damage it, and per agent so one agent's query can never see another's
rows. ``chunks`` says where each chunk came from and keeps its text (compressed), which ranking and
snippets read; ``fts`` indexes that text under the same row id, and ``gram_fts`` its grams (the
short words and CJK characters a trigram index cannot find in the text: ``app.memory.text``);
``files`` remembers each file's size, mtime and inode at indexing, so a rescan re-reads only files
changed by hand, and re-indexing one file deletes its chunks through the ``chunks.path`` index; and
the market time of the change it indexed, which a listing shows (a file's own modification time
is the wall clock's, which in a replay says nothing about the market).

The index holds what recall reads and no more (schema 6; a 1,000-bar agent backtest's indexes
went from 8.9 MB to 6.6 MB, ``tests/benchmarks/bench_storage.py``). Both FTS5 tables are contentless (the text
is kept once, in ``chunks``; a chunk is removed from them with the FTS5 ``delete`` command, given
the text it was indexed with) and keep no column sizes (ranking is ``ranking.bm25_rank``, not
FTS5's). ``fts`` keeps every trigram's positions (``detail=full``): a term is a phrase of trigrams,
found only where they follow one another. ``gram_fts`` needs none (``detail=none``): each gram is
one trigram, looked up alone; its own table spares the text's index the trigrams that span two
grams, which nothing looks up. A backtest's index is merged into one segment when it closes, so
what its deleted chunks left in the index goes, and its file shrinks to what it holds.

The row id *is* the market time: ``market_ms << 20 | sequence``. "Written at or before now" is then
a row-id range FTS5 applies while it walks its doclists, not a filter after the fact, and "the most
recent matches" is a reverse row-id walk that stops early. FTS5 finds; ``ranking.bm25_rank`` ranks.
Ranking is exact Okapi BM25 whenever at most ``RANK_WINDOW`` chunks match. Past that, scoring every
match would grow without bound, so the candidates are the ``RANK_WINDOW`` most recent matches plus
every match of the query's *rare* terms (those in at most ``RARE_TERM_DF`` chunks): an old entry is
still found by what makes it distinctive; only old chunks sharing nothing but common words with the
query are left out. Term and chunk counts only ever include chunks visible at the market time.

The index is derived from the files, so it is never worth an error: an index file SQLite cannot
read, or that lacks its tables, is deleted and rebuilt from the files when it is opened, and one
found unreadable later is marked ``damaged`` and rebuilt by the store on its next use.

A backtest's index is *deferred*: its changes are staged in memory and written together before the
next search (or every ``FLUSH_EVERY`` grouped commits, so memory stays flat). An analyst rewrites
its assessment at every bar and nothing searches most bars, so writing each version through FTS5
cost a quarter of a backtest bar. What a search finds is the same either way: staging keeps the rule
that an unchanged chunk keeps its market time, and writes the chunks in the order eager writing
would have, so the row ids (market time, then order written) sort the same and every ranking tie
falls the same way.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import zlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.memory.ranking import bm25_rank
from app.memory.text import Chunk, Query, chunk_text, grams, locate, normalise
from app.store.db import unit_of_work

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 6
SEQ_BITS = 20
SEQ_MASK = (1 << SEQ_BITS) - 1
RANK_WINDOW = 800
RARE_TERM_DF = 250
DF_SAMPLE = 4000
FLUSH_EVERY = 256  # grouped commits a deferred index may hold its staged changes across
FLUSH_CHUNKS = 4000  # ... or staged chunks, whichever comes first
_FTS = ("CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(body, tokenize='trigram', content='', "
        "columnsize=0)")
_GRAM_FTS = ("CREATE VIRTUAL TABLE IF NOT EXISTS gram_fts USING fts5(grams, tokenize='trigram', "
             "content='', detail=none, columnsize=0)")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, size INTEGER NOT NULL, "
    "mtime_ns INTEGER NOT NULL, ino INTEGER NOT NULL, newlines INTEGER NOT NULL, "
    "ends_newline INTEGER NOT NULL, market_ms INTEGER)",
    "CREATE TABLE IF NOT EXISTS chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, "
    "line INTEGER NOT NULL, digest BLOB NOT NULL, body BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chunks_by_path ON chunks(path)",
    "CREATE TABLE IF NOT EXISTS appends(path TEXT PRIMARY KEY, ino INTEGER NOT NULL, "
    "old_size INTEGER NOT NULL, new_size INTEGER NOT NULL, market_ms INTEGER NOT NULL)",
    _FTS,
    _GRAM_FTS,
)
_TABLES = ("files", "chunks", "appends", "fts_data", "gram_fts_data")
_OLD_TABLES = ("files", "chunks", "appends", "fts", "gram_fts")
# version 4 -> 5: the files' market times (unknown for the files indexed before)
_ADD_MARKET_MS = "ALTER TABLE files ADD COLUMN market_ms INTEGER"
_SIDE_FILES = ("-wal", "-shm", "-journal")
_RECENT = "SELECT rowid FROM {} WHERE {} MATCH ? AND rowid <= ? ORDER BY rowid DESC LIMIT ?"
_TERM_ROWS = "SELECT rowid FROM {} WHERE {} MATCH ? AND rowid <= ? LIMIT ?"
_NTH_CHUNK = "SELECT id FROM chunks WHERE id <= ? ORDER BY id DESC LIMIT 1 OFFSET ?"
_COUNT_IN = "SELECT count(*) FROM {} WHERE {} MATCH ? AND rowid BETWEEN ? AND ?"
_BODIES = "SELECT id, body FROM chunks WHERE id IN ({})"
_BODIES_AT_ONCE = 500


def _pack(body: str) -> bytes:
    """A chunk's text as ``chunks`` keeps it (zlib: journal text shrinks to about two thirds
    even in pieces this small, and it is read back only for the few chunks a search ranks)."""
    return zlib.compress(body.encode("utf-8"), 6)


def _unpack(stored: bytes) -> str:
    return zlib.decompress(stored).decode("utf-8")


@dataclass(frozen=True, slots=True)
class FileState:
    """What a file looked like when it was last indexed, and the market time of that change
    (None: unknown, indexed before the index kept it)."""

    size: int
    mtime_ns: int
    ino: int
    newlines: int
    ends_newline: bool
    market_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """One recalled snippet: source file, 1-based line, BM25 score (higher is better)."""

    path: str
    line: int
    score: float
    snippet: str
    market_ms: int


@dataclass(slots=True)
class _Staged:
    """One file's index changes a deferred index holds back.

    ``rewritten``: the file's indexed chunks are replaced by ``chunks``; otherwise ``chunks`` are
    added to them (appends). Each chunk carries its market time and the order it was written in.
    ``state`` None: the file was removed.
    """

    rewritten: bool
    chunks: list[tuple[Chunk, int, int]] = field(default_factory=list)
    state: FileState | None = None


def market_ms_of(rowid: int) -> int:
    return rowid >> SEQ_BITS


def remove_index(db_path: Path) -> None:
    """Delete an index file and its WAL companions (it is rebuilt from the memory files)."""
    for candidate in (db_path, *(db_path.with_name(db_path.name + s) for s in _SIDE_FILES)):
        candidate.unlink(missing_ok=True)


def _index_text(conn: sqlite3.Connection, chunk_id: int, body: str) -> None:
    """Index a chunk's text and its grams under its row id."""
    conn.execute("INSERT INTO fts(rowid, body) VALUES (?, ?)", (chunk_id, body))
    chunk_grams = grams(body)
    if chunk_grams:
        conn.execute("INSERT INTO gram_fts(rowid, grams) VALUES (?, ?)", (chunk_id, chunk_grams))


def _unindex_text(conn: sqlite3.Connection, chunk_id: int, body: str) -> None:
    """Take a chunk out of both FTS5 tables: contentless, they are told the text it was indexed
    with (its grams follow from it)."""
    conn.execute("INSERT INTO fts(fts, rowid, body) VALUES ('delete', ?, ?)", (chunk_id, body))
    chunk_grams = grams(body)
    if chunk_grams:
        conn.execute("INSERT INTO gram_fts(gram_fts, rowid, grams) VALUES ('delete', ?, ?)",
                     (chunk_id, chunk_grams))


def _upgrade_to_6(conn: sqlite3.Connection) -> None:
    """Bring an index of schema 5 to 6 in place, inside the caller's transaction: every chunk
    keeps its row id (its market time) and its text, now kept in ``chunks`` and indexed in the
    contentless tables. Rebuilding from the files instead would lose the market times of the
    changes the index recorded."""
    conn.execute("CREATE TABLE chunks_v6(id INTEGER PRIMARY KEY, path TEXT NOT NULL, "
                 "line INTEGER NOT NULL, digest BLOB NOT NULL, body BLOB NOT NULL)")
    conn.execute(_FTS.replace(" fts ", " fts_v6 "))
    conn.execute(_GRAM_FTS.replace(" gram_fts ", " gram_fts_v6 "))
    rows = conn.execute("SELECT c.id, c.path, c.line, c.digest, f.body FROM chunks c "
                        "JOIN fts f ON f.rowid = c.id ORDER BY c.id").fetchall()
    for chunk_id, path, line, digest, body in rows:
        conn.execute("INSERT INTO chunks_v6(id, path, line, digest, body) VALUES (?, ?, ?, ?, ?)",
                     (chunk_id, path, line, digest, _pack(body)))
        conn.execute("INSERT INTO fts_v6(rowid, body) VALUES (?, ?)", (chunk_id, body))
        chunk_grams = grams(body)
        if chunk_grams:
            conn.execute("INSERT INTO gram_fts_v6(rowid, grams) VALUES (?, ?)",
                         (chunk_id, chunk_grams))
    conn.execute("DROP TABLE chunks")
    conn.execute("DROP TABLE fts")
    conn.execute("ALTER TABLE chunks_v6 RENAME TO chunks")
    conn.execute("CREATE INDEX chunks_by_path ON chunks(path)")
    conn.execute("ALTER TABLE fts_v6 RENAME TO fts")
    conn.execute("ALTER TABLE gram_fts_v6 RENAME TO gram_fts")


class RecallIndex:
    """Full-text index of one agent's memory files; thread-safe, one connection behind a lock."""

    def __init__(self, db_path: Path, *, synced: bool = True, deferred: bool = False) -> None:
        """Open the index, creating it, or rebuilding it (empty) when it is unreadable.

        ``synced``: its checkpoints sync to disk (off for a backtest's scratch memory).
        ``deferred``: changes are staged in memory until a search or a flush (a backtest's
        scratch memory, which is made again after a crash; see the module's docstring).
        """
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self.path = db_path
        self.lock = threading.Lock()
        self.damaged = False  # found unreadable in use: the store replaces it on next use
        self.rebuilt = False  # it was unreadable at open and starts empty
        try:
            self._conn = self._open(db_path, synced)
        except sqlite3.DatabaseError as exc:
            self.rebuilt = True
            logger.warning(
                "the recall index %s is unreadable (%s): rebuilding it from the memory files",
                db_path, exc,
            )
            remove_index(db_path)
            self._conn = self._open(db_path, synced)
        self._total = int(self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        self.deferred = deferred
        self._staged: dict[str, _Staged] = {}
        self._staged_chunks = 0
        self._written = 0  # the order chunks were staged in
        self._groups = 0
        # a deferred index's append intents (``begin_append``): in memory, written at a flush
        self._intents: dict[str, tuple[int, int, int, int]] = {}
        self._intents_changed = False
        if deferred:
            for path, *intent in self._conn.execute(
                "SELECT path, ino, old_size, new_size, market_ms FROM appends"
            ).fetchall():
                self._intents[path] = (intent[0], intent[1], intent[2], intent[3])

    @staticmethod
    def _open(db_path: Path, synced: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(
            db_path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        try:
            # a new file gives back the pages its merges free (``_compact``); an older file
            # keeps its mode (changing it would take a VACUUM)
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'NORMAL' if synced else 'OFF'}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version == 4:
                    conn.execute(_ADD_MARKET_MS)
                    version = 5
                if version == 5:
                    _upgrade_to_6(conn)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    version = SCHEMA_VERSION
                if version not in (0, SCHEMA_VERSION):  # an index is a cache: rebuild it
                    for table in _OLD_TABLES:
                        conn.execute(f"DROP TABLE IF EXISTS {table}")
                    version = 0
                if version == 0:
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                for table in _TABLES:  # raises when a table is missing or unreadable
                    conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall()  # noqa: S608
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except BaseException:
            conn.close()
            raise
        return conn

    def readable(self) -> bool:
        """Whether every table can still be read (a cheap probe after an error)."""
        try:
            with self.lock:
                for table in _TABLES:
                    self._conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall()  # noqa: S608
        except sqlite3.DatabaseError:
            return False
        return True

    def close(self) -> None:
        """Write what is staged, commit what a grouped commit holds open, then close.

        If the staged changes cannot be written (a full disk), the open transaction is rolled
        back instead: the index is then behind the files, never half-way, and the next open
        re-indexes the files that changed (their recorded sizes and times no longer match).
        """
        with self.lock:
            try:
                try:
                    self._flush()
                except sqlite3.DatabaseError as exc:
                    logger.warning("%s; it catches up with the files when next opened", exc)
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK" if self.damaged else "COMMIT")
                if self.deferred and not self.damaged:
                    self._compact()
            finally:
                self._conn.close()

    def _compact(self) -> None:
        """Merge each FTS5 table into one segment and give the freed pages back to the file
        system: a backtest's index is final when it closes, and until merged it holds what its
        deleted chunks left (an analysis log rolled over into its archive is deleted and
        indexed again whole). An index is derived from the files: failing here costs nothing."""
        try:
            self._conn.execute("INSERT INTO fts(fts) VALUES ('optimize')")
            self._conn.execute("INSERT INTO gram_fts(gram_fts) VALUES ('optimize')")
            self._conn.execute("PRAGMA incremental_vacuum").fetchall()
        except sqlite3.DatabaseError as exc:
            logger.info("the recall index %s was not compacted: %s", self.path.name, exc)

    def commit_group(self) -> None:
        """Commit everything since the last call and hold the next transaction open: from the
        first call on, each change is a savepoint inside it (``MemoryStore`` with grouped
        commits, a backtest's). A deferred index writes what it staged every ``FLUSH_EVERY``
        calls, or sooner when it holds ``FLUSH_CHUNKS`` chunks."""
        with self.lock:
            self._groups += 1
            if self._groups % FLUSH_EVERY == 0 or self._staged_chunks >= FLUSH_CHUNKS:
                self._flush()
            if self._conn.in_transaction:
                self._conn.execute("COMMIT")
            self._conn.execute("BEGIN IMMEDIATE")

    def flush(self) -> None:
        """Write a deferred index's staged changes now (a no-op for an eager index)."""
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        """Write the staged changes in one transaction; the caller holds the lock.

        Chunks go in by (market time, order staged): the order an eager index wrote them in, so
        each gets the row id it would have had there.
        """
        if not self.deferred or (not self._staged and not self._intents_changed):
            return
        if self.damaged:  # to be rebuilt from the files, which hold every staged change
            self._staged, self._staged_chunks = {}, 0
            return
        staged, self._staged, self._staged_chunks = self._staged, {}, 0
        try:
            self._write_staged(staged)
        except Exception as exc:
            # the changes are in the files, which a rebuild reads (``MemoryStore.healing``)
            self.damaged = True
            raise sqlite3.DatabaseError(
                f"the recall index {self.path.name} could not write its staged changes: {exc}"
            ) from exc

    def _write_staged(self, staged: dict[str, _Staged]) -> None:
        with self._transaction():
            inserts: list[tuple[int, int, str, Chunk]] = []
            for path, change in staged.items():
                if change.rewritten:
                    self._delete(path)
                inserts.extend((ms, order, path, chunk) for chunk, ms, order in change.chunks)
                if change.state is None:
                    self._conn.execute("DELETE FROM files WHERE path = ?", (path,))
                else:
                    self._save_state(path, change.state)
            inserts.sort(key=lambda row: (row[0], row[1]))
            for market_ms, _order, path, chunk in inserts:
                self._insert(path, [chunk], [market_ms])
            self._conn.execute("DELETE FROM appends")
            self._conn.executemany(
                "INSERT INTO appends(path, ino, old_size, new_size, market_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                [(path, *intent) for path, intent in self._intents.items()],
            )
            self._intents_changed = False

    def _stage(self, path: str, rewritten: bool, chunks: list[Chunk], times: list[int],
               state: FileState | None) -> None:
        """Hold one change of a deferred index; the caller holds the lock."""
        change = self._staged.get(path)
        if change is None or rewritten:
            if change is not None:
                self._staged_chunks -= len(change.chunks)
            change = self._staged[path] = _Staged(rewritten)
        for chunk, market_ms in zip(chunks, times, strict=True):
            change.chunks.append((chunk, market_ms, self._written))
            self._written += 1
        self._staged_chunks += len(chunks)
        change.state = state
        if self._intents.pop(path, None) is not None:  # as ``_save_state`` does
            self._intents_changed = True

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """A change: its own transaction, or inside a grouped commit part of the open one.

        Not a savepoint there: releasing one makes FTS5 write out its pending terms as a new
        segment at every change, which then costs merging. A change that fails half-way in a
        group cannot be undone alone, so the index is marked damaged instead, and the store
        rebuilds it from the files (it is derived from them) before its next use.
        """
        if not self._conn.in_transaction:
            with unit_of_work(self._conn):
                yield
            return
        try:
            yield
        except BaseException:
            self.damaged = True
            raise

    def file_state(self, path: str) -> FileState | None:
        with self.lock:
            change = self._staged.get(path)
            if change is not None:
                return change.state
            row = self._conn.execute(
                "SELECT size, mtime_ns, ino, newlines, ends_newline, market_ms FROM files "
                "WHERE path = ?", (path,),
            ).fetchone()
        return None if row is None else FileState(row[0], row[1], row[2], row[3], bool(row[4]),
                                                  row[5])

    def indexed_files(self) -> dict[str, FileState]:
        """Every indexed file's state (also re-reads the chunk count other processes may change)."""
        with self.lock:
            self._flush()
            self._total = int(self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
            rows = self._conn.execute(
                "SELECT path, size, mtime_ns, ino, newlines, ends_newline, market_ms FROM files"
            ).fetchall()
        return {r[0]: FileState(r[1], r[2], r[3], r[4], bool(r[5]), r[6]) for r in rows}

    def _next_id(self, market_ms: int) -> int:
        """A free row id for a chunk written at ``market_ms`` (spilling to a later ms if full)."""
        market_ms = max(0, market_ms)
        while True:
            base = market_ms << SEQ_BITS
            top = self._conn.execute(
                "SELECT max(id) FROM chunks WHERE id BETWEEN ? AND ?", (base, base | SEQ_MASK)
            ).fetchone()[0]
            if top is None:
                return base
            if top < base | SEQ_MASK:
                return top + 1
            market_ms += 1  # never earlier: a chunk may show up late, never early

    def _insert(self, path: str, chunks: list[Chunk], times: list[int]) -> None:
        for chunk, market_ms in zip(chunks, times, strict=True):
            chunk_id = self._next_id(market_ms)
            body = normalise(chunk.text)
            self._conn.execute(
                "INSERT INTO chunks(id, path, line, digest, body) VALUES (?, ?, ?, ?, ?)",
                (chunk_id, path, chunk.line, chunk.digest, _pack(body)),
            )
            _index_text(self._conn, chunk_id, body)
            self._total += 1

    def _kept_times(self, path: str) -> dict[bytes, list[int]]:
        """Each chunk text the file has now -> its market times, oldest first, as ``_delete``
        finds them (a deferred index's staged chunks included); the caller holds the lock."""
        change = self._staged.get(path)
        rows: list[tuple[int, int, int, bytes]] = []
        if change is None or not change.rewritten:
            rows = [
                (market_ms_of(chunk_id), 0, chunk_id, bytes(digest))
                for chunk_id, digest in self._conn.execute(
                    "SELECT id, digest FROM chunks WHERE path = ?", (path,)
                ).fetchall()
            ]
        if change is not None:
            rows.extend((ms, 1, order, chunk.digest) for chunk, ms, order in change.chunks)
        rows.sort()
        old: dict[bytes, list[int]] = defaultdict(list)
        for market_ms, _staged, _order, digest in rows:
            old[digest].append(market_ms)
        return old

    def _delete(self, path: str) -> dict[bytes, list[int]]:
        rows = self._conn.execute(
            "SELECT id, digest, body FROM chunks WHERE path = ?", (path,)
        ).fetchall()
        old: dict[bytes, list[int]] = defaultdict(list)
        for chunk_id, digest, stored in rows:
            old[bytes(digest)].append(market_ms_of(chunk_id))
            _unindex_text(self._conn, chunk_id, _unpack(stored))
        self._conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
        self._total -= len(rows)
        return old

    def begin_append(
        self, path: str, ino: int, old_size: int, new_size: int, market_ms: int
    ) -> None:
        """Record, before any byte is appended, that ``path`` is growing from ``old_size`` to
        ``new_size``: committed to the WAL, it outlives a killed process (a write-ahead intent)."""
        if self.deferred:
            with self.lock:
                self._intents[path] = (ino, old_size, new_size, market_ms)
                self._intents_changed = True
            return
        with self.lock, self._transaction():
            self._conn.execute(
                "INSERT OR REPLACE INTO appends(path, ino, old_size, new_size, market_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                (path, ino, old_size, new_size, market_ms),
            )

    def pending_append(self, path: str) -> tuple[int, int, int, int] | None:
        """``(ino, old_size, new_size, market_ms)`` of an append that never finished, if any."""
        if self.deferred:
            with self.lock:
                return self._intents.get(path)
        with self.lock:
            row = self._conn.execute(
                "SELECT ino, old_size, new_size, market_ms FROM appends WHERE path = ?", (path,)
            ).fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def clear_append(self, path: str) -> None:
        if self.deferred:
            with self.lock:
                if self._intents.pop(path, None) is not None:
                    self._intents_changed = True
            return
        with self.lock, self._transaction():
            self._conn.execute("DELETE FROM appends WHERE path = ?", (path,))

    def _save_state(self, path: str, state: FileState) -> None:
        self._conn.execute("DELETE FROM appends WHERE path = ?", (path,))
        self._conn.execute(
            "INSERT OR REPLACE INTO files(path, size, mtime_ns, ino, newlines, ends_newline, "
            "market_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (path, state.size, state.mtime_ns, state.ino, state.newlines, int(state.ends_newline),
             state.market_ms),
        )

    def replace_file(
        self,
        path: str,
        text: str,
        state: FileState,
        *,
        write_ms: int | None,
        unknown_ms: int,
    ) -> None:
        """Re-index a whole file.

        A chunk identical to one the file had before keeps that chunk's market time (its text
        already existed then). A new chunk written through the tools gets the write's market time
        (or its entry header's, if later); a new chunk found in a file edited by hand gets its entry
        header's time, else ``unknown_ms``.
        """
        chunks = chunk_text(text)
        with self.lock, self._transaction():
            old = self._kept_times(path) if self.deferred else self._delete(path)
            times = []
            for chunk in chunks:
                kept = old.get(chunk.digest)
                if kept:
                    times.append(kept.pop())
                elif write_ms is not None:
                    times.append(max(chunk.header_ms or 0, write_ms))
                else:
                    times.append(chunk.header_ms if chunk.header_ms is not None else unknown_ms)
            if self.deferred:
                self._stage(path, True, chunks, times, state)
                return
            self._insert(path, chunks, times)
            self._save_state(path, state)

    def append_text(
        self, path: str, text: str, first_line: int, state: FileState, *, write_ms: int
    ) -> None:
        """Index text appended at ``first_line`` without touching the file's earlier chunks."""
        chunks = chunk_text(text, first_line)
        times = [max(chunk.header_ms or 0, write_ms) for chunk in chunks]
        with self.lock, self._transaction():
            if self.deferred:
                self._stage(path, False, chunks, times, state)
                return
            self._insert(path, chunks, times)
            self._save_state(path, state)

    def remove_file(self, path: str) -> None:
        with self.lock, self._transaction():
            if self.deferred:
                self._stage(path, True, [], [], None)
                return
            self._delete(path)
            self._conn.execute("DELETE FROM files WHERE path = ?", (path,))
            self._conn.execute("DELETE FROM appends WHERE path = ?", (path,))

    def _visible(self, high: int) -> int:
        """How many chunks were written at or before the cut-off (future ones are few to count)."""
        future = self._conn.execute("SELECT count(*) FROM chunks WHERE id > ?", (high,)).fetchone()
        return self._total - int(future[0])

    def _frequencies(
        self, query: Query, high: int, total: int
    ) -> tuple[dict[str, int], dict[int, None]]:
        """Each term's document frequency, and every match of the rare ones (at most
        ``RARE_TERM_DF``, counted exactly, in the order found); common terms' frequency is
        estimated from a sample."""
        dfs: dict[str, int] = {}
        rare_rows: dict[int, None] = {}
        sample_low: int | None = None
        for term, phrase in zip(query.terms, query.phrases, strict=True):
            table = "gram_fts" if term in query.short else "fts"
            rows = self._conn.execute(_TERM_ROWS.format(table, table),
                                      (phrase, high, RARE_TERM_DF + 1)).fetchall()
            if len(rows) <= RARE_TERM_DF:
                dfs[term] = len(rows)
                rare_rows.update(dict.fromkeys(row[0] for row in rows))
                continue
            if sample_low is None:
                found = self._conn.execute(_NTH_CHUNK, (high, DF_SAMPLE - 1)).fetchone()
                sample_low = 0 if found is None else found[0]
            sampled = self._conn.execute(_COUNT_IN.format(table, table),
                                         (phrase, sample_low, high)).fetchone()[0]
            size = min(DF_SAMPLE, total)
            dfs[term] = max(RARE_TERM_DF + 1, round(total * sampled / max(size, 1)))
        return dfs, rare_rows

    def _recent(self, query: Query, high: int) -> list[int]:
        """The ``RANK_WINDOW`` most recent matches of any term, most recent first: each table's
        most recent, merged."""
        found: list[int] = []
        searched = 0
        for table, expression in (("fts", query.body_expression),
                                  ("gram_fts", query.grams_expression)):
            if expression:
                searched += 1
                found += [row[0] for row in self._conn.execute(
                    _RECENT.format(table, table), (expression, high, RANK_WINDOW))]
        if searched > 1:
            found = sorted(set(found), reverse=True)[:RANK_WINDOW]
        return found

    def _bodies(self, ids: list[int]) -> dict[int, str]:
        """The text of each chunk in ``ids``."""
        bodies: dict[int, str] = {}
        for start in range(0, len(ids), _BODIES_AT_ONCE):
            batch = ids[start:start + _BODIES_AT_ONCE]
            for chunk_id, stored in self._conn.execute(
                    _BODIES.format(", ".join("?" * len(batch))), batch):
                bodies[chunk_id] = _unpack(stored)
        return bodies

    def search(self, query: Query, limit: int, until_ms: int) -> list[Hit]:
        """The best ``limit`` chunks written at or before ``until_ms``, best first.

        Candidates are the ``RANK_WINDOW`` most recent matches plus every match of the query's
        rare terms; when fewer chunks match than the window holds, that is every match.
        """
        high = (max(0, until_ms) << SEQ_BITS) | SEQ_MASK
        with self.lock:
            self._flush()
            total = self._visible(high)
            if total <= 0:
                return []
            recent = self._recent(query, high)
            if not recent:
                return []
            dfs, candidates = self._frequencies(query, high, total)
            candidates.update(dict.fromkeys(recent))
            bodies = self._bodies(list(candidates))
            ranked = bm25_rank(((rowid, bodies[rowid]) for rowid in candidates), query.terms,
                               query.short, dfs, total, limit)
            rows = []
            for rowid, score in ranked:
                path, line = self._conn.execute(
                    "SELECT path, line FROM chunks WHERE id = ?", (rowid,)
                ).fetchone()
                rows.append((rowid, score, path, line, bodies[rowid]))
        hits = []
        for rowid, score, path, line, body in rows:
            offset, snippet = locate(body, query.terms)
            hits.append(Hit(path, line + offset, round(score, 3), snippet, market_ms_of(rowid)))
        return hits

    def chunk_count(self) -> int:
        with self.lock:
            self._flush()
            return int(self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
