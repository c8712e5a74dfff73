"""Benchmark: how much an agent backtest leaves on disk, per bar, and in which tables.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_storage.py [--bars 3000] [--keep DIR]

It runs the rule-engine agent backtest (``AnalystAgent_Trend_v1`` and ``TraderAgent_Default_v1``)
over the bundled Coinbase BTC/USD hourly file, as ``bench_agent_backtest.py`` does, then reads
what the run's workspace holds: the workspace database (``kestrel.db``) and each agent's recall
index (``memory/.index/*.sqlite3``), each broken down by table with SQLite's ``dbstat`` (an
FTS5 table's shadow tables are summed under its name), and the text the memory files hold. It
prints bytes per bar of each, so a change in what one bar stores shows as a number, and the wall
time of the run. ``--keep`` leaves the run's folder for a closer look.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

SOURCE = REPO / "resources" / "sample_data" / "BTC-USD_1h_20170701-20191017_coinbase.csv"
TEMPLATES = ["AnalystAgent_Trend_v1", "TraderAgent_Default_v1"]
WARMUP = 60
FTS_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")


def table_sizes(path: Path) -> dict[str, int]:
    """Bytes of each table (with its indexes) in the database at ``path``; an FTS5 table's
    shadow tables count under the FTS table's name."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        owners = {name: table for name, table in conn.execute(
            "SELECT name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')")}
        sizes: dict[str, int] = defaultdict(int)
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owners.get(name, name)
            for suffix in FTS_SHADOWS:
                if table.endswith(suffix) and table[: -len(suffix)] in owners:
                    table = table[: -len(suffix)]
            sizes[table] += int(size)
        return dict(sizes)
    finally:
        conn.close()


def text_bytes(path: Path) -> dict[str, int]:
    """Bytes of text the database's largest text columns give to a reader (what the views put
    back together, before any sharing or compression)."""
    from app.store.texts import install

    conn = install(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True))
    queries = {
        "messages.content": "SELECT sum(length(CAST(content AS BLOB))) FROM messages",
        "tool_calls.result_xml": "SELECT sum(length(CAST(result_xml AS BLOB))) FROM tool_calls",
        "tool_calls.params_json": "SELECT sum(length(CAST(params_json AS BLOB))) FROM tool_calls",
    }
    try:
        out = {}
        for name, sql in queries.items():
            try:
                out[name] = int(conn.execute(sql).fetchone()[0] or 0)
            except sqlite3.Error:
                continue
        return out
    finally:
        conn.close()


def measure(bars: int, keep: Path | None) -> dict[str, Any]:
    from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest

    folder = keep or Path(tempfile.mkdtemp(prefix="bench-storage-"))
    if keep is not None and keep.exists():
        shutil.rmtree(keep)
    try:
        options = AgentBacktestOptions(templates=TEMPLATES, cash=Decimal(10_000),
                                       warmup_bars=WARMUP, bars=bars, allow_gaps=True)
        started = time.perf_counter()
        outcome = asyncio.run(run_agent_backtest([SOURCE], options, folder))
        seconds = time.perf_counter() - started
        ran = int(outcome.result.time_ms.size) - 1
        workspace = folder / "workspace"
        db = workspace / "kestrel.db"
        indexes = sorted((workspace / "memory" / ".index").glob("*.sqlite3"))
        memory_text = sum(p.stat().st_size for p in (workspace / "memory").rglob("*")
                          if p.is_file() and ".index" not in p.parts)
        index_tables: dict[str, int] = defaultdict(int)
        for index in indexes:
            for table, size in table_sizes(index).items():
                index_tables[table] += size
        return {
            "bars": ran, "seconds": seconds, "tool_calls": outcome.tool_calls,
            "db_bytes": db.stat().st_size, "db_tables": table_sizes(db),
            "db_text": text_bytes(db),
            "index_bytes": sum(p.stat().st_size for p in indexes),
            "index_tables": dict(index_tables), "memory_text_bytes": memory_text,
        }
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def report(result: dict[str, Any]) -> None:
    bars = result["bars"]
    print(f"{bars:,} bars in {result['seconds']:.1f} s ({bars / result['seconds']:.1f} bars/s); "
          f"{result['tool_calls']:,} tool calls")
    for name, total, tables in (("workspace database", result["db_bytes"], result["db_tables"]),
                                ("recall indexes", result["index_bytes"],
                                 result["index_tables"])):
        print(f"{name}: {total / 1e6:,.1f} MB = {total / bars:,.0f} bytes a bar")
        for table, size in sorted(tables.items(), key=lambda item: -item[1])[:12]:
            print(f"  {table:<28} {size / 1e6:9.2f} MB {size / bars:9,.0f} B/bar")
    for column, size in result["db_text"].items():
        print(f"text in {column}: {size / 1e6:,.1f} MB = {size / bars:,.0f} bytes a bar")
    print(f"memory files (text the recall index covers): {result['memory_text_bytes'] / 1e6:.1f}"
          f" MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=3000, help="bars after the warm-up")
    parser.add_argument("--keep", type=Path, help="run in this folder and leave it")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args()
    result = measure(args.bars, args.keep)
    report(result)
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
