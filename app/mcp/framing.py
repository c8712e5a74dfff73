"""Newline framing of an MCP server's stdout, in linear time and bounded memory.

The stdio transport of MCP sends one JSON-RPC message per line. ``LineFramer`` cuts the bytes it is
fed into lines: every byte is searched once (``bytes.find``) and copied at most twice (into a list
of pieces, then one join), so a message costs time in proportion to its size, never to its square.
A line longer than the limit is not kept: from the moment it passes the limit only its first
``HEAD_BYTES`` and last ``TAIL_BYTES`` are, which is enough to tell whose answer it was
(``peek_id``), and the rest is discarded as it arrives.

Pure: no I/O, no asyncio; the transport (``app.mcp.stdio_transport``) feeds it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

HEAD_BYTES = 4096  # a message's id and method are among its first members in every SDK seen
BREATHE_EVERY = 1000  # strings skipped between two breaths of an exact count (~1 ms)
TAIL_BYTES = 256  # ... or its last (the TypeScript SDK writes {"result":…,"jsonrpc":"2.0","id":1})


@dataclass(frozen=True, slots=True)
class Overflow:
    """The line being read just passed the limit; it will be dropped.

    Attributes:
        head: its first bytes (at most ``HEAD_BYTES``).
    """

    head: bytes


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit ended (at its newline) and was dropped.

    Attributes:
        size: its length in bytes, without the newline.
        head: its first bytes (at most ``HEAD_BYTES``).
        tail: its last bytes (at most ``TAIL_BYTES``).
    """

    size: int
    head: bytes
    tail: bytes


Frame = bytes | Overflow | Oversized


class LineFramer:
    """Cuts a byte stream into lines of at most ``limit`` bytes; longer ones are dropped.

    ``feed`` returns, in order, each complete line (``bytes``, without its newline; blank lines are
    skipped), an ``Overflow`` when a line passes the limit and an ``Oversized`` when such a line
    ends. Memory held: at most ``limit`` bytes of one line, plus the chunk being fed.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the limit of a line must be at least one byte")
        self.limit = limit
        self._pieces: list[bytes] = []
        self._size = 0
        self._dropping = False
        self._head = b""
        self._tail = b""

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished line held now (0 while one is being dropped)."""
        return 0 if self._dropping else self._size

    @property
    def line_bytes(self) -> int:
        """Bytes of the unfinished line read so far, held or dropped."""
        return self._size

    def feed(self, chunk: bytes) -> list[Frame]:
        frames: list[Frame] = []
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end == -1 else end
            if stop > start:
                overflow = self._take(chunk[start:stop])
                if overflow is not None:
                    frames.append(overflow)
            if end == -1:
                break
            frame = self._finish()
            if frame is not None:
                frames.append(frame)
            start = end + 1
        return frames

    def _take(self, piece: bytes) -> Overflow | None:
        self._size += len(piece)
        if self._dropping:
            self._tail = (self._tail + piece[-TAIL_BYTES:])[-TAIL_BYTES:]
            return None
        if self._size <= self.limit:
            self._pieces.append(piece)
            return None
        # past the limit: keep the edges, let go of the rest
        held = b"".join(self._pieces)
        self._pieces = []
        self._dropping = True
        self._head = (held[:HEAD_BYTES] + piece[: max(0, HEAD_BYTES - len(held))])
        self._tail = (held[-TAIL_BYTES:] + piece[-TAIL_BYTES:])[-TAIL_BYTES:]
        return Overflow(self._head)

    def _finish(self) -> bytes | Oversized | None:
        size, pieces, dropping = self._size, self._pieces, self._dropping
        self._pieces, self._size, self._dropping = [], 0, False
        if dropping:
            frame = Oversized(size, self._head, self._tail)
            self._head = self._tail = b""
            return frame
        line = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return line if line.strip() else None


