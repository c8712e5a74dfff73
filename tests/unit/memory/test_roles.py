"""Role layouts: the Trader's and Analyst's files are valid YAML that loads back into schemas."""

import asyncio
import random
from decimal import Decimal

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from app import yamltext
from app.domain.clock import parse_time
from app.domain.trading import Side
from app.memory.bank import MemoryBank
from app.memory.roles import (
    ANALYSIS_LOG,
    MARKET_ASSESSMENT,
    AnalysisEntry,
    ArchivedTrades,
    MarketAssessment,
    PerformanceSummary,
    Signal,
    SymbolAssessment,
    TradeRecord,
    TradesFile,
    load_yaml,
    parse_analysis_log,
    parse_yaml,
    performance_path,
    render_analysis_entry,
    summarise,
    symbol_key,
    to_yaml,
    trades_path,
)

TRADER = "trader-1"
ANALYST = "analyst-1"


def trade(trade_id: str, pnl: str | None, reflection: str | None = None) -> TradeRecord:
    return TradeRecord(
        trade_id=trade_id,
        side=Side.BUY,
        quantity=Decimal("0.5"),
        entry_price=Decimal("43000.5"),
        opened_at="2024-02-20T14:00:00Z",
        exit_price=None if pnl is None else Decimal("43100"),
        closed_at=None if pnl is None else "2024-02-20T18:00:00Z",
        realized_pnl=None if pnl is None else Decimal(pnl),
        signal_source=ANALYST,
        signal="RSI(14)=27 oversold + MACD bullish cross",
        confidence=Decimal("0.7"),
        reasoning="Past RSI<30 entries on BTC/USDT won 3 of 4.",
        reflection=reflection,
        order_ids=["o-1"],
    )


def test_symbols_map_to_per_symbol_folders() -> None:
    assert symbol_key("BTC/USDT") == "BTCUSDT"
    assert symbol_key("btc/usdt:usdt") == "BTCUSDT_USDT"
    assert trades_path("ETH/USDT") == "symbols/ETHUSDT/trades.yaml"
    assert performance_path("ETH/USDT") == "symbols/ETHUSDT/performance_summary.yaml"
    with pytest.raises(ValueError):
        symbol_key("../x")


def test_trader_files_are_valid_yaml_that_loads_back(bank: MemoryBank) -> None:
    record = TradesFile(symbol="BTC/USDT")
    for update in (trade("t1", None), trade("t1", "49.75", "Exit was early."), trade("t2", "-20"),
                   trade("t3", None)):
        record = record.upsert(update)
    summary = summarise(record, parse_time("2024-02-20T14:00:00Z"))

    async def scenario() -> None:  # through the bank, as the memory tools write them
        await bank.awrite_file(TRADER, trades_path("BTC/USDT"), to_yaml(record).encode())
        await bank.awrite_file(TRADER, performance_path("BTC/USDT"), to_yaml(summary).encode())

    asyncio.run(scenario())
    raw = bank.read_file(TRADER, "symbols/BTCUSDT/trades.yaml").data.decode()
    plain = yaml.safe_load(raw)
    assert plain["symbol"] == "BTC/USDT" and plain["schema_version"] == 1
    assert plain["trades"][0]["entry_price"] == "43000.5"  # decimals as strings, never floats
    trades = load_yaml(TradesFile, raw)
    assert [t.trade_id for t in trades.trades] == ["t1", "t2", "t3"]
    assert trades.trades[0].realized_pnl == Decimal("49.75")
    summary = load_yaml(PerformanceSummary, bank.read_file(
        TRADER, "symbols/BTCUSDT/performance_summary.yaml").data.decode())
    assert (summary.total_trades, summary.open_trades, summary.wins, summary.losses) == (3, 1, 1, 1)
    assert summary.net_pnl == Decimal("29.75")
    assert summary.win_rate_pct == Decimal("50.00")
    assert summary.profit_factor == Decimal("2.4875")
    assert summary.max_consecutive_losses == 1
    assert summary.lessons == ["Exit was early."]
    assert summary.updated_at == "2024-02-20T14:00:00Z"


def test_a_trader_without_history_gets_empty_files() -> None:
    empty = TradesFile(symbol="SOL/USDT")
    assert load_yaml(TradesFile, to_yaml(empty)) == empty


def test_a_rolled_over_trades_file_summarises_exactly_as_the_whole_record() -> None:
    rng = random.Random(7)
    for case in range(300):
        pnls = [rng.choice([None, "0", "-1.5", "-20", "3", "49.75", "0.01"])
                for _ in range(rng.randint(0, 40))]
        whole = TradesFile(symbol="BTC/USDT",
                           trades=[trade(f"t{i}", p, f"lesson {i}") for i, p in enumerate(pnls)])
        rolled, archive = whole, []
        for keep in sorted(rng.sample(range(12), 3), reverse=True):  # rolls more than once
            moved = rolled.oldest_closed(keep)
            rolled = rolled.without(moved, f"symbols/BTCUSDT/trades_archive/{keep}.yaml")
            archive.extend(moved)
            rolled = load_yaml(TradesFile, to_yaml(rolled))  # through the file, as the Trader
        assert summarise(rolled, 0).model_copy(update={"lessons": []}) == summarise(
            whole, 0).model_copy(update={"lessons": []}), (case, pnls)
        assert all(t.closed for t in archive)  # open trades always stay in the file
        assert sorted([*archive, *rolled.trades], key=lambda t: int(t.trade_id[1:])) == (
            whole.trades)  # every trade is in exactly one place


