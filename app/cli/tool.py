"""``kestrel tool``, ``kestrel tools`` and ``kestrel indicators``: the toolset from the shell.

``kestrel tool '<get_order_book>…</get_order_book>'`` prints the ``<tool_result>`` exactly as an
agent would receive it, so a person or a script can test the toolset without the GUI. The call
runs in the workspace's world (``build_world`` without agents) on the offline replay.

A workspace has one writer. When another process holds it, ``kestrel tool`` still answers a
market, indicator or account tool, read-only: from the account as the holder last committed it,
without settling it or recording the call; any other tool exits with ``EXIT_WORKSPACE_BUSY``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from app.cli.common import EXIT_OK, EXIT_TOOL_FAILED, EXIT_USAGE, log_to, workspace_of
from app.domain.clock import ms_to_iso, parse_time
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions, build_world
from app.store.lock import WorkspaceBusyError
from app.tools.spec import ALL_PERMISSIONS, AgentContext, Permission

# tools that only read: they may run on a workspace another process writes. Memory tools are not
# among them: reading memory catches the agent's recall index up with the files (a write).
READ_ONLY_PERMISSIONS = frozenset({Permission.MARKET, Permission.INDICATOR, Permission.ACCOUNT})


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


def add_tool_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("call", help="the XML tool call, or - to read it from standard input")
    parser.add_argument("--agent", default="operator", help="agent id to run the call as")
    add_market_options(parser)


def _world(args: argparse.Namespace, *, read_only: bool = False) -> World:
    at_ms = parse_time(args.at) if args.at else None
    workspace = workspace_of(args)
    world = build_world(
        workspace, VenueSpec.replay(args.data, at_ms),
        WorldOptions(agents=False, read_only=read_only, announce=False),
    )
    if not read_only:  # the log file is the writer's, as the workspace is
        log_to(workspace)
    return world


def _read_call(text: str) -> bytes:
    if text == "-":
        return sys.stdin.buffer.read()
    return text.encode("utf-8", errors="surrogateescape")


def cmd_tool(args: argparse.Namespace) -> int:
    raw = _read_call(args.call)
    try:
        world = _world(args)
    except WorkspaceBusyError as busy:
        world = _world(args, read_only=True)
        try:
            return _run_read_only(world, args, raw, busy)
        finally:
            world.close()
    try:
        return _run_tool(world, args, raw)
    finally:
        world.close()


def _run_read_only(
    world: World, args: argparse.Namespace, raw: bytes, busy: WorkspaceBusyError
) -> int:
    """Run a call that only reads; refuse any other while the workspace is held elsewhere."""
    parsed = world.executor.parse(raw)
    spec = world.registry.get(parsed.call.name) if parsed.call is not None else None
    if spec is not None and spec.permission not in READ_ONLY_PERMISSIONS:
        raise WorkspaceBusyError(
            busy.root, busy.holder,
            f" ({spec.name} writes; market, indicator and account tools can still be called)",
        ) from None
    settled = world.venue.broker.settled_ms
    print(
        f"kestrel: read-only: {busy.holder.describe() if busy.holder else 'another process'} "
        f"writes this workspace; the account is as it last committed it (settled to "
        f"{ms_to_iso(settled) if settled >= 0 else 'never'}) and this call is not recorded",
        file=sys.stderr,
    )
    return _run_tool(world, args, raw)


def _run_tool(world: World, args: argparse.Namespace, raw: bytes) -> int:
    ctx = AgentContext(
        agent_id=args.agent,
        permissions=ALL_PERMISSIONS,
        role="operator",
        watched_symbols=world.venue.market.symbols(),
    )
    parsed = world.executor.parse(raw)
    if parsed.is_text:
        print(
            "kestrel: that is not a tool call. Give XML such as "
            "'<get_order_book><symbol>BTC/USD</symbol></get_order_book>'.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    result = asyncio.run(world.executor.execute_parsed(ctx, parsed))
    print(result.xml)
    return EXIT_OK if result.ok else EXIT_TOOL_FAILED


def cmd_tools(args: argparse.Namespace) -> int:
    try:
        world = _world(args)
    except WorkspaceBusyError:
        world = _world(args, read_only=True)  # the section only describes the tools
    try:
        print(world.registry.available_tools_section(ALL_PERMISSIONS))
    finally:
        world.close()
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


