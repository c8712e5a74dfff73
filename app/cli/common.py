"""What every command shares: its exit codes, the workspace it opens, the market options and
the report's line about gaps.

Exit codes: 0 done; 1 a tool answered with an error or a rejection, or an internal error (what
Python itself exits with after an uncaught exception); 2 bad input; 3 a run finished with an
agent faulted (``app.agents.faults.EXIT_AGENT_FAULTED``); 74 the disk holding the workspace is
full (sysexits' EX_IOERR): the command stopped cleanly, kept every order and fill committed
before, and named what it could not record; 75 another process writes the workspace (sysexits'
EX_TEMPFAIL: try again later).
"""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal
from pathlib import Path

from app.backtest.report import BacktestResult, gaps_line
from app.domain.errors import OperationalError
from app.domain.numbers import MAX_MONEY, MONEY_LIMIT_REASON, MONEY_PLACES, plain
from app.workspace import Workspace, setup_logging

EXIT_OK = 0
EXIT_TOOL_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL_ERROR = 1  # what Python itself exits with after an uncaught exception
EXIT_DISK_FULL = 74  # sysexits' EX_IOERR: the disk holding the workspace is full
EXIT_WORKSPACE_BUSY = 75  # sysexits' EX_TEMPFAIL: another process writes the workspace


def workspace_of(args: argparse.Namespace) -> Workspace:
    """The ``--workspace`` folder (created when missing), else this checkout's or the user's."""
    if getattr(args, "workspace", None):
        return Workspace.at(args.workspace).ensure()
    return Workspace.default()


def terminal_ask(prompt: str) -> str | None:
    """The person's answer at a terminal; None when nobody can answer (not a terminal)."""
    if not sys.stdin.isatty():
        return None
    try:
        return input(prompt)
    except EOFError:
        return None


def check_cash(cash: Decimal, option: str = "--cash") -> None:
    """A starting cash given on the command line, in the range of ``[paper] initial_cash``.

    Raises:
        ValueError: not positive, or above ``MAX_MONEY``, with the reason.
    """
    if cash <= 0:
        raise ValueError(f"{option} must be positive, got {plain(cash)}")
    if cash > MAX_MONEY:
        raise ValueError(f"{option} must be at most {plain(MAX_MONEY)}, got {plain(cash)}: "
                         f"{MONEY_LIMIT_REASON}")
    if -cash.as_tuple().exponent > MONEY_PLACES:  # type: ignore[operator]
        raise ValueError(f"{option} has more than {MONEY_PLACES} decimals ({plain(cash)}): money "
                         f"is kept to {MONEY_PLACES} decimal places")


def log_to(workspace: Workspace) -> None:
    """Log to the workspace's ``logs/kestrel.log`` as its ``[logging]`` settings say (a settings
    file that cannot be read is reported by the command as it builds its world)."""
    try:
        settings = workspace.settings().logging
    except OperationalError:
        return
    setup_logging(workspace, settings)


def add_market_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="kline CSV to replay (repeatable); default: the bundled sample data",
    )
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="put the replay cursor at this time (ISO 8601 or Unix ms); default: end of the data",
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        metavar="DIR",
        help="workspace folder (database, memory); default: this checkout or the user data folder",
    )


def print_gaps(result: BacktestResult) -> None:
    """The report's line about missing candles, when there were any."""
    line = gaps_line(result)
    if line is not None:
        print(line)
