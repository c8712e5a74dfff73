"""Texts kept once in the workspace database, compressed together, and the rows made of them.

Why: an agent backtest's database was mostly text, the same text over and over: a tool's result
in its audit row and again in the message that carried it to the model, and one bar's results
nearly the same as the last bar's (the candles the Analyst reads move by one a bar; the memory
files it reads change by a line). Each text is now one ``texts`` row, referred to by id: an
audit row refers to its result and its parameters, a message to its pieces (``parts``, a JSON
array of its short literal pieces and the ids of the texts between them, in order).

Texts are written plain, then packed. A new text's row holds its key and size; its body waits
in ``text_pending``. Once the pending texts hold ``BLOCK_BYTES``, they are joined and compressed
(zlib, on a thread of its own) into one ``text_blocks`` row, written at a later write, which
holds the texts of its range of ids in order (a text's start there is the size of those before
it), and the pending bodies are deleted (deleting gives their pages back for
the next texts, where shrinking a row in place would leave its page mostly empty). Compressed
together, consecutive texts cost a small fraction of their size, which compressing each alone
could not do: what repeats is from one text to the next. A block's data is read with
``sqlar_uncompress(data, size)``, the function the ``sqlite3`` command-line shell provides for
SQLite archives, so the ``tool_calls`` and ``messages`` views (``app.store.db``) put every row
back for any reader: Kestrel's connections register the same function (``install``), and so
does the shell.

A text is looked for among the latest ``RECENT_TEXTS`` texts this process looked for, kept
in memory (a lookup in the database cost every text a query; an index over all texts would
cost every write a page at a random place in it): the copies of a text are written moments apart
(the message that carries a result and its audit row). One found there is used only once the
connection asking holds that very text under that id (a transaction rolled back may have given
the id to another text, and several workspaces may be open in one process): its row there has
the text's size and ``key``, the first eight bytes of the text's BLAKE2b digest (one lookup by
primary key, where comparing the text itself meant cutting it from its inflated block once it
was packed; two texts taken for each other would need equal 64-bit digests). Rows written before
keys were digests hold a CRC-32 there, which no digest is taken for: their text is stored
again. A text that comes back much later, or from another process, is stored again, which costs
little once packed beside its neighbours.

Crash safety: whoever writes a row writes the texts it refers to first, on the same connection,
in the same transaction when there is one; a block and the deletion of its texts' pending
bodies are written in one transaction. A text's content never changes (packing
moves it, in one transaction), and one that lost its row (a crash between two statements
outside a transaction) is harmless: nothing refers to it, and it costs only its bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import zlib
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

TOOL_RESULT_OPEN = "<tool_result "
TOOL_RESULT_CLOSE = "</tool_result>"
# a text shorter than this stays in its row: a reference and its lookup would cost more
MIN_SHARED_CHARS = 64

RECENT_TEXTS = 128  # a backtest's results of over ten bars; a text's copies come within one
# what one block holds before compression. zlib refers back 32 KiB at most, and each block
# starts with nothing to refer to; a larger block starts cold less often, and reading one text
# inflates its whole block (the latest are kept inflated)
BLOCK_BYTES = 128 * 1024
# the pending texts are added up at every ``PACK_EVERY``-th text (texts written before
# packing have their body in their row and no ``size``: they stay as they are)
PACK_EVERY = 32

_INSERT = "INSERT INTO texts (key, size, body) VALUES (?, ?, '')"
_INSERT_PENDING = "INSERT INTO text_pending (id, size, body) VALUES (?, ?, ?)"
_PENDING = "SELECT id, body FROM text_pending ORDER BY id"
_PENDING_RANGE = "SELECT id, body FROM text_pending WHERE id BETWEEN ? AND ? ORDER BY id"
# the size comes before the body in a row: adding them up reads no body
_PENDING_SIZE = "SELECT total(size) FROM text_pending"


# a packed text's block: the first whose range of ids reaches it; and its start there (0-based):
# the size of the texts before it in that range (``t`` the text's row, ``b`` the block's)
_BLOCK_OF = "b.last_id >= t.id ORDER BY b.last_id LIMIT 1"
_START_IN_BLOCK = ("ifnull((SELECT sum(s.size) FROM texts AS s "
                   "WHERE s.id >= b.first_id AND s.id < t.id), 0)")


def text_sql(id_expr: str) -> str:
    """SQL for the text whose id ``id_expr`` gives: in its row (written before texts were
    packed: no size), pending, or cut from the block whose range of ids holds it."""
    return ("(SELECT CASE WHEN t.size IS NULL THEN t.body ELSE coalesce("  # noqa: S608
            "(SELECT p.body FROM text_pending AS p WHERE p.id = t.id), "
            f"(SELECT CAST(substr(sqlar_uncompress(b.data, b.size), 1 + {_START_IN_BLOCK}, "
            f"t.size) AS TEXT) FROM text_blocks AS b WHERE {_BLOCK_OF})) END "
            f"FROM texts AS t WHERE t.id = {id_expr})")


# a remembered text is the one under its id when that row has its size and key
_HOLDS = "SELECT 1 FROM texts WHERE id = ? AND key = ? AND size = ?"
_READ = f"SELECT {text_sql('?')}"  # noqa: S608


def _inflate(data: bytes, size: int) -> bytes:
    """``data`` inflated; the latest blocks are kept inflated, found by their sizes and taken
    only when their compressed bytes are the same (comparing costs far less than hashing them,
    and a block of another database or one rewritten since is never mistaken for this one)."""
    key = (len(data), size)
    with _inflated_lock:
        kept = _inflated.get(key)
    if kept is not None and kept[0] == data:
        return kept[1]
    inflated = zlib.decompress(data)
    with _inflated_lock:
        _inflated[key] = (data, inflated)
        _inflated.move_to_end(key)
        while len(_inflated) > INFLATED_BLOCKS:
            _inflated.popitem(last=False)
    return inflated


INFLATED_BLOCKS = 16
_inflated: OrderedDict[tuple[int, int], tuple[bytes, bytes]] = OrderedDict()
_inflated_lock = threading.Lock()


def sqlar_uncompress(data: bytes | None, size: int | None) -> bytes | None:
    """A block's bytes, as the ``sqlite3`` shell's function of this name gives them: stored as
    they are when compressing did not make them smaller. The latest blocks are kept inflated
    (``_inflate``): the texts of one page of a listing are mostly in one block."""
    if data is None or size is None:
        return None
    data = bytes(data)
    if len(data) == size:
        return data
    return _inflate(data, size)


def install(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Give ``conn`` what the views that read texts call; every connection to a workspace
    database that reads ``tool_calls`` or ``messages`` needs it."""
    conn.create_function("sqlar_uncompress", 2, sqlar_uncompress, deterministic=True)
    return conn


