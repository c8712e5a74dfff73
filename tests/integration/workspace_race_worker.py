"""One of several processes that place orders in ONE workspace at the same time, as a script
calling ``kestrel tool`` in a loop would; run by ``test_one_writer.py``.

Usage: python workspace_race_worker.py WORKSPACE DATA WORKER_NO COUNT START_MS

Call *i* places a small market BUY with the client order id ``w<WORKER_NO>-<i>`` at the replay
cursor ``START_MS + i`` hours, through ``app.cli.main`` (the very code ``kestrel tool`` runs; in
process, so hundreds of calls do not each pay the interpreter's start-up). Each call's exit code
and output are printed as one JSON line; an exception escaping ``main`` (a traceback a person
would see) is recorded as exit code -1 with the traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback

from app.cli.main import main

HOUR_MS = 3_600_000


def order_xml(client_id: str) -> str:
    return (
        "<create_order><symbol>BTC/USD</symbol><side>BUY</side><quote_amount>20</quote_amount>"
        f"<client_order_id>{client_id}</client_order_id></create_order>"
    )


def run(workspace: str, data: str, worker: int, count: int, start_ms: int) -> None:
    for i in range(count):
        client_id = f"w{worker}-{i}"
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main([
                    "tool", "--workspace", workspace, "--data", data,
                    "--at", str(start_ms + i * HOUR_MS), order_xml(client_id),
                ])
        except Exception:  # noqa: BLE001 - recorded: the test fails on any traceback
            code, err = -1, io.StringIO(traceback.format_exc())
        line = {"cid": client_id, "rc": code, "out": out.getvalue(), "err": err.getvalue()}
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    ws, data_file, worker_no, n, start = sys.argv[1:6]
    run(ws, data_file, int(worker_no), int(n), int(start))
