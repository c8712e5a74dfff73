"""``kestrel tool``, ``kestrel tools`` and ``kestrel indicators``: the toolset from the shell.

``kestrel tool '<get_order_book>…</get_order_book>'`` prints the ``<tool_result>`` exactly as an
agent would receive it, so a person or a script can test the toolset without the GUI. The call
runs in the workspace's world (``build_world`` without agents) on the offline replay; an
orchestration or MCP tool, or a call ``--agent ID`` makes as an agent of the workspace (with that
agent's permissions), runs in the world with its agents (not started).

A workspace has one writer. When another process holds it, ``kestrel tool`` still answers a
market, indicator or account tool, read-only: from the account as the holder last committed it,
without settling it or recording the call; any other tool exits with ``EXIT_WORKSPACE_BUSY``.

``--venue live --exchange ID --confirm-live ID`` (``kestrel run``'s flags and confirmation) runs
the call on the exchange account, in the live world with its agents (not started): the order
journal, reconciliation before the call (unknown exchange orders decided by ``--adopt-unknown``
or ``--ignore-unknown``; balances the journal cannot explain trip the kill switch), the Risk
Guard. The operator's calls are the person's there (agent id ``person``: the person confirmed
the exchange); an agent's need its live grant. ``--venue live-paper`` runs it on the paper
account on the exchange's live quotes. Without ``--venue`` the workspace's ``[venue]`` setting
decides, and a workspace whose records show it trading elsewhere (its order journal, its paper
account's venue) is refused with the command to use: a call never lands on another account
than the person's without saying so. Messages about the venue go to standard error; standard
output stays the ``<tool_result>``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace

from app.cli.common import (
    EXIT_OK,
    EXIT_TOOL_FAILED,
    EXIT_USAGE,
    add_market_options,
    log_to,
    workspace_of,
)
from app.cli.live import (
    add_live_arguments,
    add_venue_arguments,
    chosen_venue,
    live_banner,
    settle_mismatch,
    unknown_decision,
)
from app.domain.clock import ms_to_iso, parse_time
from app.runtime.open_world import open_world
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions, build_world
from app.store.lock import WorkspaceBusyError
from app.tools.spec import ALL_PERMISSIONS, AgentContext, Permission
from app.trading.live_account import PERSON
from app.workspace import Workspace

# tools that only read: they may run on a workspace another process writes. Memory tools are not
# among them: reading memory catches the agent's recall index up with the files (a write).
OPERATOR = "operator"
READ_ONLY_PERMISSIONS = frozenset({Permission.MARKET, Permission.INDICATOR, Permission.ACCOUNT})


def add_tool_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("call", help="the XML tool call, or - to read it from standard input")
    parser.add_argument("--agent", default=OPERATOR,
                        help="run the call as this agent of the workspace (id or name: its "
                             "permissions, role and symbols); default: the operator, with "
                             "every tool, orchestration tools included")
    add_market_options(parser)
    add_venue_arguments(parser)
    add_live_arguments(parser, grants=False)


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
    workspace = workspace_of(args)
    live = chosen_venue(args, workspace)
    if live is not None:
        if args.at or args.data:
            raise ValueError(f"--at and --data are for the replay; {live.kind} runs on the "
                             "exchange's market as it is now")
        return asyncio.run(_run_live(args, workspace, live, raw))
    try:
        world = _world(args)
    except WorkspaceBusyError as busy:
        world = _world(args, read_only=True)
        try:
            return _run_read_only(world, args, raw, busy)
        finally:
            world.close()
    try:
        if args.agent == OPERATOR and _known(world, raw):
            return _run_tool(world, args, raw)
    finally:
        world.close()
    return _run_as_agent(args, raw)


async def _run_live(
    args: argparse.Namespace, workspace: Workspace, spec: VenueSpec, raw: bytes
) -> int:
    """Run the call on a live market (``spec``): on the live world, with its agents (not
    started) so that its kill switch trips on what reconciliation cannot explain."""
    world = await open_world(workspace, spec, WorldOptions())
    log_to(workspace)
    try:
        account = world.venue.is_live_account
        await world.prepare(unknown_decision(args) if account else None)
        if account:
            for line in await settle_mismatch(world, args):
                print(line, file=sys.stderr)
            print(live_banner(world), file=sys.stderr)
        assert world.agents is not None
        trip = world.agents.kill_switch.active()
        if trip is not None:
            print(f"kestrel: the kill switch is tripped (it was {trip.describe()}): the Risk "
                  "Guard refuses every new order; closing and cancelling still work.",
                  file=sys.stderr)
        if args.agent == OPERATOR:
            ctx = _operator(world, PERSON if account else OPERATOR)
        else:
            ctx = _agent_context(world, args.agent)
        return await _execute_async(world, ctx, raw)
    finally:
        await world.aclose()


def _known(world: World, raw: bytes) -> bool:
    """The call names a tool of the world without agents (else: an orchestration or MCP tool,
    or a name only the agents' world can refuse in the agents' words)."""
    parsed = world.executor.parse(raw)
    name = parsed.call.name if parsed.call is not None else parsed.tool_name
    return not name or world.registry.get(name) is not None


def _run_as_agent(args: argparse.Namespace, raw: bytes) -> int:
    """Run the call in the world with agents: as the agent ``--agent`` names (its permissions,
    role and symbols), or with every tool, orchestration tools included, under the operator's
    name or an id that names no agent (said on standard error)."""
    from app.cli.agent_view import agents_world

    with agents_world(args) as world:
        if args.agent == OPERATOR:
            return _run_tool(world, args, raw)
        return _execute(world, _agent_context(world, args.agent), raw)


def _agent_context(world: World, name: str) -> AgentContext:
    """The agent ``name`` (id or name) of the world: its permissions, role and symbols; an id
    that names no agent gets the operator's tools under it (said on standard error)."""
    from app.cli.agent_view import find_agent

    assert world.agents is not None
    info = find_agent(world, name)
    if info is None:  # an id of the person's choosing: the operator's tools under it
        agents = world.agents.manager.list_agents()
        known = ", ".join(f"{a.agent_id} ({a.name})" for a in agents)
        print(f"kestrel: no agent {name!r} in this workspace (its agents: "
              f"{known or 'none'}); the call runs as {name!r} with every tool",
              file=sys.stderr)
        return _operator(world, name)
    profile = world.agents.manager.profile_for(replace(info, provider="rule-engine"))
    symbols = info.config.get("symbols") or ()
    # the person typed this call at the terminal: it is theirs to approve, so order entry's
    # approval policy (which asks the person) has its answer already
    return AgentContext(
        agent_id=info.agent_id, permissions=profile.permissions, role=info.role.value,
        watched_symbols=tuple(str(s) for s in symbols),
        interval=str(info.config.get("interval", "1h")), approved=True,
    )


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
    # a read-only world is a replay's, whose paper broker keeps it; the port does not name it
    settled = world.venue.broker.settled_ms  # type: ignore[attr-defined]
    print(
        f"kestrel: read-only: {busy.holder.describe() if busy.holder else 'another process'} "
        f"writes this workspace; the account is as it last committed it (settled to "
        f"{ms_to_iso(settled) if settled >= 0 else 'never'}) and this call is not recorded",
        file=sys.stderr,
    )
    return _run_tool(world, args, raw)


