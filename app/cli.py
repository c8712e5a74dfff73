"""The headless command line: run any tool, print the tool section or the indicator catalogue.

``kestrel tool '<get_order_book>…</get_order_book>'`` prints the ``<tool_result>`` exactly as an
agent would receive it, so a person or a script can test the toolset without the GUI.

A workspace has one writer. A command that would write a workspace another process holds (the
window, ``kestrel run``/``chat``, another ``kestrel tool``) prints one line naming that process
and exits with ``EXIT_WORKSPACE_BUSY`` (75, the usual "temporary failure, try again later").
``kestrel tool`` with a market, indicator or account tool still answers then, read-only: from the
account as the holder last committed it, without settling it or recording the call.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app import __version__
from app.domain.clock import ms_to_iso, parse_time
from app.domain.errors import KestrelError
from app.redaction import redacted_output
from app.store.lock import WorkspaceBusyError, WorkspaceLock
from app.tools.spec import ALL_PERMISSIONS, AgentContext, Permission
from app.workspace import Workspace, setup_logging

if TYPE_CHECKING:
    from app.runtime import OfflineRuntime

EXIT_OK = 0
EXIT_TOOL_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL_ERROR = 1  # what Python itself exits with after an uncaught exception
EXIT_WORKSPACE_BUSY = 75  # sysexits' EX_TEMPFAIL: another process writes the workspace

# tools that only read: they may run on a workspace another process writes. Memory tools are not
# among them: reading memory catches the agent's recall index up with the files (a write).
READ_ONLY_PERMISSIONS = frozenset({Permission.MARKET, Permission.INDICATOR, Permission.ACCOUNT})


def _add_market_options(parser: argparse.ArgumentParser) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kestrel",
        description=(
            "Kestrel: LLM agents that analyse crypto markets and trade through one fixed, audited "
            "toolset. Runs fully offline on bundled market data."
        ),
        epilog=f"A workspace has one writer: a command that would write a workspace another "
               f"process holds exits with {EXIT_WORKSPACE_BUSY} and names that process.",
    )
    parser.add_argument("--version", action="version", version=f"kestrel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("gui", help="open the window (the default with no command; see kestrel gui -h)")

    tool = sub.add_parser(
        "tool",
        help="run one XML tool call and print its <tool_result>",
        description="Run one tool call against the offline market and print the result envelope.",
    )
    tool.add_argument("call", help="the XML tool call, or - to read it from standard input")
    tool.add_argument("--agent", default="operator", help="agent id to run the call as")
    _add_market_options(tool)

    tools = sub.add_parser("tools", help="print the generated Available Tools prompt section")
    _add_market_options(tools)

    sub.add_parser("indicators", help="list the technical indicator catalogue")

    restore = sub.add_parser(
        "restore-backup",
        help="list the workspace database's backups, or put one back in place of a damaged one",
        description="Without --list, restore the newest backup (or --backup FILE) of the "
                    "workspace's kestrel.db. The database it replaces is renamed aside "
                    "(kestrel.db.damaged-<time>), never deleted. Nothing may hold the workspace.",
    )
    restore.add_argument("--workspace", type=Path, metavar="DIR",
                         help="workspace folder; default: this checkout or the user data folder")
    restore.add_argument("--list", action="store_true", help="only list the backups")
    restore.add_argument("--backup", type=Path, metavar="FILE",
                         help="the backup to restore; default: the newest")

    from app.backtest.cli import add_backtest_arguments
    from app.demo import add_demo_arguments

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

    from app.agents.cli import add_chat_arguments, add_run_arguments

    run = sub.add_parser(
        "run", help="run the workspace's agents on the offline market (paper), printing events"
    )
    add_run_arguments(run)
    chat = sub.add_parser("chat", help="talk to the Orchestrator in the terminal")
    add_chat_arguments(chat)

    from app.mcp.serve_command import add_mcp_serve_arguments

    mcp_serve = sub.add_parser(
        "mcp-serve",
        help="serve the workspace's market, indicator, account, trade and memory tools over MCP "
             "(stdio) to an external agent",
        description="Serve Kestrel's tools to an MCP client over stdin/stdout. Calls go through "
                    "the same executor, Risk Guard and audit trail as Kestrel's own agents; an "
                    "order the approval policy would hold for a person is refused.",
    )
    add_mcp_serve_arguments(mcp_serve)
    return parser


def _workspace(args: argparse.Namespace) -> Workspace:
    if getattr(args, "workspace", None):
        return Workspace.at(args.workspace).ensure()
    return Workspace.default()


def _runtime(args: argparse.Namespace, *, read_only: bool = False) -> OfflineRuntime:
    from app.runtime import build_offline_runtime

    at_ms = parse_time(args.at) if args.at else None
    return build_offline_runtime(_workspace(args), args.data, at_ms, read_only=read_only)


def _read_call(text: str) -> bytes:
    if text == "-":
        return sys.stdin.buffer.read()
    return text.encode("utf-8", errors="surrogateescape")


def cmd_tool(args: argparse.Namespace) -> int:
    raw = _read_call(args.call)
    try:
        runtime = _runtime(args)
    except WorkspaceBusyError as busy:
        runtime = _runtime(args, read_only=True)
        try:
            return _run_read_only(runtime, args, raw, busy)
        finally:
            runtime.close()
    try:
        return _run_tool(runtime, args, raw)
    finally:
        runtime.close()


def _run_read_only(
    runtime: OfflineRuntime, args: argparse.Namespace, raw: bytes, busy: WorkspaceBusyError
) -> int:
    """Run a call that only reads; refuse any other while the workspace is held elsewhere."""
    parsed = runtime.executor.parse(raw)
    spec = runtime.registry.get(parsed.call.name) if parsed.call is not None else None
    if spec is not None and spec.permission not in READ_ONLY_PERMISSIONS:
        raise WorkspaceBusyError(
            busy.root, busy.holder,
            f" ({spec.name} writes; market, indicator and account tools can still be called)",
        ) from None
    settled = runtime.broker.settled_ms
    print(
        f"kestrel: read-only: {busy.holder.describe() if busy.holder else 'another process'} "
        f"writes this workspace; the account is as it last committed it (settled to "
        f"{ms_to_iso(settled) if settled >= 0 else 'never'}) and this call is not recorded",
        file=sys.stderr,
    )
    return _run_tool(runtime, args, raw)


def _run_tool(runtime: OfflineRuntime, args: argparse.Namespace, raw: bytes) -> int:
    ctx = AgentContext(
        agent_id=args.agent,
        permissions=ALL_PERMISSIONS,
        role="operator",
        watched_symbols=runtime.market.symbols(),
    )
    parsed = runtime.executor.parse(raw)
    if parsed.is_text:
        print(
            "kestrel: that is not a tool call. Give XML such as "
            "'<get_order_book><symbol>BTC/USD</symbol></get_order_book>'.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    result = asyncio.run(runtime.executor.execute_parsed(ctx, parsed))
    print(result.xml)
    return EXIT_OK if result.ok else EXIT_TOOL_FAILED


def cmd_tools(args: argparse.Namespace) -> int:
    try:
        runtime = _runtime(args)
    except WorkspaceBusyError:
        runtime = _runtime(args, read_only=True)  # the section only describes the tools
    try:
        print(runtime.registry.available_tools_section(ALL_PERMISSIONS))
    finally:
        runtime.close()
    return EXIT_OK


def cmd_indicators(args: argparse.Namespace) -> int:
    from app.indicators.catalogue import ALL_INDICATORS

    width = max(len(spec.name) for spec in ALL_INDICATORS)
    for spec in sorted(ALL_INDICATORS, key=lambda s: (s.category, s.name)):
        params = ", ".join(f"{p.name}={p.default}" for p in spec.params)
        outputs = ",".join(spec.output_names)
        print(f"{spec.name:<{width}}  {spec.category:<10}  {outputs:<40}  {params}")
    print(
        f"\n{len(ALL_INDICATORS)} indicators; details: kestrel tool "
        "'<describe_technical_indicator><indicator_name>RSI</indicator_name>"
        "</describe_technical_indicator>'"
    )
    return EXIT_OK


def cmd_restore_backup(args: argparse.Namespace) -> int:
    from app.store.backups import list_backups, restore_backup

    workspace = _workspace(args)
    backups = list_backups(workspace.backup_dir)
    if args.list:
        if not backups:
            print(f"No backups of {workspace.db_path} yet (they are kept in "
                  f"{workspace.backup_dir}).")
        for backup in backups:
            print(backup.describe())
        return EXIT_OK
    chosen = args.backup.expanduser().resolve() if args.backup else None
    if chosen is None:
        if not backups:
            print(f"kestrel: there is no backup of {workspace.db_path} to restore",
                  file=sys.stderr)
            return EXIT_USAGE
        chosen = backups[0].path
    lock = WorkspaceLock.acquire(workspace.lock_path)
    try:
        aside = restore_backup(workspace.db_path, chosen)
    finally:
        lock.release()
    print(f"Restored {workspace.db_path} from {chosen}.")
    if aside is not None:
        print(f"The database it replaced was moved to {aside}.")
    return EXIT_OK


def cmd_backtest(args: argparse.Namespace) -> int:
    from app.backtest.cli import backtest_command

    return backtest_command(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from app.demo import demo_command

    return demo_command(args)


def cmd_run(args: argparse.Namespace) -> int:
    from app.agents.cli import run_command

    return run_command(args)


def cmd_chat(args: argparse.Namespace) -> int:
    from app.agents.cli import chat_command

    return chat_command(args)


def cmd_mcp_serve(args: argparse.Namespace) -> int:
    from app.mcp.serve_command import mcp_serve_command

    return mcp_serve_command(args)


COMMANDS = {
    "run": cmd_run,
    "chat": cmd_chat,
    "tool": cmd_tool,
    "tools": cmd_tools,
    "indicators": cmd_indicators,
    "restore-backup": cmd_restore_backup,
    "backtest": cmd_backtest,
    "demo": cmd_demo,
    "mcp-serve": cmd_mcp_serve,
}


GUI_OPTIONS = frozenset({"--workspace", "--data", "--speed", "--reset-layout"})


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
    parser.add_argument("--speed", type=float, choices=[1.0, 10.0, 60.0, 600.0],
                        help="replay speed: simulated seconds per second")
    parser.add_argument("--reset-layout", action="store_true",
                        help="forget the saved window layout")
    return parser


def gui_command(argv: Sequence[str]) -> int:
    args = build_gui_parser().parse_args(list(argv))
    setup_logging(None)
    from app.ui.app import run_gui

    return run_gui(args.workspace, data_files=args.data, speed=args.speed,
                   reset_layout=args.reset_layout)


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
    setup_logging(None)
    try:
        return COMMANDS[args.command](args)
    except WorkspaceBusyError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_WORKSPACE_BUSY
    except KestrelError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_USAGE
