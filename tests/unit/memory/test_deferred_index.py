"""A backtest's deferred recall index finds exactly what an index written at every change finds.

The deferred index (``RecallIndex(deferred=True)``, a backtest's scratch memory) stages changes in
memory and writes them before a search; these tests hold it against the eager index on the same
sequences of rewrites, appends, removals, grouped commits and searches.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.memory import index as index_module
from app.memory.index import FileState, RecallIndex
from app.memory.text import build_query

HOUR = 3_600_000
PARAGRAPHS = [
    "BTC trend up, RSI 62 and rising",
    "ETH ranging between support and resistance",
    "BTC trend up, RSI 62 and rising",  # a repeated chunk keeps its first market time
    "stop loss moved under the swing low",
    "volume fading on the breakout",
]
PATHS = ["current_market_assessment.yaml", "analysis_log.md", "notes/plan.md"]
QUERIES = ["trend", "RSI rising", "support", "breakout volume", "stop"]

paragraphs = st.lists(st.sampled_from(PARAGRAPHS), min_size=0, max_size=4)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("replace"), st.sampled_from(PATHS), paragraphs),
        st.tuples(st.just("append"), st.sampled_from(PATHS), paragraphs),
        st.tuples(st.just("remove"), st.sampled_from(PATHS), st.just([])),
        st.tuples(st.just("intent"), st.sampled_from(PATHS), st.just([])),
        st.tuples(st.just("hour"), st.just(""), st.just([])),
        st.tuples(st.just("commit"), st.just(""), st.just([])),
        st.tuples(st.just("search"), st.sampled_from(QUERIES), st.just([])),
    ),
    min_size=1,
    max_size=40,
)


def state(n: int) -> FileState:
    return FileState(size=n, mtime_ns=n, ino=7, newlines=n, ends_newline=True)


class Pair:
    """The same index twice, one eager and one deferred, both grouped as in a backtest."""

    def __init__(self, folder: Path) -> None:
        self.eager = RecallIndex(folder / "eager.sqlite3", synced=False)
        self.deferred = RecallIndex(folder / "deferred.sqlite3", synced=False, deferred=True)
        self.both = (self.eager, self.deferred)
        for index in self.both:
            index.commit_group()
        self.files: dict[str, str] = {}
        self.now = 1_700_000_000_000
        self.step = 0

    def apply(self, op: str, arg: str, parts: list[str]) -> None:
        self.step += 1
        if op == "replace":
            text = "\n\n".join(parts)
            self.files[arg] = text
            for index in self.both:
                index.replace_file(arg, text, state(self.step), write_ms=self.now,
                                   unknown_ms=self.now)
        elif op == "append" and parts:
            old = self.files.get(arg, "")
            added = "\n\n".join(parts) + "\n"
            first_line = old.count("\n") + 2
            self.files[arg] = old + "\n" + added
            for index in self.both:
                index.append_text(arg, added, first_line, state(self.step), write_ms=self.now)
        elif op == "remove":
            self.files.pop(arg, None)
            for index in self.both:
                index.remove_file(arg)
        elif op == "intent":
            for index in self.both:
                index.begin_append(arg, 7, self.step, self.step + 10, self.now)
        elif op == "hour":
            self.now += HOUR
        elif op == "commit":
            for index in self.both:
                index.commit_group()
        elif op == "search":
            query = build_query(arg)
            assert query is not None
            for until in (self.now, self.now - HOUR):
                assert self.deferred.search(query, 10, until) == self.eager.search(
                    query, 10, until)
        for path in PATHS:
            assert self.deferred.file_state(path) == self.eager.file_state(path)
            assert self.deferred.pending_append(path) == self.eager.pending_append(path)

    def rows(self, index: RecallIndex) -> list[tuple]:
        """Every chunk in row-id order with its market time (the sequence number within a
        millisecond may differ: an eager index also numbered chunks it later deleted)."""
        index.flush()
        return [(*row[:4], index_module._unpack(row[4])) for row in index._conn.execute(
            f"SELECT c.id >> {index_module.SEQ_BITS}, c.path, c.line, c.digest, c.body "
            "FROM chunks c ORDER BY c.id"
        )]

    def close(self) -> None:
        for index in self.both:
            index.close()


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_a_deferred_index_holds_the_same_rows_and_finds_the_same_as_an_eager_one(
    tmp_path_factory, ops
) -> None:
    pair = Pair(tmp_path_factory.mktemp("pair"))
    try:
        for op in ops:
            pair.apply(*op)
        assert pair.rows(pair.deferred) == pair.rows(pair.eager)
        assert pair.deferred.chunk_count() == pair.eager.chunk_count()
        assert pair.deferred.indexed_files() == pair.eager.indexed_files()
    finally:
        pair.close()


def test_what_is_staged_is_found_at_once_and_written_within_flush_every_commits(
    tmp_path: Path,
) -> None:
    index = RecallIndex(tmp_path / "i.sqlite3", synced=False, deferred=True)
    index.commit_group()
    index.append_text("analysis_log.md", "breakout above resistance\n", 1, state(1),
                      write_ms=HOUR)
    on_disk = index._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert on_disk == 0  # staged, not written
    query = build_query("breakout")
    assert query is not None
    assert [h.path for h in index.search(query, 5, HOUR)] == ["analysis_log.md"]

    index.append_text("analysis_log.md", "second breakout\n", 2, state(2), write_ms=2 * HOUR)
    for _ in range(index_module.FLUSH_EVERY):
        index.commit_group()
    assert index._conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 2
    index.close()


def test_a_closed_deferred_index_has_written_everything_it_staged(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite3"
    index = RecallIndex(path, synced=False, deferred=True)
    index.commit_group()
    index.replace_file("notes/plan.md", "wait for the retest", state(3), write_ms=HOUR,
                       unknown_ms=HOUR)
    index.begin_append("analysis_log.md", 7, 0, 40, HOUR)
    index.close()
    reopened = RecallIndex(path)
    query = build_query("retest")
    assert query is not None
    assert [h.path for h in reopened.search(query, 5, HOUR)] == ["notes/plan.md"]
    assert reopened.file_state("notes/plan.md") == state(3)
    assert reopened.pending_append("analysis_log.md") == (7, 0, 40, HOUR)
    reopened.close()
