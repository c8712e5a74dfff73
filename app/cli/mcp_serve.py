"""The ``kestrel mcp-serve`` command: build the workspace's tools and serve them over stdio.

Standard output is the MCP wire, so this command writes nothing else there: problems go to
standard error (and the workspace log). The workspace is held for writing while serving (orders,
the audit trail and memory are written), so the window and ``kestrel run`` cannot use it at the
same time; a held workspace exits with 75 as every writing command does.
"""

from __future__ import annotations

import argparse
import logging
import re
from decimal import Decimal
from pathlib import Path

from app.domain.clock import parse_time
from app.workspace import Workspace

logger = logging.getLogger(__name__)

_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def add_mcp_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, metavar="DIR",
                        help="workspace folder; default: this checkout or the user data folder")
    parser.add_argument("--agent", default="mcp-client", metavar="ID",
                        help="the agent id the calls run as: the audit trail names it and the "
                             "memory tools use its folder (default: mcp-client)")
    parser.add_argument("--data", action="append", type=Path, default=[], metavar="FILE",
                        help="kline CSV to replay (repeatable); default: the bundled sample data")
    parser.add_argument("--at", metavar="TIME",
                        help="put the replay cursor at this time; default: the end of the data")


def mcp_serve_command(args: argparse.Namespace) -> int:
    """Serve until the client disconnects; 0 then.

    Raises:
        ValueError: a malformed agent id.
        WorkspaceBusyError, KestrelError: as the other writing commands (main reports them).
    """
    if not _AGENT_ID.match(args.agent):
        raise ValueError(
            f"--agent {args.agent!r} is not a usable agent id (letters, digits, _ . -, at most 64)"
        )
    from app.cli.common import log_to
    from app.mcp.order_gate import OrderGate
    from app.mcp.serve import SERVED_PERMISSIONS, build_server, gated_registry, run
    from app.runtime.recorders import SqliteToolCallRecorder
    from app.runtime.venue import VenueSpec
    from app.runtime.world import WorldOptions, build_world
    from app.tools.executor import ToolExecutor
    from app.tools.spec import AgentContext

    workspace = Workspace.at(args.workspace).ensure() if args.workspace else Workspace.default()
    at_ms = parse_time(args.at) if args.at else None
    world = build_world(workspace, VenueSpec.replay(args.data, at_ms),
                        WorldOptions(agents=False, announce=False))
    log_to(workspace)  # standard output is the MCP wire: problems go to stderr and this file
    try:
        settings = world.settings
        broker = world.venue.broker

        async def last_price(symbol: str) -> Decimal | None:
            try:
                return await broker.last_price(broker.canonical_symbol(symbol))
            except Exception:  # noqa: BLE001 - an unknown symbol: the order tool will say so
                return None

        def halted() -> str | None:  # the workspace's kill switch (tripped in the window)
            trip = world.kill_log.active() if world.kill_log is not None else None
            return None if trip is None else trip.halt_reason()

        gate = OrderGate(settings.approval, broker.mode, last_price, world.ledger.traded_symbols,
                         halted)
        executor = ToolExecutor(
            gated_registry(world.registry, gate),
            SqliteToolCallRecorder(world.ledger),  # the workspace's audit trail
            world.venue.clock,
            default_timeout_s=settings.tools.default_timeout_s,
        )
        ctx = AgentContext(
            agent_id=args.agent, permissions=frozenset(SERVED_PERMISSIONS), role="external",
            watched_symbols=world.venue.market.symbols(),
            interval=settings.market.default_interval,
        )
        logger.info("serving %d tools over MCP as agent %s", len(executor.registry), args.agent)
        run(build_server(executor, ctx))
    finally:
        world.close()
    return 0
