"""The ``kestrel`` command: its parser, dispatch to each command module, and exit codes.

With no command (or only the window's options) it opens the window; otherwise it runs one headless
command. Each command's module is imported only when it runs (or when the full parser is built),
so the window's first second and ``kestrel --help`` load no more than they need.

A workspace has one writer. A command that would write a workspace another process holds (the
window, ``kestrel run``/``chat``, another ``kestrel tool``) prints one line naming that process
and exits with ``EXIT_WORKSPACE_BUSY`` (75, the usual "temporary failure, try again later").
A full disk ends a command with one message (where, why, what it stopped and what it could not
record) and ``EXIT_DISK_FULL`` (74), never a traceback. Everything a command prints, tracebacks
included, passes the secret redactor.
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from app import __version__
from app.cli.common import (
    EXIT_DISK_FULL,
    EXIT_INTERNAL_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WORKSPACE_BUSY,
)
from app.domain.errors import KestrelError
from app.redaction import redacted_output
from app.store.disk_full import DiskFullError
from app.store.lock import WorkspaceBusyError
from app.workspace import setup_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kestrel",
        description=(
            "Kestrel: LLM agents that analyse crypto markets and trade through one fixed, audited "
            "toolset. Runs fully offline on bundled market data."
        ),
        epilog=f"A workspace has one writer: a command that would write a workspace another "
               f"process holds exits with {EXIT_WORKSPACE_BUSY} and names that process. A "
               f"command stopped by a full disk exits with {EXIT_DISK_FULL}, naming what it "
               "could not record.",
    )
    parser.add_argument("--version", action="version", version=f"kestrel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("gui", help="open the window (the default with no command; see kestrel gui -h)")
    _add_inspection_commands(sub)
    _add_maintenance_commands(sub)
    _add_backtest_commands(sub)
    _add_agent_commands(sub)
    return parser


# the subparsers' action has no public type
type Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def _add_inspection_commands(sub: Commands) -> None:
    """Commands that show what agents get: a tool call, the tools, a prompt, the indicators."""
    from app.cli.common import add_market_options
    from app.cli.tool import add_tool_arguments

    tool = sub.add_parser(
        "tool",
        help="run one XML tool call and print its <tool_result>",
        description="Run one tool call against the workspace's market (the offline replay, or "
                    "--venue live / live-paper) and print the result envelope.",
    )
    add_tool_arguments(tool)
    tools = sub.add_parser(
        "tools", help="print the generated Available Tools prompt section (every tool, or what "
                      "an agent of --template receives)")
    add_market_options(tools)
    tools.add_argument("--template", metavar="NAME",
                       help="the section agents of this template (or this agent, by id or "
                            "name) receive")

    from app.cli.agent_view import add_prompt_arguments

    prompt = sub.add_parser(
        "prompt", help="print the whole system prompt an agent of a template (or an agent of "
                       "the workspace) receives")
    add_prompt_arguments(prompt)
    sub.add_parser("indicators", help="list the technical indicator catalogue")


def _add_maintenance_commands(sub: Commands) -> None:
    """Commands that repair a workspace: a backup put back, a paper account started over."""
    from app.cli.restore import add_restore_arguments

    restore = sub.add_parser(
        "restore-backup",
        help="list the workspace database's backups, or put one back in place of a damaged one",
        description="Without --list, restore the newest backup (or --backup FILE) of the "
                    "workspace's kestrel.db. Only a backup of this workspace is taken (not the "
                    "live file, another workspace's backup or another SQLite file); what it "
                    "holds is shown and the command asks first (--yes: without asking). The "
                    "database it replaces is renamed aside (kestrel.db.damaged-<time>), never "
                    "deleted. Nothing may hold the workspace.",
    )
    add_restore_arguments(restore)

    from app.cli.paper_account import add_reset_arguments

    reset = sub.add_parser(
        "reset-paper-account",
        help="start the workspace's paper account over with [paper] initial_cash when the "
             "money it stored is out of range (only an account without orders or fills)",
        description="For a paper account opened with more money than Kestrel keeps (a "
                    "workspace it refuses to open says so): give it [paper] initial_cash, "
                    "keeping where its replay is, its agents, their memory and the audit trail. "
                    "The database is backed up first; without --yes nothing is changed.",
    )
    add_reset_arguments(reset)


def _add_backtest_commands(sub: Commands) -> None:
    """Commands that replay history: a backtest, the narrated demo, a sweep, a model's eval."""
    from app.cli.backtest import add_backtest_arguments
    from app.cli.demo import add_demo_arguments

    backtest = sub.add_parser(
        "backtest",
        help="replay a strategy over kline files through the full tool path and write a report",
    )
    add_backtest_arguments(backtest)
    demo = sub.add_parser(
        "demo",
        help="watch a strategy trade the bundled market data offline, narrated in the terminal",
    )
    add_demo_arguments(demo)

    from app.cli.sweep import add_sweep_arguments

    sweep = sub.add_parser(
        "sweep",
        help="run many backtests over a grid (or a random sample) of parameters, on local "
             "processes or a Dask cluster, into one sorted table",
        description="Every cell is a full kestrel backtest (a strategy, or agent templates "
                    "with --agents) in its own folder with the same report. The sweep resumes "
                    "where it stopped, records a failing cell and goes on, and writes "
                    "results.csv, results.json and heatmap.png, best first beside buy-and-hold, "
                    "warning when the best cell is an isolated peak. E.g. kestrel sweep --data "
                    "FILE --grid fast=5,10,20 --grid slow=30,50 --out DIR",
    )
    add_sweep_arguments(sweep)

    from app.cli.eval import add_eval_arguments

    evaluate = sub.add_parser(
        "eval",
        help="measure a configured model as Kestrel's Analyst and Trader on fixed market "
             "windows (recorded; --replay repeats a run offline)",
        description="Run the model as the Trend Analyst and the Trader over fixed windows of the "
                    "bundled data and beside the rule engine: tasks that ended in a decision, "
                    "with refusals, step-limit stops and tasks left without their required "
                    "actions counted apart; valid answers and the refused ones by error code, "
                    "calls and tokens per decision, cost, latency, agreement with the rule "
                    "engine, return against buy-and-hold. Every exchange with the model is "
                    "recorded; --replay RUN gives the same report offline.",
    )
    add_eval_arguments(evaluate)


