"""Chunking, entry headers, grams and type sniffing: the text side of recall."""

from app.domain.clock import parse_time
from app.memory.text import build_query, chunk_text, entry_header, grams, header_ms, sniff_type


def test_a_journal_is_split_per_entry_and_each_entry_carries_its_header_time() -> None:
    text = (
        "# Journal 2024-02-20\n\n## 2024-02-20T09:00:00Z\nfirst\n\nstill first\n"
        "## 2024-02-20T10:30:00.250Z · BTC/USDT 1h\nsecond\n"
    )
    chunks = chunk_text(text)
    assert [(c.line, c.header_ms) for c in chunks] == [
        (1, None),
        (3, parse_time("2024-02-20T09:00:00Z")),
        (7, parse_time("2024-02-20T10:30:00Z") + 250),
    ]
    assert chunks[1].text == "## 2024-02-20T09:00:00Z\nfirst\n\nstill first"


def test_other_files_are_split_into_paragraphs_with_their_first_line() -> None:
    chunks = chunk_text("\n\nalpha\nbeta\n\n\n   \ngamma\n")
    assert [(c.line, c.text) for c in chunks] == [(3, "alpha\nbeta"), (8, "gamma")]


def test_very_long_paragraphs_are_split_so_snippets_stay_small() -> None:
    chunks = chunk_text("\n".join(f"line {i}" for i in range(100)))
    assert len(chunks) == 3 and chunks[1].line == 41


def test_entry_headers_round_trip_with_milliseconds_only_when_needed() -> None:
    assert entry_header(parse_time("2024-02-20T14:00:00Z")) == "## 2024-02-20T14:00:00Z"
    ms = parse_time("2024-02-20T14:00:00Z") + 7
    assert entry_header(ms) == "## 2024-02-20T14:00:00.007Z"
    assert header_ms(entry_header(ms)) == ms
    assert header_ms("## not a time") is None


def test_grams_hold_cjk_unigrams_bigrams_and_short_words() -> None:
    assert grams("买入 MA 超卖x") == "|买| 买入| |入| |超| 超卖| |卖| ma| |x|"


def test_queries_split_scripts_and_drop_stopwords_but_never_everything() -> None:
    built = build_query("what was 超卖时买 on BTC/USDT?")
    assert built is not None
    assert built.terms == ("超卖时买", "btc/usdt", "超卖", "卖时", "时买")
    assert build_query("the") is not None  # only stopwords: keep them rather than nothing
    assert build_query("?! ...") is None


def test_file_type_hint_comes_from_extension_then_content() -> None:
    assert sniff_type("a.yml", None) == "YAML"
    assert sniff_type("notes/A.MD", b"") == "MARKDOWN"
    assert sniff_type("log.txt", b"x") == "TEXT"
    assert sniff_type("x", None) == "UNKNOWN"
    assert sniff_type("x", b"key: [1, 2]\nother: 3\n") == "YAML"
    assert sniff_type("x", b"## Heading\ntext") == "MARKDOWN"
    assert sniff_type("x", b"\xff\xfe") == "UNKNOWN"
    assert sniff_type("x", b"a sentence") == "TEXT"
