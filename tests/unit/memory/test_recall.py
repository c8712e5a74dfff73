"""Recall: ranked full-text search over an agent's memory, CJK and symbols, never the future."""

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.clock import ReplayClock, parse_time
from app.domain.errors import InvalidParameterError
from app.memory import index as index_module
from app.memory.bank import MemoryBank
from app.memory.text import build_query

AGENT = "trader-1"
HOUR = 3_600_000


def test_best_match_comes_first_with_file_line_and_score(bank: MemoryBank) -> None:
    bank.write_note(AGENT, "regime", "Ranging market.\n\nADX 18, Bollinger bands narrowing.\n")
    bank.log_journal_entry(AGENT, "Bought BTC/USDT: RSI oversold at 27")
    bank.log_journal_entry(AGENT, "Sold ETH/USDT, RSI overbought")
    hits = bank.recall(AGENT, "RSI oversold")
    assert [h.path for h in hits][:2] == ["journal/2024-02-20.md", "journal/2024-02-20.md"]
    assert "oversold" in hits[0].snippet and hits[0].line == 4
    assert hits[0].score > hits[1].score > 0
    bands = bank.recall(AGENT, "bollinger")
    assert [(h.path, h.line) for h in bands] == [("notes/regime.md", 3)]


def test_chinese_text_is_found_by_words_of_one_two_or_more_characters(bank: MemoryBank) -> None:
    bank.log_journal_entry(AGENT, "观察到 AAPL 连续 3 天缩量下跌, RSI 逼近 30")
    bank.log_journal_entry(AGENT, "买入 AAPL 100 股, 理由: RSI 超卖 + 放量企稳")
    bank.write_note(AGENT, "position_AAPL", "已平仓... RSI 超卖 + 放量组合有效")
    assert [h.line for h in bank.recall(AGENT, "缩量")] == [4]
    assert {h.path for h in bank.recall(AGENT, "超卖")} == {
        "journal/2024-02-20.md",
        "notes/position_AAPL.md",
    }
    assert len(bank.recall(AGENT, "买")) == 1
    assert bank.recall(AGENT, "缩量下跌")[0].line == 4
    natural = bank.recall(AGENT, "上次 RSI 超卖时买 AAPL 的结果")
    assert natural[0].snippet.endswith("理由: RSI 超卖 + 放量企稳")


def test_trading_symbols_and_short_words_are_searchable(bank: MemoryBank) -> None:
    bank.log_journal_entry(AGENT, "Long BTC/USDT:USDT perp, MA cross on 4h")
    bank.log_journal_entry(AGENT, "Watching ETH/BTC")
    assert [h.snippet.split("\n")[-1] for h in bank.recall(AGENT, "BTC/USDT")] == [
        "Long BTC/USDT:USDT perp, MA cross on 4h"
    ]
    assert len(bank.recall(AGENT, "BTC")) == 2
    assert len(bank.recall(AGENT, "ma")) == 1  # a whole short word, not "macd" inside words
    assert len(bank.recall(AGENT, "4h")) == 1
    assert len(bank.recall(AGENT, "ＢＴＣ/ＵＳＤＴ")) == 1  # full-width forms are normalised


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=1, max_size=60))
def test_no_query_can_cause_an_fts_syntax_error(query: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(index_module._FTS)
    conn.execute(index_module._GRAM_FTS)
    conn.execute("INSERT INTO fts(rowid, body) VALUES (1, 'BTC/USDT \"quoted\" NEAR(a b) *')")
    conn.execute("INSERT INTO gram_fts(rowid, grams) VALUES (1, 'ma|')")
    built = build_query(query)
    if built is not None:
        for table, expression in (("fts", built.body_expression),
                                  ("gram_fts", built.grams_expression)):
            if expression:
                conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?",  # noqa: S608
                             (expression,)).fetchall()


@pytest.mark.parametrize(
    "query", ['"', 'x" OR body:*', "NEAR(a b)", "(((", "AND OR NOT", "col:value^", "-BTC", "*"]
)
def test_fts_operators_in_a_query_are_plain_text(bank: MemoryBank, query: str) -> None:
    bank.log_journal_entry(AGENT, 'notes with "quotes" and NEAR(a b) and col:value^ and -BTC')
    try:
        bank.recall(AGENT, query)
    except InvalidParameterError as exc:
        assert "no searchable words" in exc.message


def test_a_query_with_nothing_searchable_is_a_clear_invalid_parameter(bank: MemoryBank) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        bank.recall(AGENT, "?! ...")
    assert "no searchable words" in caught.value.message


