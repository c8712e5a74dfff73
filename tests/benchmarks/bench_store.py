"""Benchmark of the workspace database's safety costs and of sqlite-utils on a store's hot path.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_store.py [--messages 150000] [--repeat 5]

or ``pytest tests/benchmarks/bench_store.py -s``.

A realistic workspace database is built first in a temporary folder, with the real schema: a
long-used workspace's conversations (``--messages`` rows of ~1 KB, the bulk of a real file), tool
calls, orders, fills and usage rows. Then, each with a baseline measured in the same run:

1. Opening a workspace for writing with its quick check (``check_database`` + ``connect``), against
   the baseline of opening it as before this check existed (``connect``: WAL, pragmas, the
   schema version). The page cache is warm (the file was just written), as when the app restarts.
2. One backup of that database (``take_backup``: online backup API, then a quick check of the
   copy), against the baseline of copying the file's bytes (``shutil.copyfile``).
3. Storing a conversation message, the hottest store write (two per agent step): the
   sqlite-utils dict insert (``StoreDb.insert``) against the hand-written INSERT the store keeps.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from app.store.backups import take_backup
from app.store.db import StoreDb, connect
from app.store.health import check_database

TEXT = ("The trend analyst sees RSI 41 and a MACD cross below the signal on BTC/USDT 1h; "
        "volume is 1.3x its 20-bar mean. ") * 8


def build(db: Path, messages: int) -> None:
    store = StoreDb(db, durable=False)
    conn = store.conn
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO messages (agent_id, task_id, step, role, kind, content, market_ms, wall_ms) "
        "VALUES (?,?,?,?,?,?,?,?)",
        ((f"agent-{i % 12}", f"task-{i // 30}", i % 30, "assistant", "assistant", TEXT, i, i)
         for i in range(messages)),
    )
    conn.executemany(
        "INSERT INTO tool_calls (agent_id, tool_name, params_json, status, error_code, "
        "result_xml, started_ms, duration_ms) VALUES (?,?,?,?,?,?,?,?)",
        ((f"agent-{i % 12}", "get_market_snapshot", "{}", "success", None, TEXT[:400], i, 1.0)
         for i in range(messages // 2)),
    )
    conn.executemany(
        "INSERT INTO llm_usage (agent_id, task_id, run_id, provider, model, input_tokens, "
        "output_tokens, cached_tokens, cost, latency_ms, market_ms, wall_ms) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        ((f"agent-{i % 12}", f"task-{i}", "run", "openai", "gpt-4o-mini", 6000, 80, 5000,
          "0.001", 400.0, i, i) for i in range(messages // 2)),
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def timed(fn, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def run(messages: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kestrel-bench-store-") as tmp:
        root = Path(tmp)
        db = root / "kestrel.db"
        build(db, messages)
        size_mb = db.stat().st_size / 1e6
        print(f"workspace database: {messages:,} messages, {size_mb:,.0f} MB "
              f"({sys.platform}, SQLite via Python {sys.version.split()[0]})")

        plain = median_ms(timed(lambda: connect(db).close(), repeat))
        checked = median_ms(timed(
            lambda: (check_database(db, root / "backups"), connect(db).close()), repeat))
        print("1. opening the workspace database for writing       median")
        print(f"   baseline: connect (pragmas, schema version)       {plain:8.1f} ms   1.0x")
        print(f"   quick check + connect                              {checked:8.1f} ms "
              f"{checked / plain:5.0f}x  (+{checked - plain:.0f} ms, "
              f"{(checked - plain) / size_mb:.1f} ms per MB)")

        copy = median_ms(timed(lambda: shutil.copyfile(db, root / "copy.db"), repeat))
        backup = median_ms(timed(lambda: take_backup(db, root / "backups"), repeat))
        print("2. one backup")
        print(f"   baseline: copy the file's bytes                    {copy:8.1f} ms   1.0x")
        print(f"   online backup + quick check of the copy            {backup:8.1f} ms "
              f"{backup / copy:5.1f}x  (off the event loop: a thread)")

        store = StoreDb(root / "hot.db", durable=False)
        row = {"agent_id": "agent-1", "task_id": "task-1", "step": 1, "role": "assistant",
               "kind": "assistant", "content": TEXT, "market_ms": 1, "wall_ms": 1}
        values = tuple(row.values())
        sql = ("INSERT INTO messages (agent_id, task_id, step, role, kind, content, market_ms, "
               "wall_ms) VALUES (?,?,?,?,?,?,?,?)")
        n = 2000
        hand = timed(lambda: store.conn.execute(sql, values), n)
        utils = timed(lambda: store.insert("messages", row), n)
        store.close()
        hand_us, utils_us = statistics.median(hand) * 1e6, statistics.median(utils) * 1e6
        print(f"3. storing one conversation message ({n} each, synchronous=NORMAL)")
        print(f"   baseline: hand-written INSERT (kept)               {hand_us:8.0f} µs   1.0x")
        print(f"   sqlite-utils dict insert                           {utils_us:8.0f} µs "
              f"{utils_us / hand_us:5.1f}x")
        return {"open_plain_ms": plain, "open_checked_ms": checked, "backup_ms": backup,
                "insert_hand_us": hand_us, "insert_utils_us": utils_us}


def test_bench_store() -> None:
    run(150_000, 5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=150_000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    run(options.messages, options.repeat)
