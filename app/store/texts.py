"""Texts kept once in the workspace database, and the messages made of them.

Why: a tool's result was stored twice, in its audit row (``tool_calls``) and in the message that
carried it to the model: a task's data block holds the results of the calls made for it, a tool's
answer is its result, a final answer's block results are the results of its writes. In a
backtest that was half the database. Now each text is one ``texts`` row: an audit row refers to
its result there, and a message that carries results is stored as its ``parts``, a JSON array of
its literal pieces (strings) and the ids of the texts between them, in order. The ``tool_calls``
and ``messages`` views put the texts back (``app.store.db``, migration 8 -> 9), so every reader,
ours or a plain ``sqlite3`` shell, sees each row as it was.

A text is looked for among the latest ``RECENT_TEXTS`` texts only: the copies of a result are
written moments apart (its audit row and the message that carries it), and a lookup by an
index over all texts would cost every write a page at a random place in that index. A result
that comes back much later is stored again, which is only its size.

Crash safety: whoever writes a row writes the texts it refers to first, on the same connection,
in the same transaction when there is one. A text is never changed or removed, and one that lost
its row (a crash between the two statements outside a transaction) is harmless: it is found as
any other and used by the next row that holds the same text.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3

TOOL_RESULT_OPEN = "<tool_result "
TOOL_RESULT_CLOSE = "</tool_result>"
# a result shorter than this stays in its message: a reference and its lookup would cost more
MIN_SHARED_CHARS = 64

RECENT_TEXTS = 256  # a few dozen bars of a backtest, far more than one bar's calls

_INSERT = "INSERT INTO texts (key, body) VALUES (?, ?)"
# the bound is computed once; the rows in it are compared by key first, their text only when
# the keys agree (so a long text's overflow pages are read once, for the match)
_FIND = ("SELECT id FROM texts WHERE id > (SELECT ifnull(max(id), 0) FROM texts) - ? "
         "AND key = ? AND body = ?")


def text_key(text: str) -> int:
    """The ``key`` of a text: 64 bits of BLAKE2b of its UTF-8, as SQLite's signed integer."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def put_text(conn: sqlite3.Connection, text: str) -> int:
    """The id of ``text`` in ``texts``: one of the latest texts when it is there, else a new
    one stored now."""
    key = text_key(text)
    found = conn.execute(_FIND, (RECENT_TEXTS, key, text)).fetchone()
    if found is not None:
        return int(found[0])
    return int(conn.execute(_INSERT, (key, text)).lastrowid or 0)


def compose(conn: sqlite3.Connection, content: str) -> str | None:
    """Store the tool results ``content`` carries as texts, and return its parts (JSON); None
    when it carries none worth referring to (it is then stored as it is).

    A result is a ``<tool_result ...>`` envelope up to its first ``</tool_result>``: the text a
    result holds is escaped, so nothing inside one can close it early or open another. The
    parts are cut from ``content`` itself, so putting them back together gives it exactly.
    """
    start = content.find(TOOL_RESULT_OPEN)
    if start < 0 or "\x00" in content:  # a NUL would end the text where SQL puts it back
        return None
    parts: list[str | int] = []
    done = 0
    while start >= 0:
        end = content.find(TOOL_RESULT_CLOSE, start)
        if end < 0:
            break
        end += len(TOOL_RESULT_CLOSE)
        if end - start >= MIN_SHARED_CHARS:
            if start > done:
                parts.append(content[done:start])
            parts.append(put_text(conn, content[start:end]))
            done = end
        start = content.find(TOOL_RESULT_OPEN, end)
    if not any(isinstance(part, int) for part in parts):
        return None
    if done < len(content):
        parts.append(content[done:])
    return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))


def expand(conn: sqlite3.Connection, parts: str) -> str:
    """The text of a message stored as ``parts`` (what the ``messages`` view gives)."""
    pieces: list[str] = []
    for part in json.loads(parts):
        if isinstance(part, int):
            pieces.append(str(conn.execute("SELECT body FROM texts WHERE id = ?",
                                           (part,)).fetchone()[0]))
        else:
            pieces.append(part)
    return "".join(pieces)
