"""The headless command line: run any tool, print the tool section or the indicator catalogue.

``kestrel tool '<get_order_book>…</get_order_book>'`` prints the ``<tool_result>`` exactly as an
agent would receive it, so a person or a script can test the toolset without the GUI.
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
from app.domain.clock import parse_time
from app.domain.errors import KestrelError
from app.redaction import redacted_output
from app.tools.spec import ALL_PERMISSIONS, AgentContext
from app.workspace import Workspace, setup_logging

if TYPE_CHECKING:
    from app.runtime import OfflineRuntime

EXIT_OK = 0
EXIT_TOOL_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL_ERROR = 1  # what Python itself exits with after an uncaught exception


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
    return parser


def _workspace(args: argparse.Namespace) -> Workspace:
    if getattr(args, "workspace", None):
        return Workspace.at(args.workspace).ensure()
    return Workspace.default()


def _runtime(args: argparse.Namespace) -> OfflineRuntime:
    from app.runtime import build_offline_runtime

    at_ms = parse_time(args.at) if args.at else None
    return build_offline_runtime(_workspace(args), args.data, at_ms)


def _read_call(text: str) -> bytes:
    if text == "-":
        return sys.stdin.buffer.read()
    return text.encode("utf-8", errors="surrogateescape")


def cmd_tool(args: argparse.Namespace) -> int:
    runtime = _runtime(args)
    try:
        return _run_tool(runtime, args)
    finally:
        runtime.close()


def _run_tool(runtime: OfflineRuntime, args: argparse.Namespace) -> int:
    ctx = AgentContext(
        agent_id=args.agent,
        permissions=ALL_PERMISSIONS,
        role="operator",
        watched_symbols=runtime.market.symbols(),
    )
    raw = _read_call(args.call)
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
    runtime = _runtime(args)
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


COMMANDS = {
    "run": cmd_run,
    "chat": cmd_chat,
    "tool": cmd_tool,
    "tools": cmd_tools,
    "indicators": cmd_indicators,
    "backtest": cmd_backtest,
    "demo": cmd_demo,
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
    except KestrelError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_USAGE
