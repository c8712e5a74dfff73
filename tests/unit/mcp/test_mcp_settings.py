"""``[mcp.servers.<name>]`` settings: one transport, safe names, no secrets in the file."""

import pytest

from app.config import settings_from_mapping
from app.domain.errors import OperationalError


def _servers(servers):
    return settings_from_mapping({"mcp": {"servers": servers}}).mcp


def test_a_command_server_and_a_url_server_are_read_with_defaults():
    mcp = _servers({"time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
                    "news": {"url": "http://127.0.0.1:8000/mcp", "enabled": False}})
    assert mcp.servers["time"].timeout_s == 20 and mcp.servers["time"].max_result_chars == 20000
    assert list(mcp.active()) == ["time"]


@pytest.mark.parametrize(("servers", "reason"), [
    ({"time": {}}, "either command"),
    ({"time": {"command": "x", "url": "http://h/mcp"}}, "either command"),
    ({"Time": {"command": "x"}}, "pattern"),
    ({"a__b": {"command": "x"}}, "pattern"),
    ({"t": {"command": "x", "env": {"NEWS_API_TOKEN": "abc"}}}, "looks like a secret"),
    ({"t": {"command": "x", "secret_env": {"TOKEN": "sk-" + "x" * 40}}}, "keyring entry"),
    ({"t": {"command": "x", "colour": "red"}}, "unknown key 'mcp.servers.t.colour'"),
    ({"t": {"url": "http://h/mcp", "args": ["x"]}}, "apply to a command"),
])
def test_bad_server_settings_are_refused_naming_the_problem(servers, reason):
    with pytest.raises(OperationalError, match=reason):
        _servers(servers)


def test_the_message_limit_leaves_room_above_the_result_cap_and_grows_with_it():
    small = _servers({"t": {"command": "x", "max_result_chars": 5000}}).servers["t"]
    assert small.max_message_bytes == 8 * 1024 * 1024, "a result far over its cap is still read"
    large = _servers({"t": {"command": "x", "max_result_chars": 1_000_000}}).servers["t"]
    assert large.max_message_bytes >= 12 * 1_000_000, "every capped char in its longest spelling"