def _add_agent_commands(sub: Commands) -> None:
    """Commands that run the workspace's agents or serve its tools: run, chat, mcp-serve."""
    from app.cli.agents import add_chat_arguments, add_run_arguments

    run = sub.add_parser(
        "run", help="run the workspace's agents on the offline market (paper), printing events"
    )
    add_run_arguments(run)
    chat = sub.add_parser("chat", help="talk to the Orchestrator in the terminal")
    add_chat_arguments(chat)

    from app.cli.mcp_serve import add_mcp_serve_arguments

    mcp_serve = sub.add_parser(
        "mcp-serve",
        help="serve the workspace's market, indicator, account, trade and memory tools over MCP "
             "(stdio) to an external agent",
        description="Serve Kestrel's tools to an MCP client over stdin/stdout. Calls go through "
                    "the same executor, Risk Guard and audit trail as Kestrel's own agents; an "
                    "order the approval policy would hold for a person is refused.",
    )
    add_mcp_serve_arguments(mcp_serve)


def cmd_tool(args: argparse.Namespace) -> int:
    from app.cli.tool import cmd_tool as run

    return run(args)


def cmd_tools(args: argparse.Namespace) -> int:
    from app.cli.tool import cmd_tools as run

    return run(args)


def cmd_prompt(args: argparse.Namespace) -> int:
    from app.cli.agent_view import cmd_prompt as run

    return run(args)


def cmd_indicators(args: argparse.Namespace) -> int:
    from app.cli.tool import cmd_indicators as run

    return run(args)


def cmd_restore_backup(args: argparse.Namespace) -> int:
    from app.cli.restore import cmd_restore_backup as run

    return run(args)


def cmd_reset_paper_account(args: argparse.Namespace) -> int:
    from app.cli.paper_account import cmd_reset_paper_account as run

    return run(args)


