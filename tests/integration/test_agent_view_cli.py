"""See what an agent sees: ``kestrel tools [--template]``, ``kestrel prompt`` and ``kestrel tool``
with orchestration tools and ``--agent``, on a real workspace (in-process, real SQLite)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import etree

from tests.helpers.cli import run_main

CREATE = ("<create_new_agent_instance><agent_type_template>{template}</agent_type_template>"
          "<agent_name_label>{name}</agent_name_label><initial_config_json>{{}}"
          "</initial_config_json></create_new_agent_instance>")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run_main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _tools(section: str) -> set[str]:
    return set(re.findall(r"^#### `([a-z_]+)`", section, re.MULTILINE))


def test_tools_lists_the_orchestration_tools_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "tools", "--workspace", str(tmp_path))
    assert code == 0
    assert {"dispatch_task_to_agent", "create_new_agent_instance", "ask_user_clarification",
            "schedule_background_job", "create_order", "get_market_snapshot"} <= _tools(out)


def test_tools_of_a_template_are_the_section_its_agents_receive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = str(tmp_path)
    _, trader, _ = _run(capsys, "tools", "--workspace", ws, "--template", "TraderAgent_Default_v1")
    _, analyst, _ = _run(capsys, "tools", "--workspace", ws, "--template",
                         "AnalystAgent_Trend_v1")
    assert "create_order" in _tools(trader) and "create_new_agent_instance" not in _tools(trader)
    assert "dispatch_task_to_agent" in _tools(analyst) and "create_order" not in _tools(analyst)
    code, prompt, _ = _run(capsys, "prompt", "--workspace", ws, "AnalystAgent_Trend_v1")
    assert code == 0
    assert "Your agent id: `AGENT_ID`" in prompt and "template `AnalystAgent_Trend_v1`" in prompt
    assert analyst.strip() in prompt  # the whole section, as the prompt holds it


def test_prompt_of_an_agent_is_the_one_its_tasks_send(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = str(tmp_path)
    code, out, err = _run(capsys, "tool", "--workspace", ws, CREATE.format(
        template="TraderAgent_Default_v1", name="Desk trader"))
    assert code == 0, out + err
    agent_id = etree.fromstring(out.encode()).find(".//agent_instance_created").get("agent_id")
    code, by_id, _ = _run(capsys, "prompt", "--workspace", ws, agent_id)
    _, by_name, _ = _run(capsys, "prompt", "--workspace", ws, "Desk trader")
    assert code == 0 and by_id == by_name
    assert f"Your agent id: `{agent_id}`" in by_id and "Your name: Desk trader" in by_id

    from app.runtime.venue import VenueSpec
    from app.runtime.world import WorldOptions, build_world
    from app.workspace import Workspace

    world = build_world(Workspace.at(tmp_path), VenueSpec.replay(), WorldOptions())
    try:
        info = world.agents.manager.get_agent(agent_id)
        sent = world.agents.manager.profile_for(info).system_prompt
        assert by_id == (sent if sent.endswith("\n") else sent + "\n")
    finally:
        import asyncio

        asyncio.run(world.aclose())


def test_tool_runs_orchestration_tools_and_as_an_agent_with_its_permissions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = str(tmp_path)
    code, out, _ = _run(capsys, "tool", "--workspace", ws, "<list_agent_instances/>")
    assert code == 0 and "UNKNOWN_TOOL" not in out and "<status>success</status>" in out
    _run(capsys, "tool", "--workspace", ws, CREATE.format(template="TraderAgent_Default_v1",
                                                          name="T1"))
    _run(capsys, "tool", "--workspace", ws, CREATE.format(template="SystemOrchestrator_v1",
                                                          name="Boss"))
    code, out, _ = _run(capsys, "tool", "--workspace", ws, "--agent", "T1",
                        "<list_agent_instances/>")
    assert code == 1 and "PERMISSION_DENIED" in out
    code, out, _ = _run(capsys, "tool", "--workspace", ws, "--agent", "Boss",
                        "<list_agent_instances/>")
    assert code == 0 and 'count="2"' in out
    code, out, err = _run(capsys, "tool", "--workspace", ws, "--agent", "someone",
                          "<list_agent_instances/>")
    assert code == 0 and "no agent 'someone'" in err and "T1" in err


def test_an_unknown_template_is_named_with_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "prompt", "--workspace", str(tmp_path), "NoSuchTemplate")
    assert code == 2 and "TraderAgent_Default_v1" in err
    code, _, err = _run(capsys, "tools", "--workspace", str(tmp_path), "--template", "Nope")
    assert code == 2 and "AnalystAgent_Trend_v1" in err