def test_recall_in_a_backtest_never_returns_entries_written_after_the_cursor(
    root, clock, bus
) -> None:
    bank = MemoryBank(root, clock, bus)
    bank.log_journal_entry(AGENT, "alpha setup on SOL/USDT")
    clock.advance_to(clock.now_ms() + HOUR)
    bank.log_journal_entry(AGENT, "beta setup on SOL/USDT")
    bank.write_note(AGENT, "lesson", "beta lesson SOL/USDT")
    assert len(bank.recall(AGENT, "SOL/USDT")) == 3
    bank.close()
    rerun = MemoryBank(root, ReplayClock(parse_time("2024-02-20T14:30:00Z")), bus)
    hits = rerun.recall(AGENT, "SOL/USDT")
    assert [h.snippet.split("\n")[-1] for h in hits] == ["alpha setup on SOL/USDT"]
    assert rerun.recall(AGENT, "beta") == []
    before = MemoryBank(root, ReplayClock(parse_time("2024-02-20T13:59:59Z")), bus)
    assert before.recall(AGENT, "setup") == []
    rerun.close()
    before.close()


def test_journal_entries_edited_by_hand_keep_their_own_market_times(root, bus) -> None:
    folder = root / AGENT / "journal"
    folder.mkdir(parents=True)
    (folder / "2024-02-20.md").write_text(
        "# Journal 2024-02-20\n\n## 2024-02-20T09:00:00Z\nearly gamma\n\n"
        "## 2024-02-20T18:00:00Z\nlate gamma\n"
    )
    bank = MemoryBank(root, ReplayClock(parse_time("2024-02-20T12:00:00Z")), bus)
    assert [h.snippet.split("\n")[-1] for h in bank.recall(AGENT, "gamma")] == ["early gamma"]
    bank.close()


def test_unchanged_text_keeps_the_market_time_it_was_first_written_at(
    bank: MemoryBank, clock, root, bus
) -> None:
    bank.write_file(AGENT, "beliefs.md", b"first paragraph delta\n")
    clock.advance_to(clock.now_ms() + 2 * HOUR)
    bank.write_file(AGENT, "beliefs.md", b"first paragraph delta\n\nsecond paragraph delta\n")
    view = MemoryBank(root, ReplayClock(clock.now_ms() - HOUR), bus)
    assert [h.snippet for h in view.recall(AGENT, "delta")] == ["first paragraph delta"]
    view.close()


def test_overwritten_content_is_no_longer_recalled(bank: MemoryBank) -> None:
    bank.write_note(AGENT, "plan", "buy the epsilon breakout")
    bank.write_note(AGENT, "plan", "stay flat")
    assert bank.recall(AGENT, "epsilon") == []
    assert bank.recall(AGENT, "flat")[0].path == "notes/plan.md"


def test_limit_caps_the_number_of_snippets(bank: MemoryBank) -> None:
    for i in range(8):
        bank.log_journal_entry(AGENT, f"zeta observation {i}")
    assert len(bank.recall(AGENT, "zeta")) == 5
    assert len(bank.recall(AGENT, "zeta", limit=7)) == 7


def test_long_chunks_give_a_snippet_around_the_matching_line(bank: MemoryBank) -> None:
    lines = [f"line {i} filler text to make the paragraph long enough" for i in range(30)]
    lines[20] = "line 20 mentions the omega divergence"
    bank.write_file(AGENT, "long.md", ("\n".join(lines) + "\n").encode())
    hit = bank.recall(AGENT, "omega")[0]
    assert hit.line == 21
    assert "omega divergence" in hit.snippet and hit.snippet.startswith("… ")
    assert len(hit.snippet) < 600


def test_old_entries_with_rare_terms_are_found_beyond_the_ranking_window(
    bank: MemoryBank, clock, monkeypatch
) -> None:
    monkeypatch.setattr(index_module, "RANK_WINDOW", 10)
    monkeypatch.setattr(index_module, "RARE_TERM_DF", 5)
    bank.log_journal_entry(AGENT, "kappa squeeze on BTC/USDT, the only one")
    for i in range(30):
        clock.advance_to(clock.now_ms() + HOUR)
        bank.log_journal_entry(AGENT, f"routine BTC/USDT check {i}")
    hits = bank.recall(AGENT, "BTC/USDT kappa", limit=3)
    assert "kappa squeeze" in hits[0].snippet
    recent = bank.recall(AGENT, "routine", limit=3)
    assert [h.snippet.split("\n")[-1] for h in recent][0].startswith("routine BTC/USDT check")
