"""Make every secret Kestrel holds flow: a workspace whose Orchestrator is a scripted model server
and that notifies by e-mail and Telegram and calls an MCP server started with a secret.

Shared by the test that proves no secret reaches any output and the test of a machine without a
keyring (where the same paths must say which variable to set).
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.mcp.hub import attach_mcp
from app.secrets import SecretSource
from app.tools.registry import ToolRegistry
from app.workspace import Workspace
from tests.helpers.paths import REPO

HOSTILE_MCP = REPO / "tests" / "helpers" / "hostile_mcp_server.py"
ORCHESTRATOR = "SystemOrchestrator_v1"
OWNER = 4242  # the Telegram user allowed to command the bot (and notified)
SMTP_LOGIN = "kestrel"
MCP_ENTRY = "mcp.leaky.token"  # the keyring entry the MCP server's NEWS_TOKEN is read from
MCP_CALL = "<mcp_leaky__fetch_news><topic>bitcoin</topic></mcp_leaky__fetch_news>"


def kestrel(env: dict[str, str], *args: str | Path, stdin: bytes = b"",
            ) -> subprocess.CompletedProcess[bytes]:
    """``python -m app ARGS`` from the repository, as a person runs ``kestrel ARGS``."""
    return subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app", *map(str, args)], input=stdin, capture_output=True,
        timeout=300, cwd=REPO, env=env,
    )


def notify_call(text: str) -> str:
    """The model's ``send_notification`` to e-mail, Telegram and the window."""
    return ("<send_notification><channels><channel>EMAIL</channel><channel>TELEGRAM</channel>"
            "<channel>UI_ALERT</channel></channels><subject_text>Kestrel channel check"
            f"</subject_text><message_text>{text}</message_text></send_notification>")


def shown_results(body: dict[str, Any]) -> str:
    """The tool results a model was shown, as plain text: each tag replaced by its attribute
    values (a channel's status is an attribute), entities escaped for a free-text parameter."""
    results = [str(m["content"]) for m in body["messages"]
               if m["role"] == "user" and "<tool_result" in str(m["content"])]
    plain = re.sub(r"<[^>]*>", lambda tag: " " + " ".join(re.findall(r'"([^"]*)"', tag[0])) + " ",
                   " ".join(results))
    return html.escape(" ".join(html.unescape(plain).split()), quote=False)[:3500]


def model_step(body: dict[str, Any]) -> int:
    """How many answers the model gave before this request."""
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def desk_settings(folder: Path, *, llm_url: str, llm_key_name: str, telegram_url: str,
                  smtp_port: int) -> None:
    """settings.toml: the Orchestrator on the model server, Telegram on, e-mail with a login,
    and the leaky MCP server whose NEWS_TOKEN comes from the keyring entry ``MCP_ENTRY``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.toml").write_text(
        f'[llm]\nprovider = "openai-compatible"\nmodel = "gpt-test"\nbase_url = "{llm_url}"\n'
        f'api_key_name = "{llm_key_name}"\nmax_retries = 0\ntimeout_s = 20\n\n'
        f"[telegram]\nenabled = true\nallowed_user_ids = [{OWNER}]\n"
        f'api_base_url = "{telegram_url}"\n\n'
        f'[email]\nhost = "127.0.0.1"\nport = {smtp_port}\nsecurity = "none"\n'
        f'username = "{SMTP_LOGIN}"\nsender = "kestrel@example.org"\n'
        'recipients = ["me@example.org"]\ntimeout_s = 10\n\n'
        f"[mcp.servers.leaky]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(HOSTILE_MCP))}, "--mode", "leaky"]\n'
        f'secret_env = {{ NEWS_TOKEN = "{MCP_ENTRY}" }}\ntimeout_s = 20\n',
        encoding="utf-8")


def approve_leaky_tool(folder: Path, secrets: SecretSource, now_ms: int) -> str:
    """What a person does in Settings > MCP servers: list the server's tools, approve
    ``fetch_news`` as listed, enable it for the Orchestrator's template. Returns the approved
    description (what every prompt will show)."""
    workspace = Workspace.at(folder).ensure()

    async def approve() -> str:
        hub = attach_mcp(ToolRegistry(), workspace.settings().mcp, workspace.root, secrets,
                         lambda: now_ms)
        assert hub is not None
        try:
            listed = {t.name: t for t in await hub.inspect("leaky")}["fetch_news"]
            hub.approve(listed)
            hub.enable_for_template("leaky", "fetch_news", ORCHESTRATOR, True)
            return str(listed.definition["description"])
        finally:
            await hub.aclose()

    return asyncio.run(approve())
