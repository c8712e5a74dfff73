"""What an agent sees, from the shell: ``kestrel prompt NAME`` and ``kestrel tools --template``.

``kestrel prompt`` prints the whole system prompt an agent receives: an existing agent's (by id
or name) exactly as its next task will send it, or a new agent's of a template (its default
configuration, ``AGENT_ID`` standing for the id it would get). ``kestrel tools --template NAME``
prints the Available Tools section of that prompt. Both are built by the agents' own manager on
the workspace's world, orchestration and approved MCP tools included.

The world with agents holds the workspace for writing while it is built; when another process
holds it, the prompt is built in a temporary copy of the workspace's settings and templates
(what the prompt is made of), and a line on standard error says so.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.cli.common import EXIT_OK, EXIT_USAGE, add_market_options, workspace_of
from app.domain.agents import AgentInfo, AgentState
from app.domain.clock import parse_time
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions, build_world
from app.store.lock import WorkspaceBusyError
from app.workspace import Workspace

NEW_AGENT_ID = "AGENT_ID"


def add_prompt_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument("name", help="an agent template (e.g. AnalystAgent_Trend_v1), or the id "
                                     "or name of an agent of the workspace")
    add_market_options(parser)


def _agents_world(workspace: Workspace, args: argparse.Namespace) -> World:
    at_ms = parse_time(args.at) if getattr(args, "at", None) else None
    return build_world(workspace, VenueSpec.replay(getattr(args, "data", []), at_ms),
                       WorldOptions(announce=False))


@contextmanager
def agents_world(args: argparse.Namespace) -> Iterator[World]:
    """The workspace's world with its agents (not started); a temporary copy of its settings
    and templates when another process holds it."""
    workspace = workspace_of(args)
    try:
        world = _agents_world(workspace, args)
    except WorkspaceBusyError as busy:
        holder = busy.holder.describe() if busy.holder else "another process"
        print(f"kestrel: {holder} writes this workspace; showing what its settings and "
              "templates give (its agents' own settings are not read)", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="kestrel-view-") as folder:
            copy = Workspace.at(Path(folder)).ensure()
            if workspace.settings_path.is_file():
                shutil.copy2(workspace.settings_path, copy.settings_path)
            if (workspace.root / "agents").is_dir():
                shutil.copytree(workspace.root / "agents", copy.root / "agents")
            world = _agents_world(copy, args)
            try:
                yield world
            finally:
                asyncio.run(world.aclose())
        return
    try:
        yield world
    finally:
        asyncio.run(world.aclose())


def find_agent(world: World, name: str) -> AgentInfo | None:
    """An existing agent by id, or by name when exactly one has it."""
    assert world.agents is not None
    agents = world.agents.manager.list_agents()
    by_id = [a for a in agents if a.agent_id == name]
    if by_id:
        return by_id[0]
    by_name = [a for a in agents if a.name == name]
    return by_name[0] if len(by_name) == 1 else None


def template_agent(world: World, template_id: str) -> AgentInfo:
    """A new agent of the template as the manager would create it (default configuration).

    Raises:
        ValueError: no such template, naming the known ones.
    """
    from app.agents.templates import to_json_safe, validate_config

    assert world.agents is not None
    templates = world.agents.manager.templates
    template = templates.get(template_id)
    if template is None:
        raise ValueError(f"no agent template or agent named {template_id!r}; templates: "
                         f"{', '.join(sorted(templates))}")
    now = world.venue.clock.now_ms()
    return AgentInfo(
        agent_id=NEW_AGENT_ID, name=template.display_name or template_id,
        template=template_id, role=template.role, state=AgentState.CREATED,
        config=to_json_safe(validate_config(template, {})), provider="rule-engine",
        model=template.provider.model, created_ms=now, updated_ms=now,
    )


def system_prompt(world: World, name: str) -> str:
    """The system prompt of the agent ``name`` (id or name), or of a new agent of template
    ``name``; the provider never matters to the prompt, so none is built."""
    from dataclasses import replace

    assert world.agents is not None
    info = find_agent(world, name) or template_agent(world, name)
    return world.agents.manager.profile_for(replace(info, provider="rule-engine")).system_prompt


def tools_section(world: World, name: str) -> str:
    """The Available Tools section of ``name``'s prompt (template or agent)."""
    from app.agents.templates import permissions_of

    assert world.agents is not None
    info = find_agent(world, name) or template_agent(world, name)
    template = world.agents.manager.templates[info.template]
    permissions = permissions_of(template)
    if world.agents.mcp is not None:
        permissions |= world.agents.mcp.grants(info.agent_id, info.template)
    return world.registry.available_tools_section(permissions) or "(none)"


def cmd_prompt(args: argparse.Namespace) -> int:
    try:
        with agents_world(args) as world:
            prompt = system_prompt(world, args.name)
            sys.stdout.write(prompt if prompt.endswith("\n") else prompt + "\n")  # exactly it
    except ValueError as exc:
        print(f"kestrel: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
