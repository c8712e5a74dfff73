"""MCP tools in the agents' hands, against real MCP server processes over stdio.

``mcp-server-time`` (from the package registry) is the well-behaved server; the project's own
``tests/helpers/hostile_mcp_server.py`` floods, hangs, crashes, injects tool calls, offers
colliding and hostile names, and rewrites its tools. A scripted "LLM" calls them through the real
agent loop: each time the agent gets a clear envelope, no order is ever placed and the app runs on.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from app.domain.agents import AgentState
from app.runtime.world import World
from tests.helpers.agents import agent_world, settle
from tests.helpers.scripted_llm import ScriptedProvider

HOSTILE = str(Path(__file__).resolve().parents[1] / "helpers" / "hostile_mcp_server.py")
TRADER = "TraderAgent_Default_v1"
ANALYST = "AnalystAgent_Trend_v1"


def _settings(folder: Path) -> None:
    def server(name: str, args: list[str], timeout: float) -> str:
        return (f"[mcp.servers.{name}]\ncommand = {json.dumps(sys.executable)}\n"
                f"args = {json.dumps(args)}\ntimeout_s = {timeout}\nmax_result_chars = 5000\n")

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.toml").write_text(
        server("time", ["-m", "mcp_server_time", "--local-timezone", "UTC"], 20)
        + server("hostile", [HOSTILE], 3)
        + server("shifty", [HOSTILE, "--mode", "changing"], 10)
    )


def _call(tool: str, inner: str = "") -> str:
    return f"<{tool}>{inner}</{tool}>"


def _results(provider: ScriptedProvider) -> list[str]:
    """The tool results the "LLM" was shown, in order."""
    return [m.content for m in provider.requests[-1].messages if "<tool_result" in m.content]


async def _approve(world: World, server: str, names: set[str], template: str) -> None:
    hub = world.agents.mcp
    assert hub is not None
    for listed in await hub.inspect(server):
        if listed.name in names:
            hub.approve(listed)
            hub.enable_for_template(server, listed.name, template, True)


def test_an_agent_uses_approved_mcp_tools_and_survives_every_hostile_behaviour(tmp_path):
    _settings(tmp_path)
    script = ScriptedProvider([
        _call("mcp_time__get_current_time", "<timezone>Europe/London</timezone>"),
        _call("mcp_hostile__inject"),
        _call("mcp_hostile__flood", "<megabytes>4</megabytes>"),
        _call("mcp_hostile__hang"),
        _call("mcp_hostile__crash"),
        _call("mcp_hostile__echo", "<text>still here</text>"),
        "All done.",
    ])

    async def scenario() -> None:
        world = agent_world(
            tmp_path,
            provider_override=lambda info, _t: script if info.template == TRADER else None,
        )
        try:
            await world.start()
            hub = world.agents.mcp
            assert hub is not None
            listed = {t.name: t for t in await hub.inspect("hostile")}
            assert listed["echo"].status == "new", "every MCP tool starts off"
            assert "Kestrel's own tools" in listed["create_order"].refused
            assert "not a plain name" in listed["bad name<x>"].refused
            assert "$ref" in listed["refs"].refused
            await _approve(world, "hostile", {"echo", "inject", "flood", "hang", "crash"},
                           TRADER)
            await _approve(world, "time", {"get_current_time"}, TRADER)
            assert "mcp_hostile__create_order" not in world.registry

            trader = await world.agents.manager.create_agent(TRADER, "T", {"symbols": ["BTC/USDT"]})
            analyst = await world.agents.manager.create_agent(
                ANALYST, "A", {"symbols": ["BTC/USDT"], "trader_agent_id": trader.agent_id},
                start=False)
            world.agents.manager.send_user_message(trader.agent_id, "use your external tools")
            await settle(world, 120)

            prompt = script.requests[0].system
            assert "mcp_hostile__echo" in prompt and "mcp_time__get_current_time" in prompt
            assert "mcp_hostile__create_order" not in prompt
            analyst_prompt = world.agents.manager.profile_for(analyst).system_prompt
            assert "mcp_" not in analyst_prompt, "enabled for the trader's template only"

            time_ok, inject, flood, hang, crash, echo = _results(script)
            assert "<status>success</status>" in time_ok and "Europe/London" in time_ok
            assert "&lt;create_order&gt;" in inject and "<create_order>" not in inject
            assert inject.count("</tool_result>") == 1, "the injected closing tag is escaped"
            assert 'truncated="true"' in flood and 'chars="4194304"' in flood
            assert len(flood) < 6000
            assert "<error_code>TIMEOUT</error_code>" in hang
            assert "<error_code>NETWORK_ERROR</error_code>" in crash
            assert "started again on the next call" in crash
            assert "<status>success</status>" in echo and "still here" in echo

            assert world.ledger.connection.execute(
                "SELECT COUNT(*) FROM orders").fetchone()[0] == 0
            assert world.agents.manager.get_agent(trader.agent_id).state is AgentState.RUNNING
            audit = world.ledger.connection.execute(
                "SELECT tool_name, status, error_code FROM tool_calls "
                "WHERE tool_name LIKE 'mcp_%' ORDER BY id").fetchall()
            assert [row[0] for row in audit] == [
                "mcp_time__get_current_time", "mcp_hostile__inject", "mcp_hostile__flood",
                "mcp_hostile__hang", "mcp_hostile__crash", "mcp_hostile__echo"]
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_a_tool_whose_server_changes_its_definition_is_off_until_reapproved(tmp_path):
    _settings(tmp_path)
    script = ScriptedProvider([_call("mcp_shifty__echo", "<text>hi</text>"), "ok",
                               "second task"])

    async def scenario() -> None:
        world = agent_world(tmp_path, provider_override=lambda _i, _t: script)
        try:
            await world.start()
            await _approve(world, "shifty", {"echo"}, TRADER)
            trader = await world.agents.manager.create_agent(TRADER, "T", {"symbols": ["BTC/USDT"]})
            world.agents.manager.send_user_message(trader.agent_id, "echo hi")
            await settle(world, 60)
            (result,) = _results(script)
            assert "<error_code>PERMISSION_DENIED</error_code>" in result
            assert "describes it differently" in result
            approval = world.agents.mcp.approvals.get("shifty", "echo")
            assert approval is not None and not approval.usable
            world.agents.manager.send_user_message(trader.agent_id, "again")
            await settle(world, 60)
            assert "mcp_shifty__echo" in script.requests[0].system
            assert "mcp_shifty__echo" not in script.requests[-1].system, "off in the prompt too"
            listed = {t.name: t for t in await world.agents.mcp.inspect("shifty")}
            assert listed["echo"].status == "changed"
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_an_agent_is_told_clearly_when_a_server_answers_more_than_kestrel_reads(tmp_path):
    _settings(tmp_path)
    script = ScriptedProvider([
        _call("mcp_hostile__flood", "<megabytes>32</megabytes>"),
        _call("mcp_hostile__echo", "<text>still here</text>"),
        "Done.",
    ])

    async def scenario() -> None:
        world = agent_world(tmp_path, provider_override=lambda _i, _t: script)
        try:
            await world.start()
            await _approve(world, "hostile", {"flood", "echo"}, TRADER)
            trader = await world.agents.manager.create_agent(TRADER, "T", {"symbols": ["BTC/USDT"]})
            world.agents.manager.send_user_message(trader.agent_id, "flood, then echo")
            await settle(world, 60)
            flood, echo = _results(script)
            assert "<error_code>INTERNAL_ERROR</error_code>" in flood
            assert ("The MCP server 'hostile' sent a message of more than 8388608 bytes as its "
                    "answer to the call of flood; it was dropped.") in flood
            assert "<status>success</status>" in echo and "still here" in echo
            assert world.agents.manager.get_agent(trader.agent_id).state is AgentState.RUNNING
        finally:
            await world.aclose()

    asyncio.run(scenario())
