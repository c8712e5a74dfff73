"""Texts kept once in the workspace database, compressed together, and the rows made of them.

Why: an agent backtest's database was mostly text, the same text over and over: a tool's result
in its audit row and again in the message that carried it to the model, and one bar's results
nearly the same as the last bar's (the candles the Analyst reads move by one a bar; the memory
files it reads change by a line). Each text is now one ``texts`` row, referred to by id: an
audit row refers to its result and its parameters, a message to its pieces (``parts``, a JSON
array of its short literal pieces and the ids of the texts between them, in order).

Texts are written plain, then packed. A new text's row holds its key and size; its body waits
in ``text_pending``. Once the pending texts hold ``BLOCK_BYTES``, they are joined and compressed
into one ``text_blocks`` row (zlib), each text's row gets its place in the block (``block``,
``start``, in bytes), and the pending bodies are deleted (deleting gives their pages back for
the next texts, where shrinking a row in place would leave its page mostly empty). Compressed
together, consecutive texts cost a small fraction of their size, which compressing each alone
could not do: what repeats is from one text to the next. A block's data is read with
``sqlar_uncompress(data, size)``, the function the ``sqlite3`` command-line shell provides for
SQLite archives, so the ``tool_calls`` and ``messages`` views (``app.store.db``) put every row
back for any reader: Kestrel's connections register the same function (``install``), and so
does the shell.

A text is looked for among the latest ``RECENT_TEXTS`` texts only: the copies of a text are
written moments apart (its audit row and the message that carries it), and a lookup by an index
over all texts would cost every write a page at a random place in that index. A text that comes
back much later is stored again, which costs little once packed beside its neighbours.

Crash safety: whoever writes a row writes the texts it refers to first, on the same connection,
in the same transaction when there is one; packing is one statement per text inside the
writer's transaction, or a transaction of its own. A text's content never changes (packing
moves it, in one transaction), and one that lost its row (a crash between two statements
outside a transaction) is harmless: it is found as any other and used by the next row that
holds the same text.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

TOOL_RESULT_OPEN = "<tool_result "
TOOL_RESULT_CLOSE = "</tool_result>"
# a text shorter than this stays in its row: a reference and its lookup would cost more
MIN_SHARED_CHARS = 64

RECENT_TEXTS = 64  # two bars of a backtest's texts; the copies of a text come within one
# what one block holds before compression. zlib refers back 32 KiB at most, and each block
# starts with nothing to refer to; a larger block starts cold less often, and reading one text
# inflates its whole block (the latest are kept inflated)
BLOCK_BYTES = 128 * 1024
# the pending texts are added up at every ``PACK_EVERY``-th text (texts written before
# packing have their body in their row and no ``size``: they stay as they are)
PACK_EVERY = 16

_INSERT = "INSERT INTO texts (key, size, body) VALUES (?, ?, '')"
_INSERT_PENDING = "INSERT INTO text_pending (id, body) VALUES (?, ?)"
# a text's stored parts: its body (written before packing), pending body, place in its block
_STORED = ("SELECT t.id, t.body, p.body, t.block, t.start, t.size, b.data, b.size FROM texts AS t "
           "LEFT JOIN text_pending AS p ON p.id = t.id "
           "LEFT JOIN text_blocks AS b ON b.id = t.block ")
_FIND = _STORED + "WHERE t.id > (SELECT ifnull(max(id), 0) FROM texts) - ? AND t.key = ?"  # noqa: S608
_PENDING = "SELECT id, body FROM text_pending ORDER BY id"
_PENDING_SIZE = "SELECT total(t.size) FROM text_pending AS p JOIN texts AS t ON t.id = p.id"
_PACK = "UPDATE texts SET block = ?, start = ? WHERE id = ?"


def text_sql(id_expr: str) -> str:
    """SQL for the text whose id ``id_expr`` gives: plain, or cut from its compressed block."""
    return ("(SELECT CASE WHEN t.block IS NOT NULL THEN CAST(substr("  # noqa: S608
            "sqlar_uncompress(b.data, b.size), t.start + 1, t.size) AS TEXT) "
            "ELSE coalesce((SELECT p.body FROM text_pending AS p WHERE p.id = t.id), t.body) END "
            "FROM texts AS t LEFT JOIN text_blocks AS b ON b.id = t.block "
            f"WHERE t.id = {id_expr})")


@functools.lru_cache(maxsize=16)
def _inflate(data: bytes) -> bytes:
    return zlib.decompress(data)


def sqlar_uncompress(data: bytes | None, size: int | None) -> bytes | None:
    """A block's bytes, as the ``sqlite3`` shell's function of this name gives them: stored as
    they are when compressing did not make them smaller. The latest blocks are kept inflated
    (keyed by their compressed bytes, so never mistaken for another database's block): the texts
    of one page of a listing are mostly in one block."""
    if data is None or size is None:
        return None
    data = bytes(data)
    if len(data) == size:
        return data
    return _inflate(data)


def install(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Give ``conn`` what the views that read texts call; every connection to a workspace
    database that reads ``tool_calls`` or ``messages`` needs it."""
    conn.create_function("sqlar_uncompress", 2, sqlar_uncompress, deterministic=True)
    return conn


def text_key(data: bytes) -> int:
    """The ``key`` of a text: the CRC-32 of its UTF-8, signed (four bytes in a row). Only a
    filter: texts with equal keys are compared whole before one is taken for the other."""
    crc = zlib.crc32(data)
    return crc - (1 << 32) if crc >= 1 << 31 else crc


def _body(body: str, pending: str | None, block: int | None, start: int | None,
          size: int | None, data: bytes | None, block_size: int | None) -> str:
    if block is None:
        return body if pending is None else pending
    whole = sqlar_uncompress(data, block_size) or b""
    begin = int(start or 0)
    return whole[begin:begin + int(size or 0)].decode("utf-8")


def put_text(conn: sqlite3.Connection, text: str, *, look: bool = True) -> int:
    """The id of ``text`` in ``texts``: one of the latest texts when it is there, else a new
    one stored now (and the plain texts packed when they fill a block).

    ``look=False`` stores it without looking: for a text only its own row will hold (a call's
    parameters), where the lookup costs more than the few bytes a repeat costs once packed.
    """
    data = text.encode("utf-8")
    key = text_key(data)
    if look:
        for found, *stored in conn.execute(_FIND, (RECENT_TEXTS, key)).fetchall():
            if _body(*stored) == text:
                return int(found)
    with nullcontext() if conn.in_transaction else _transaction(conn):
        text_id = int(conn.execute(_INSERT, (key, len(data))).lastrowid or 0)
        conn.execute(_INSERT_PENDING, (text_id, text))
        if text_id % PACK_EVERY == 0:
            _pack_when_full(conn)
    return text_id


def _pack_when_full(conn: sqlite3.Connection) -> None:
    """Pack the pending texts into one block once they hold ``BLOCK_BYTES``; the caller holds
    a transaction."""
    if conn.execute(_PENDING_SIZE).fetchone()[0] < BLOCK_BYTES:
        return
    joined = bytearray()
    places = []
    last = 0
    for last, body in conn.execute(_PENDING).fetchall():
        places.append((last, len(joined)))
        joined += str(body).encode("utf-8")
    squeezed = zlib.compress(bytes(joined), 6)
    data = squeezed if len(squeezed) < len(joined) else bytes(joined)
    block = conn.execute("INSERT INTO text_blocks (data, size, last_id) VALUES (?, ?, ?)",
                         (data, len(joined), last)).lastrowid
    conn.executemany(_PACK, [(block, start, text_id) for text_id, start in places])
    conn.execute("DELETE FROM text_pending WHERE id <= ?", (last,))


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One transaction on a connection in autocommit mode (``app.store.db`` imports this
    module, so its ``unit_of_work`` cannot be used here)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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
        parts.append(put_text(conn, piece) if len(piece) >= MIN_SHARED_CHARS else piece)
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
    row = conn.execute(_STORED + "WHERE t.id = ?", (text_id,)).fetchone()  # noqa: S608
    return _body(*row[1:])


def expand(conn: sqlite3.Connection, parts: str) -> str:
    """The text of a message stored as ``parts`` (what the ``messages`` view gives)."""
    return "".join(read_text(conn, part) if isinstance(part, int) else part
                   for part in json.loads(parts))
