"""Recall finds what it found before the recall index was made smaller.

A deterministic memory is built through the bank, as agents build theirs over a backtest: a
journal entry and an analysis-log entry every hour, the market assessment rewritten every hour,
notes now and then, the analysis log rolled over into an archive when it grows, English with
numbers and symbols, Chinese, short words. Queries of every kind recall from it along the way and
at the end: short words and CJK grams, common terms (matched by more chunks than recall ranks
exactly), rare terms, numbers, phrases that match nothing. Every hit (file, line, score, snippet,
market time) must be the one recorded with the code before the index changed
(``tests/data/recall_record.json``), for an index written as each change is made and for a
backtest's deferred one.

To record the file again after a deliberate change of what recall finds, run this module as a
script: ``.venv/bin/python -m tests.unit.memory.test_recall_unchanged``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from app.domain.clock import ReplayClock, ms_to_iso, parse_time
from app.memory.bank import MemoryBank
from app.memory.store import MemoryLimits

RECORD = Path(__file__).resolve().parents[2] / "data" / "recall_record.json"
AGENT = "analyst-1"
START = parse_time("2024-02-20T14:00:00Z")
HOUR = 3_600_000
HOURS = 900
ROLLOVER_BYTES = 40_000
WORDS = ("trend", "momentum", "support", "resistance", "breakout", "squeeze", "divergence",
         "volume", "oversold", "overbought", "accumulation", "liquidity", "funding", "basis")
SYMBOLS = ("BTC/USDT", "ETH/USDT", "SOL/USDT", "BTC/USDT:USDT")
CHINESE = ("观察到连续三天缩量下跌, RSI 逼近 30", "买入理由: RSI 超卖 + 放量企稳",
           "震荡市, 布林带收窄, 等待突破", "止损出局, 亏损 1.8%")
QUERIES = (
    "BTC/USDT", "RSI oversold", "ma", "4h", "x", "缩量", "布林带收窄", "突破",
    "32.7", "histogram", "trend DOWN MACD cross", "bias HOLD confidence",
    "what happened last time RSI was oversold on SOL/USDT", "liquidity squeeze ETH",
    "ＢＴＣ/ＵＳＤＴ", "nothing-matches-this-zzq", "the", "1h", "funding basis 7",
    "stop loss", "entry 17",
)


def _number(i: int, scale: int) -> str:
    return f"{(i * 7919) % scale}.{(i * 104729) % 100:02d}"


def _entry(i: int) -> str:
    word = WORDS[i % len(WORDS)]
    other = WORDS[(i * 5 + 3) % len(WORDS)]
    symbol = SYMBOLS[i % len(SYMBOLS)]
    lines = [f"{symbol} 1h: {word} then {other}; RSI(14) {_number(i, 100)}, "
             f"MACD histogram {_number(i * 3, 60)}, close {_number(i, 70000)}."]
    if i % 9 == 0:
        lines.append(CHINESE[i // 9 % len(CHINESE)])
    if i % 13 == 0:
        lines.append(f"ma cross on 4h, x {i % 4}, stop loss at {_number(i, 900)}")
    if i % 31 == 0:
        lines.append(f"entry {i}: {' '.join(WORDS)} funding basis {i % 11}")
    return "\n".join(lines)


def _assessment(i: int) -> bytes:
    trend = ("UP", "DOWN", "RANGE")[i // 17 % 3]
    return (f"schema_version: 1\nupdated_at: '{ms_to_iso(START + i * HOUR)}'\nsymbols:\n"
            f"  BTC/USDT:\n    trend: {trend}\n    bias: HOLD\n    confidence: '0.{i % 9}5'\n"
            f"    indicators:\n      RSI(14): '{_number(i, 100)}'\n"
            f"    summary: 'trend {trend}; no MACD cross on the last complete candle: HOLD'\n"
            ).encode()


def _hits(bank: MemoryBank, when: str) -> dict[str, Any]:
    return {f"{when} {query}": [[h.path, h.line, h.score, h.snippet, h.market_ms]
                                for h in bank.recall(AGENT, query, 8)] for query in QUERIES}


def build_and_recall(root: Path, *, scratch: bool) -> dict[str, Any]:
    """Build the memory under ``root``; every recall made along the way and at the end."""
    clock = ReplayClock(START)
    bank = MemoryBank(root, clock, None, limits=MemoryLimits(durable=False), scratch=scratch)
    found: dict[str, Any] = {}
    log = "analysis_log.md"
    rolled = 0
    try:
        for i in range(HOURS):
            clock.advance_to(START + i * HOUR)
            bank.log_journal_entry(AGENT, _entry(i))
            bank.append_file(AGENT, log, f"## {ms_to_iso(clock.now_ms())}\n{_entry(i + 1)}\n"
                             .encode())
            bank.write_file(AGENT, "current_market_assessment.yaml", _assessment(i))
            if i % 50 == 7:
                bank.write_note(AGENT, f"idea-{i % 4}", f"{WORDS[i % 14]} idea {i}: {_entry(i)}")
            current = bank.read_file(AGENT, log)
            if len(current.data) > ROLLOVER_BYTES:
                rolled += 1
                bank.write_file(AGENT, f"analysis_log_archive/part-{rolled}.md", current.data)
                bank.write_file(AGENT, log, b"")
            if scratch:
                bank.commit()  # a backtest commits once a bar
            if i in (120, 451, 777):
                found.update(_hits(bank, f"hour {i}"))
        found.update(_hits(bank, "end"))
        found["rollovers"] = rolled
    finally:
        bank.close()
    return found


@pytest.mark.parametrize("scratch", [False, True], ids=["eager", "deferred"])
def test_recall_finds_what_it_found_before(tmp_path: Path, scratch: bool) -> None:
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    found = build_and_recall(tmp_path / "memory", scratch=scratch)
    assert found["rollovers"] >= 2  # the rollovers deleted and re-indexed whole files
    assert sum(1 for key, hits in found.items() if key != "rollovers" and hits) > 40
    for key, hits in recorded.items():
        assert found[key] == hits, key
    assert found.keys() == recorded.keys()


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        eager = build_and_recall(Path(folder) / "eager", scratch=False)
        deferred = build_and_recall(Path(folder) / "deferred", scratch=True)
    if eager != deferred:
        print("an eager and a deferred index found different things; not recorded")
        return 1
    RECORD.write_text(json.dumps(eager, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"recorded {len(eager)} recalls in {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
