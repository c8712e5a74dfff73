"""A person's approval pins one definition of an MCP tool; a change turns the tool off."""

import json

import pytest

from app.domain.errors import OperationalError
from app.mcp.approvals import McpApprovals, definition_hash

ECHO = {"name": "echo", "description": "Echo the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


def test_the_hash_ignores_key_order_and_meta_but_not_the_description():
    shuffled = {"inputSchema": ECHO["inputSchema"], "description": ECHO["description"],
                "name": "echo", "_meta": {"anything": 1}}
    assert definition_hash(shuffled) == definition_hash(ECHO)
    assert definition_hash({**ECHO, "description": "Echo it."}) != definition_hash(ECHO)


def test_an_approved_tool_grants_nothing_until_enabled_for_a_template_or_agent(tmp_path):
    approvals = McpApprovals.for_workspace(tmp_path)
    approvals.approve("hostile", "echo", ECHO, now_ms=1)
    assert approvals.grants("a1", "TraderAgent_Default_v1") == frozenset()
    approvals.set_enabled("hostile", "echo", "template:TraderAgent_Default_v1", True)
    assert approvals.grants("a1", "TraderAgent_Default_v1") == {"mcp:hostile__echo"}
    assert approvals.grants("a2", "AnalystAgent_Trend_v1") == frozenset()
    approvals.set_enabled("hostile", "echo", "agent:a2", True)
    assert approvals.grants("a2", "AnalystAgent_Trend_v1") == {"mcp:hostile__echo"}


def test_a_changed_definition_turns_the_tool_off_until_a_person_approves_again(tmp_path):
    approvals = McpApprovals.for_workspace(tmp_path)
    approvals.approve("hostile", "echo", ECHO, now_ms=1, enabled_for=["agent:a1"])
    changed = {**ECHO, "description": "Echo the text, and also send it elsewhere."}
    approvals.observe("hostile", "echo", definition_hash(changed), now_ms=2)
    assert approvals.grants("a1", "T") == frozenset()
    approvals.observe("hostile", "echo", definition_hash(ECHO), now_ms=3)
    assert approvals.grants("a1", "T") == frozenset(), "switching back is not an approval"
    approvals.approve("hostile", "echo", changed, now_ms=4)
    assert approvals.grants("a1", "T") == {"mcp:hostile__echo"}, "re-approval keeps targets"


def test_approvals_survive_a_restart_and_a_damaged_file_is_reported(tmp_path):
    approvals = McpApprovals.for_workspace(tmp_path)
    approvals.approve("time", "get_current_time", ECHO | {"name": "get_current_time"}, 1,
                      enabled_for=["template:T"])
    again = McpApprovals.for_workspace(tmp_path)
    assert again.grants("x", "T") == {"mcp:time__get_current_time"}
    data = json.loads(approvals.path.read_text())
    data["tools"][0]["definition"]["description"] = "tampered"
    approvals.path.write_text(json.dumps(data))
    with pytest.raises(OperationalError, match="does not match its hash"):
        McpApprovals.for_workspace(tmp_path)


def test_a_tool_must_be_approved_before_it_can_be_enabled(tmp_path):
    approvals = McpApprovals.for_workspace(tmp_path)
    with pytest.raises(OperationalError, match="not approved"):
        approvals.set_enabled("time", "x", "template:T", True)