@dataclass(frozen=True, slots=True)
class Peek:
    """What the edges of a dropped message say about it.

    Attributes:
        id: the JSON-RPC id among its top-level members, when one was seen (int or str).
        method: a top-level ``method`` member was seen: a request or notification of the server,
            never an answer to one of ours.
    """

    id: int | str | None
    method: bool


_TOKEN = re.compile(
    rb'\s*(?:("(?:[^"\\]|\\.)*")|([{}\[\]:,])|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null))'
)
_TAIL_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*}\s*$')


def _json_string(raw: bytes) -> str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _scalar_id(raw: bytes) -> int | str | None:
    """A JSON-RPC id from its JSON text: an integer or a string; anything else is no id."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return value


def peek_id(head: bytes, tail: bytes) -> Peek:
    """The id and kind of a message of which only the edges are known.

    The head is read token by token at the top level of the object (so an ``id`` nested in the
    result is never taken for the message's), until it ends or is cut off; the tail counts only
    when its last member is ``"id": …`` followed by the final ``}``, which in valid JSON can only
    close the top-level object.
    """
    found: int | str | None = None
    method = False
    depth = 0
    key: str | None = None
    expect_value = False
    position = 0
    while True:
        match = _TOKEN.match(head, position)
        if match is None or match.end() == position:
            break
        position = match.end()
        string, punctuation, scalar = match.groups()
        if punctuation is not None:
            if punctuation in (b"{", b"["):
                depth += 1
                expect_value = False
            elif punctuation in (b"}", b"]"):
                depth -= 1
            elif punctuation == b":" and depth == 1 and key is not None:
                expect_value = True
            elif punctuation == b"," and depth == 1:
                key, expect_value = None, False
            continue
        if depth != 1:
            continue
        if expect_value:
            if key == "id" and found is None:
                found = _scalar_id(string if string is not None else scalar)
            key, expect_value = None, False
        elif string is not None:
            key = _json_string(string)
            method = method or key == "method"
    if found is None:
        match = _TAIL_ID.search(tail)
        if match is not None:
            found = _scalar_id(match.group(1))
    return Peek(found, method)


def value_bound(line: bytes) -> int:
    """An upper bound of the JSON values ``line`` holds: its separators and containers, strings
    included (three ``bytes.count`` calls, ~8 ms for 8 MB).

    Why count values: what parsing costs is mostly the Python objects it makes, 0.1 to 1 µs each,
    and the parser holds the GIL throughout, so a worker thread does not spare the event loop. A
    message of 8 MB may be one string (parsed in a few ms) or a million tiny objects (a second).
    """
    return line.count(b",") + line.count(b"{") + line.count(b"[")


def count_values(
    line: bytes, budget: int, breather: Callable[[], None] | None = None
) -> int:
    """The JSON values of ``line`` (separators and containers outside strings), counted no
    further than just past ``budget``: for a line whose ``value_bound`` is over the budget, which
    may be text full of commas or a real flood of values.

    Runs at Python speed (strings are skipped one by one), so in a worker thread that calls
    ``breather`` (e.g. ``time.sleep(0)``: hand the GIL to the event loop) every
    ``BREATHE_EVERY`` strings.
    """
    total = 0
    position = 0
    size = len(line)
    strings = 0
    while position < size:
        quote = line.find(b'"', position)
        stop = size if quote == -1 else quote
        total += (line.count(b",", position, stop) + line.count(b"{", position, stop)
                  + line.count(b"[", position, stop))
        if total > budget or quote == -1:
            return total
        position = _string_end(line, quote) + 1
        strings += 1
        if breather is not None and strings % BREATHE_EVERY == 0:
            breather()
    return total


def _string_end(line: bytes, quote: int) -> int:
    """Where the string opened at ``quote`` closes (the end of ``line`` when it never does)."""
    end = quote
    while True:
        end = line.find(b'"', end + 1)
        if end == -1:
            return len(line)
        backslashes = 0
        while line[end - 1 - backslashes] == 0x5C:
            backslashes += 1
        if backslashes % 2 == 0:
            return end
