"""Newline framing of a server's stdout: lines survive any chunking, an over-long line is never
held whole, and its edges still tell whose answer it was."""

import json

import pytest

from app.mcp.framing import (
    HEAD_BYTES,
    TAIL_BYTES,
    LineFramer,
    Overflow,
    Oversized,
    count_values,
    peek_id,
    value_bound,
)


def _feed(framer: LineFramer, data: bytes, step: int) -> list:
    frames = []
    for start in range(0, len(data), step):
        frames += framer.feed(data[start:start + step])
    return frames


@pytest.mark.parametrize("step", [1, 2, 7, 64, 10_000])
def test_lines_come_out_whole_however_the_bytes_are_chunked(step):
    data = b'{"a":1}\n{"b":"x y"}\r\n\n  \n{"c":[1,2,3]}\n{"partial"'
    assert _feed(LineFramer(100), data, step) == [b'{"a":1}', b'{"b":"x y"}\r', b'{"c":[1,2,3]}']


def test_a_line_at_the_limit_is_kept_and_one_byte_more_is_dropped():
    framer = LineFramer(10)
    assert framer.feed(b"x" * 10 + b"\n") == [b"x" * 10]
    frames = framer.feed(b"y" * 11 + b"\nnext\n")
    assert frames == [Overflow(b"y" * 11), Oversized(11, b"y" * 11, b"y" * 11), b"next"]


def test_an_oversized_line_is_discarded_as_it_arrives_and_the_next_line_is_intact():
    framer = LineFramer(1000)
    head = b'{"jsonrpc":"2.0","id":7,"result":{"text":"'
    frames = framer.feed(head)
    for _ in range(100):
        frames += framer.feed(b"F" * 4096)
        assert framer.buffered == 0, "nothing of a dropped line is held"
    frames += framer.feed(b'"}}\n{"jsonrpc":"2.0","id":8,"result":{}}\n')
    overflow, oversized, after = frames
    assert isinstance(overflow, Overflow) and overflow.head.startswith(head)
    assert len(overflow.head) == HEAD_BYTES
    assert oversized.size == len(head) + 100 * 4096 + 3
    assert oversized.tail == (b"F" * TAIL_BYTES + b'"}}')[-TAIL_BYTES:]
    assert json.loads(after) == {"jsonrpc": "2.0", "id": 8, "result": {}}


def test_the_length_of_an_unfinished_line_is_counted_while_it_is_dropped():
    """What lets the transport give up on a line that never ends."""
    framer = LineFramer(10)
    framer.feed(b"ok\nab")
    assert framer.line_bytes == 2
    for _ in range(5):
        framer.feed(b"x" * 1000)
    assert (framer.line_bytes, framer.buffered) == (5002, 0)
    framer.feed(b"\n")
    assert framer.line_bytes == 0


def test_a_64_mb_line_arriving_in_64_kb_chunks_is_framed_whole():
    """The size the app allows a server's message; its cost per size (linear, where the SDK's
    ``buffer + chunk`` is quadratic) is measured by tests/benchmarks/bench_framing.py."""
    chunk = b"F" * 65536
    framer = LineFramer(64 * 1024 * 1024)
    for _ in range(64 * 16):
        assert framer.feed(chunk) == []
    (line,) = framer.feed(b"\n")
    assert len(line) == 64 * 1024 * 1024 and line[:1] == line[-1:] == b"F"
    assert (framer.line_bytes, framer.buffered) == (0, 0)


@pytest.mark.parametrize(("head", "tail", "expected"), [
    (b'{"jsonrpc":"2.0","id":5,"result":{"content":[{"text":"FFF', b"", (5, False)),
    (b'{"id":"req-1","jsonrpc":"2.0","error":{"code":1', b"", ("req-1", False)),
    (b' {"jsonrpc": "2.0", "id" : -3, "result"', b"", (-3, False)),
    (b'{"result":{"id":9,"content":[{"text":"FF', b"", (None, False)),
    (b'{"result":{"content":[{"text":"FF', b'FFF"}]},"jsonrpc":"2.0","id":12}', (12, False)),
    (b'{"result":{"x":', b'FF"}},"x":{"id":12}}', (None, False)),
    (b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"NN', b"", (None, True)),
    (b'{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{', b"", (4, True)),
    (b'{"result":{"a":"\\"id\\":3,"', b"", (None, False)),
    (b'{"id":true,"result":', b"", (None, False)),
    (b"UUUUUUUUUUUUUUUU", b"UUUU", (None, False)),
])
def test_the_edges_of_a_dropped_message_name_its_top_level_id_only(head, tail, expected):
    peek = peek_id(head, tail)
    assert (peek.id, peek.method) == expected


def test_values_are_counted_outside_strings_only():
    text = json.dumps({"text": "a, b, {c}, [d]" * 1000, "rows": [1, 2, 3]}).encode()
    assert value_bound(text) > 4000, "the quick bound counts the commas of the text too"
    assert count_values(text, 10_000) == 5  # the object, its comma, the list and its two commas
    escaped = json.dumps({"s": 'say "x, y", \\ then ,', "n": [0, 0]}).encode()
    assert count_values(escaped, 100) == 4


def test_counting_stops_just_past_the_budget_and_breathes_while_it_runs():
    rows = json.dumps([{"a": 0}] * 100_000).encode()
    breaths = []
    counted = count_values(rows, 5_000, lambda: breaths.append(1))
    assert 5_000 < counted < 5_010
    assert breaths, "a long exact count hands the GIL over now and then"