def text_key(data: bytes) -> int:
    """The ``key`` of a text: the first eight bytes of the BLAKE2b digest of its UTF-8, as a
    signed 64-bit integer (what an SQLite integer holds)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


def put_text(conn: sqlite3.Connection, text: str, *, look: bool = True) -> int:
    """The id of ``text`` in ``texts``: one of the latest texts when it is there, else a new
    one stored now (and the plain texts packed when they fill a block).

    ``look=False`` stores it without looking, and leaves the latest texts as they are: for a
    text that is rarely seen twice (the words between a message's results).
    """
    data = text.encode("utf-8")
    key = text_key(data)
    if look:
        with _recent_lock:
            found = _recent.get(text)
        if found is not None and conn.execute(_HOLDS, (found, key, len(data))).fetchone():
            _remember(text, found)
            return found
    with _own_transaction(conn):
        text_id = int(conn.execute(_INSERT, (key, len(data))).lastrowid or 0)
        conn.execute(_INSERT_PENDING, (text_id, len(data), text))
        if text_id % PACK_EVERY == 0:
            _pack_when_full(conn)
    if look:
        _remember(text, text_id)
    return text_id


def _remember(text: str, text_id: int) -> None:
    with _recent_lock:
        _recent[text] = text_id
        _recent.move_to_end(text)
        if len(_recent) > RECENT_TEXTS:
            _recent.popitem(last=False)


# the latest texts stored or found, by text (see the module's docstring)
_recent: OrderedDict[str, int] = OrderedDict()
_recent_lock = threading.Lock()


def _pack_when_full(conn: sqlite3.Connection) -> None:
    """Once the pending texts hold ``BLOCK_BYTES``, compress them into one block; the caller
    holds a transaction.

    zlib takes about a millisecond a block, which a backtest would otherwise spend every few
    bars, and lets other threads run meanwhile: so the texts are compressed on a thread of
    their own, and the block is written at a later check, once compressed. By then the
    transaction that read them may have been rolled back and their ids used again, so it is
    written only if the pending texts of its range are still exactly the ones it holds.
    """
    with _compressing_lock:
        waiting = _compressing.get(id(conn))
        if waiting is not None and waiting.compressed.done():
            del _compressing[id(conn)]
    if waiting is not None:
        if not waiting.compressed.done():
            return
        _write_block(conn, waiting)
    if conn.execute(_PENDING_SIZE).fetchone()[0] < BLOCK_BYTES:
        return
    texts = conn.execute(_PENDING).fetchall()
    data = "".join(body for _, body in texts).encode("utf-8")
    with _compressing_lock:
        _compressing[id(conn)] = _Block(texts, len(data), _compressor().submit(_compress, data))
        while len(_compressing) > _MAX_COMPRESSING:  # left by connections closed since
            del _compressing[next(iter(_compressing))]


def _write_block(conn: sqlite3.Connection, block: _Block) -> None:
    first, last = block.texts[0][0], block.texts[-1][0]
    if conn.execute(_PENDING_RANGE, (first, last)).fetchall() != block.texts:
        return  # changed since it was read: the next check packs what is pending then
    conn.execute("INSERT INTO text_blocks (last_id, first_id, size, data) VALUES (?, ?, ?, ?)",
                 (last, first, block.size, block.compressed.result()))
    conn.execute("DELETE FROM text_pending WHERE id BETWEEN ? AND ?", (first, last))


@dataclass(frozen=True, slots=True)
class _Block:
    """The pending texts being compressed into a block, in order, and their size in bytes."""

    texts: list[tuple[int, str]]
    size: int
    compressed: Future[bytes]


def _compress(data: bytes) -> bytes:
    squeezed = zlib.compress(data, 6)
    return squeezed if len(squeezed) < len(data) else data


# the block each connection has being compressed, by the connection's ``id`` (a connection
# takes no attributes)
_compressing: dict[int, _Block] = {}
_compressing_lock = threading.Lock()
_MAX_COMPRESSING = 8
_executor: tuple[int, ThreadPoolExecutor] | None = None


def _compressor() -> ThreadPoolExecutor:
    """The thread blocks are compressed on, this process's own (a forked process inherits the
    executor but not its thread); the caller holds ``_compressing_lock``."""
    global _executor
    if _executor is None or _executor[0] != os.getpid():
        _executor = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="texts"))
    return _executor[1]


def _own_transaction(conn: sqlite3.Connection) -> AbstractContextManager[object]:
    """The transaction ``conn`` holds open, else a unit of work of its own (which also ends a
    transaction whose COMMIT failed, on a full disk)."""
    if conn.in_transaction:
        return nullcontext()
    from app.store.db import unit_of_work  # imported here: app.store.db imports this module

    return unit_of_work(conn)


def compose(conn: sqlite3.Connection, content: str) -> str | None:
    """Store the long pieces of ``content`` as texts and return its parts (JSON); None when it
    is short enough to be stored as it is.

    Its pieces are the tool results it carries (a ``<tool_result ...>`` envelope up to its first
    ``</tool_result>``: the text a result holds is escaped, so nothing inside one can close it
    early or open another) and the text between them; a piece under ``MIN_SHARED_CHARS`` stays
    a literal. The parts are cut from ``content`` itself, so putting them back together gives it
    exactly.
    """
    if len(content) < MIN_SHARED_CHARS or "\x00" in content:  # a NUL would end the text in SQL
        return None
    parts: list[str | int] = []
    for piece in _pieces(content):
        # a result is also in its audit row; the text between results is this message's own
        parts.append(put_text(conn, piece, look=piece.startswith(TOOL_RESULT_OPEN))
                     if len(piece) >= MIN_SHARED_CHARS else piece)
    return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))


def _pieces(content: str) -> list[str]:
    """``content`` cut around the tool results it carries, in order, none empty."""
    pieces: list[str] = []
    done = 0
    start = content.find(TOOL_RESULT_OPEN)
    while start >= 0:
        end = content.find(TOOL_RESULT_CLOSE, start)
        if end < 0:
            break
        end += len(TOOL_RESULT_CLOSE)
        if start > done:
            pieces.append(content[done:start])
        pieces.append(content[start:end])
        done = end
        start = content.find(TOOL_RESULT_OPEN, end)
    if done < len(content):
        pieces.append(content[done:])
    return pieces


def read_text(conn: sqlite3.Connection, text_id: int) -> str:
    """The text stored under ``text_id``."""
    return str(conn.execute(_READ, (text_id,)).fetchone()[0])


def expand(conn: sqlite3.Connection, parts: str) -> str:
    """The text of a message stored as ``parts`` (what the ``messages`` view gives)."""
    return "".join(read_text(conn, part) if isinstance(part, int) else part
                   for part in json.loads(parts))