def test_a_roll_over_keeps_an_open_trade_that_shares_its_id_with_an_archived_one() -> None:
    edited = TradesFile(symbol="BTC/USDT", trades=[  # a file edited by hand repeats an id
        trade("t1", "3"), trade("t2", "-1"), trade("t1", None)])
    moved = edited.oldest_closed(1)
    rolled = edited.without(moved, "symbols/BTCUSDT/trades_archive/a.yaml")
    assert [t.trade_id for t in moved] == ["t1"]
    assert [(t.trade_id, t.closed) for t in rolled.trades] == [("t2", True), ("t1", False)]


def test_a_file_that_never_rolled_over_has_no_archived_section() -> None:
    text = to_yaml(TradesFile(symbol="BTC/USDT", trades=[trade("t1", "3")]))
    assert "archived" not in text
    loaded = load_yaml(TradesFile, text)
    rolled = loaded.without(loaded.oldest_closed(0), "symbols/BTCUSDT/trades_archive/a.yaml")
    plain = yaml.safe_load(to_yaml(rolled))
    assert plain["archived"]["files"] == ["symbols/BTCUSDT/trades_archive/a.yaml"]
    assert plain["archived"]["net_pnl"] == "3" and plain["trades"] == []


def test_analyst_log_entries_append_and_parse_back(bank: MemoryBank) -> None:
    entries = [
        AnalysisEntry(
            time="2024-02-20T14:00:00Z",
            symbol="BTC/USDT",
            interval="1h",
            signal=Signal.BUY,
            confidence=Decimal("0.72"),
            indicators={"RSI(14)": "28.4", "MACD.histogram": "12.1"},
            observations="Three red candles on falling volume, then a hammer.",
            reasoning="Oversold with bullish divergence.\n## not a header inside the yaml",
            dispatched_to=TRADER,
        ),
        AnalysisEntry(
            time="2024-02-20T15:00:00Z",
            symbol="ETH/USDT",
            interval="4h",
            signal=Signal.HOLD,
            confidence=Decimal("0.4"),
        ),
    ]

    async def scenario() -> list[AnalysisEntry]:
        for entry in entries:
            await bank.aappend_file(ANALYST, ANALYSIS_LOG, render_analysis_entry(entry).encode())
        return parse_analysis_log((await bank.aread_file(ANALYST, ANALYSIS_LOG)).data.decode())

    assert asyncio.run(scenario()) == entries
    text = bank.read_file(ANALYST, "analysis_log.md").data.decode()
    assert "## 2024-02-20T14:00:00Z · BTC/USDT 1h · BUY (confidence 0.72)" in text
    assert bank.recall(ANALYST, "hammer")[0].path == "analysis_log.md"


def test_a_damaged_analysis_log_names_the_entry_line() -> None:
    good = render_analysis_entry(
        AnalysisEntry(
            time="2024-02-20T14:00:00Z",
            symbol="BTC/USDT",
            interval="1h",
            signal=Signal.NONE,
            confidence=Decimal("0"),
        )
    )
    broken = good + "\n## 2024-02-20T15:00:00Z · edited by hand\nno yaml here\n"
    with pytest.raises(ValueError, match="line"):
        parse_analysis_log(broken)


