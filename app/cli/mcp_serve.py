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
from pathlib import Path

from app.domain.clock import parse_time
from app.domain.errors import OperationalError
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
    from app.mcp.serve import SERVED_PERMISSIONS, build_server, run, served_registry
    from app.runtime.recorders import SqliteToolCallRecorder
    from app.runtime.venue import VenueSpec
    from app.runtime.workspace_venue import recorded_venue
    from app.runtime.world import WorldOptions, build_world
    from app.tools.executor import ToolExecutor
    from app.tools.spec import AgentContext

    workspace = Workspace.at(args.workspace).ensure() if args.workspace else Workspace.default()
    recorded = recorded_venue(workspace)
    if recorded is not None:  # it serves the offline replay only: never a paper ledger instead
        account = ("your LIVE account on" if recorded.kind == "live"
                   else "paper on the live quotes of")
        raise OperationalError(
            f"kestrel mcp-serve serves the offline replay, and this workspace trades "
            f"{account} {recorded.exchange} ({recorded.why}): an external agent would act on a "
            "paper ledger instead. Serve another workspace (--workspace DIR).")
    at_ms = parse_time(args.at) if args.at else None
    world = build_world(workspace, VenueSpec.replay(args.data, at_ms),
                        WorldOptions(agents=False, announce=False))
    log_to(workspace)  # standard output is the MCP wire: problems go to stderr and this file
    try:
        settings = world.settings
        executor = ToolExecutor(
            served_registry(world.registry),
            SqliteToolCallRecorder(world.ledger),  # the workspace's audit trail
            world.venue.clock,
            default_timeout_s=settings.tools.default_timeout_s,
        )
        # orders take the one order path (approval policy, kill switch, Risk Guard); what the
        # approval policy holds is refused with its reason: nobody can be asked from here
        ctx = AgentContext(
            agent_id=args.agent, permissions=frozenset(SERVED_PERMISSIONS), role="external",
            watched_symbols=world.venue.market.symbols(),
            interval=settings.market.default_interval, can_ask=False,
        )
        logger.info("serving %d tools over MCP as agent %s", len(executor.registry), args.agent)
        run(build_server(executor, ctx))
    finally:
        world.close()
    return 0