def cmd_backtest(args: argparse.Namespace) -> int:
    from app.cli.backtest import backtest_command

    return backtest_command(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from app.cli.demo import demo_command

    return demo_command(args)


def cmd_sweep(args: argparse.Namespace) -> int:
    from app.cli.sweep import sweep_command

    return sweep_command(args)


def cmd_run(args: argparse.Namespace) -> int:
    from app.cli.agents import run_command

    return run_command(args)


def cmd_chat(args: argparse.Namespace) -> int:
    from app.cli.agents import chat_command

    return chat_command(args)


def cmd_eval(args: argparse.Namespace) -> int:
    from app.cli.eval import eval_command

    return eval_command(args)


def cmd_mcp_serve(args: argparse.Namespace) -> int:
    from app.cli.mcp_serve import mcp_serve_command

    return mcp_serve_command(args)


COMMANDS = {
    "run": cmd_run,
    "chat": cmd_chat,
    "tool": cmd_tool,
    "tools": cmd_tools,
    "prompt": cmd_prompt,
    "indicators": cmd_indicators,
    "restore-backup": cmd_restore_backup,
    "reset-paper-account": cmd_reset_paper_account,
    "backtest": cmd_backtest,
    "demo": cmd_demo,
    "sweep": cmd_sweep,
    "eval": cmd_eval,
    "mcp-serve": cmd_mcp_serve,
}


GUI_OPTIONS = frozenset({"--workspace", "--data", "--speed", "--reset-layout", "--venue",
                         "--exchange", "--confirm-live", "--self-test", "--self-test-timeout"})


def build_gui_parser() -> argparse.ArgumentParser:
    """The window's options, parsed without the other commands' heavy imports (cold start)."""
    parser = argparse.ArgumentParser(
        prog="kestrel gui",
        description="Open the Kestrel window. A workspace that never ran opens the offline demo: "
                    "bundled market data replayed, a paper exchange and agents on the built-in "
                    "rule engine.",
    )
    parser.add_argument("--workspace", type=Path, metavar="DIR",
                        help="workspace folder (database, memory); default: this checkout's")
    parser.add_argument("--data", action="append", type=Path, default=[], metavar="FILE",
                        help="kline CSV to replay (repeatable); default: the bundled data")
    parser.add_argument("--speed", type=float,
                        choices=[1.0, 10.0, 60.0, 600.0, 3600.0, 14400.0],
                        help="replay speed: simulated seconds per second")
    parser.add_argument("--at", metavar="TIME",
                        help="the replay's start date (ISO 8601 or Unix ms), for a new "
                             "workspace; one that already traded past it is refused; default: "
                             "where the workspace left off, or the demo's moment")
    parser.add_argument("--reset-layout", action="store_true",
                        help="forget the saved window layout")
    parser.add_argument("--venue", choices=("replay", "live-paper", "live"),
                        help="replay: the offline replay (the default); live-paper: paper "
                             "trading on an exchange's live quotes (network, no keys); live: "
                             "REAL orders on your exchange account (keys from the OS keyring; "
                             "the window asks you to type the exchange's name; never a "
                             "default); default: the workspace's [venue] setting (replay or "
                             "live-paper)")
    parser.add_argument("--exchange", metavar="ID",
                        help="live kinds: the ccxt id of the exchange, e.g. binance")
    parser.add_argument("--quote", default="USDT",
                        help="live: the account's currency; only pairs quoted in it trade (USDT)")
    parser.add_argument("--confirm-live", metavar="EXCHANGE", default="",
                        help="live: confirm real-money trading by naming the exchange again "
                             "(instead of typing it in the window's dialog)")
    parser.add_argument("--self-test", action="store_true",
                        help="check this installation without a person or a display: open the "
                             "desk offscreen on a fresh temporary workspace, run the offline "
                             "demo to its first fill, then exit (0: passed; 1: failed, saying "
                             "why); nothing of yours is read or changed")
    parser.add_argument("--self-test-timeout", type=float, metavar="SECONDS",
                        help="--self-test fails when it takes longer than this (180)")
    return parser


SELF_TEST_ALONE = ("workspace", "data", "speed", "reset_layout", "venue", "exchange", "quote",
                   "confirm_live")


def gui_command(argv: Sequence[str]) -> int:
    parser = build_gui_parser()
    args = parser.parse_args(list(argv))
    if args.self_test_timeout is not None and not args.self_test:
        parser.error("--self-test-timeout is an option of --self-test")
    if args.self_test:
        given = [f"--{name.replace('_', '-')}" for name in SELF_TEST_ALONE
                 if getattr(args, name) != parser.get_default(name)]
        if given:
            parser.error(f"--self-test opens a fresh temporary workspace on the offline demo; "
                         f"it takes no {', '.join(given)}")
        timeout = args.self_test_timeout
        if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
            parser.error(f"--self-test-timeout must be a positive number of seconds, got "
                         f"{timeout:g}")
        setup_logging(None)
        from app.ui.self_test import DEFAULT_TIMEOUT_S, run_self_test

        return run_self_test(DEFAULT_TIMEOUT_S if timeout is None else timeout)
    setup_logging(None)
    from app.ui.app import run_gui

    venue = None
    if args.venue == "live":
        from app.runtime.venue import VenueSpec

        if not args.exchange:
            print("kestrel: --venue live needs the exchange: add --exchange, e.g. binance",
                  file=sys.stderr)
            return EXIT_USAGE
        venue = VenueSpec.live_account(args.exchange.strip().lower(), (), args.quote.upper(),
                                       confirmed=args.confirm_live.strip().lower())
    start_ms = None
    if args.at:
        from app.domain.clock import parse_time

        try:
            start_ms = parse_time(args.at)
        except ValueError as exc:
            print(f"kestrel: --at {args.at!r} is not a time: {exc}", file=sys.stderr)
            return EXIT_USAGE
    return run_gui(args.workspace, data_files=args.data, speed=args.speed,
                   reset_layout=args.reset_layout, venue_kind=args.venue, exchange=args.exchange,
                   venue=venue, start_ms=start_ms)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; everything it prints (tracebacks too) passes the secret redactor."""
    with redacted_output():
        try:
            return _main(argv)
        except Exception:  # a bug: its traceback is printed here, where stderr still redacts
            traceback.print_exc()
            return EXIT_INTERNAL_ERROR


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] == "gui":
        return gui_command(arguments[1:])
    if arguments[0].split("=", 1)[0] in GUI_OPTIONS:  # ``kestrel --workspace DIR`` opens it
        return gui_command(arguments)
    parser = build_parser()
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    args.argv = arguments  # what a refusal quotes back when it gives the command to use
    setup_logging(None)
    try:
        return COMMANDS[args.command](args)
    except WorkspaceBusyError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_WORKSPACE_BUSY
    except DiskFullError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_DISK_FULL
    except KestrelError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_USAGE