def test_market_assessment_keeps_every_symbol_and_loads_back(bank: MemoryBank) -> None:
    btc = SymbolAssessment(
        trend="UP",
        regime="trending, ADX 31",
        bias=Signal.BUY,
        confidence=Decimal("0.65"),
        support=[Decimal("42000"), Decimal("41250.5")],
        resistance=[Decimal("44800")],
        indicators={"EMA(50)": "42710.2"},
        summary="Higher lows since Monday.",
        assessed_at="2024-02-20T14:00:00Z",
    )
    eth = btc.model_copy(update={"trend": "SIDEWAYS", "bias": Signal.HOLD})

    async def scenario() -> MarketAssessment | None:
        view = MarketAssessment(updated_at=btc.assessed_at)
        for symbol, assessment in (("BTC/USDT", btc), ("ETH/USDT", eth)):
            view = view.with_symbol(symbol, assessment)
            await bank.awrite_file(ANALYST, MARKET_ASSESSMENT, to_yaml(view).encode())
        content = await bank.aread_file(ANALYST, MARKET_ASSESSMENT)
        return load_yaml(MarketAssessment, content.data.decode()) if content.exists else None

    loaded = asyncio.run(scenario())
    assert loaded is not None
    assert loaded.symbols == {"BTC/USDT": btc, "ETH/USDT": eth}
    raw = yaml.safe_load(bank.read_file(ANALYST, "current_market_assessment.yaml").data)
    assert raw["symbols"]["BTC/USDT"]["support"] == ["42000", "41250.5"]


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (
            TradeRecord,
            {
                "trade_id": "x",
                "side": "BUY",
                "quantity": "-1",
                "entry_price": "1",
                "opened_at": "2024-02-20T14:00:00Z",
            },
        ),
        (
            TradeRecord,
            {
                "trade_id": "x",
                "side": "LONG",
                "quantity": "1",
                "entry_price": "1",
                "opened_at": "2024-02-20T14:00:00Z",
            },
        ),
        (
            TradeRecord,
            {
                "trade_id": "x",
                "side": "BUY",
                "quantity": "1",
                "entry_price": "1",
                "opened_at": "yesterday",
            },
        ),
        (
            PerformanceSummary,
            {
                "symbol": "X",
                "updated_at": "2024-02-20T14:00:00Z",
                "total_trades": 1,
                "open_trades": 0,
                "wins": 0,
                "losses": 1,
                "surprise": True,
            },
        ),
    ],
)
def test_off_schema_documents_are_refused(model, data) -> None:
    with pytest.raises(ValueError):
        load_yaml(model, yaml.safe_dump(data))


# -- documents read back are the documents written ------------------------------------------

_TIMES = st.sampled_from(["2024-02-20T14:00:00Z", "2019-10-11T01:00:00Z", "2017-07-01T00:00:00Z"])
_TEXT = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["yes", "null", "1e3", "0x1F", "- item", "a: b", " lead", "#x", "", "~"]),
)
_MONEY = st.decimals(min_value=Decimal("0.00000001"), max_value=Decimal("1e9"), places=8)
_PNL = st.decimals(min_value=Decimal("-1e6"), max_value=Decimal("1e6"), places=4)
_SHARE = st.decimals(min_value=0, max_value=1, places=3)
_records = st.builds(
    TradeRecord, trade_id=st.text(min_size=1, max_size=20), side=st.sampled_from(list(Side)),
    quantity=_MONEY, entry_price=_MONEY, opened_at=_TIMES,
    exit_price=st.none() | _MONEY, closed_at=st.none() | _TIMES,
    realized_pnl=st.none() | _PNL, signal=_TEXT, confidence=st.none() | _SHARE,
    reasoning=_TEXT, reflection=st.none() | _TEXT, order_ids=st.lists(_TEXT, max_size=3),
    stop_loss=st.none() | _MONEY, take_profit=st.none() | _MONEY,
)
_archives = st.builds(
    ArchivedTrades, files=st.lists(_TEXT, max_size=3), trades=st.integers(0, 500),
    net_pnl=_PNL, largest_win=st.none() | _PNL, trailing_losses=st.integers(0, 9),
)
_documents = st.one_of(
    st.builds(TradesFile, symbol=st.just("BTC/USDT"), archived=st.none() | _archives,
              trades=st.lists(_records, max_size=4)),
    st.builds(
        MarketAssessment, updated_at=_TIMES,
        symbols=st.dictionaries(st.sampled_from(["BTC/USDT", "ETH/USDT"]), st.builds(
            SymbolAssessment, trend=st.sampled_from(["UP", "DOWN", "SIDEWAYS"]),
            regime=_TEXT, bias=st.sampled_from(list(Signal)), confidence=_SHARE,
            support=st.lists(_MONEY, max_size=3), resistance=st.lists(_MONEY, max_size=3),
            indicators=st.dictionaries(_TEXT, _TEXT, max_size=3), summary=_TEXT,
            assessed_at=_TIMES), max_size=2),
    ),
    st.builds(
        AnalysisEntry, time=_TIMES, symbol=st.just("BTC/USDT"), interval=st.just("1h"),
        signal=st.sampled_from(list(Signal)), confidence=_SHARE,
        indicators=st.dictionaries(_TEXT, _TEXT, max_size=3), observations=_TEXT,
        reasoning=_TEXT, dispatched_to=st.none() | _TEXT,
    ),
)


@settings(max_examples=300, deadline=None)
@given(document=_documents)
def test_every_role_document_written_parses_back_to_itself(document) -> None:
    # what lets a document just written be handed back when its text is read again
    assert parse_yaml(type(document), to_yaml(document)) == document


def test_a_document_read_back_after_writing_it_is_not_parsed_again(monkeypatch) -> None:
    document = TradesFile(symbol="BTC/USDT", trades=[trade("t-1", "12.5")])
    text = to_yaml(document)
    monkeypatch.setattr(yamltext, "load", lambda _text: pytest.fail("parsed again"))
    assert load_yaml(TradesFile, text) is document
    with pytest.raises(ValueError, match="not valid YAML"):  # other text still is parsed
        monkeypatch.undo()
        load_yaml(TradesFile, "symbol: [unclosed\n")