def _run_tool(world: World, args: argparse.Namespace, raw: bytes) -> int:
    return _execute(world, _operator(world, args.agent), raw)


def _operator(world: World, agent_id: str) -> AgentContext:
    """Every tool, under ``agent_id``."""
    return AgentContext(
        agent_id=agent_id,
        permissions=ALL_PERMISSIONS,
        role="operator",
        watched_symbols=world.venue.market.symbols(),
        approved=True,  # typed by the person at the terminal, as above
    )


def _execute(world: World, ctx: AgentContext, raw: bytes) -> int:
    return asyncio.run(_execute_async(world, ctx, raw))


async def _execute_async(world: World, ctx: AgentContext, raw: bytes) -> int:
    parsed = world.executor.parse(raw)
    if parsed.is_text:
        print(
            "kestrel: that is not a tool call. Give XML such as "
            "'<get_order_book><symbol>BTC/USD</symbol></get_order_book>'.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    result = await world.executor.execute_parsed(ctx, parsed)
    print(result.xml)
    return EXIT_OK if result.ok else EXIT_TOOL_FAILED


def cmd_tools(args: argparse.Namespace) -> int:
    """Every tool (orchestration and approved MCP tools included), or the section an agent of
    ``--template`` (or the agent ``--template`` names) receives in its prompt."""
    from app.cli.agent_view import agents_world, tools_section

    try:
        with agents_world(args) as world:
            if args.template:
                print(tools_section(world, args.template))
            else:
                print(world.registry.available_tools_section(ALL_PERMISSIONS))
    except ValueError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_USAGE
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


