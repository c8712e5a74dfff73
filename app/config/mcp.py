"""Settings of the MCP servers whose tools Kestrel's agents may use: ``[mcp.servers.<name>]``.

A server is either a command Kestrel starts and talks to over stdio, or a streamable HTTP URL.
Values that are secrets (an API token a server reads from its environment) never sit in the
settings file: ``secret_env`` names the keyring entry each such variable is read from when the
server starts, and an ``env`` entry whose name looks like a secret is refused with that advice.

Example::

    [mcp.servers.time]
    command = "mcp-server-time"
    args = ["--local-timezone", "UTC"]
    timeout_s = 10

    [mcp.servers.news]
    url = "http://127.0.0.1:8765/mcp"
    max_result_chars = 8000
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

# letters, digits and single underscores: the tool name ``mcp_<server>__<tool>`` must split back
# into server and tool unambiguously, so a server name never holds two underscores in a row
SERVER_NAME_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
SERVER_NAME_MAX = 32
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
MIN_MESSAGE_BYTES = 8 * 1024 * 1024
BYTES_PER_RESULT_CHAR = 12  # the longest JSON spelling of one character: two \uXXXX escapes
MESSAGE_ENVELOPE_BYTES = 64 * 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

ServerName = Annotated[
    str, StringConstraints(pattern=SERVER_NAME_PATTERN, max_length=SERVER_NAME_MAX)
]


class McpServerSettings(BaseModel):
    """One MCP server: how to reach it and how much of its time and output an agent may use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | None = Field(
        default=None, min_length=1, max_length=500,
        description="Program to start (stdio transport), e.g. mcp-server-time or a full path.",
    )
    args: tuple[str, ...] = Field(default=(), description="Arguments of the command.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment variables of the command (not secrets: see secret_env).",
    )
    secret_env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables read from the keyring when the server starts: "
        "variable name -> keyring entry name.",
    )
    url: str | None = Field(
        default=None, pattern=r"^https?://\S+$", max_length=500,
        description="Streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp.",
    )
    timeout_s: float = Field(
        default=20.0, gt=0, le=300, description="Longest a call (or the start) may take."
    )
    max_result_chars: int = Field(
        default=20_000, ge=200, le=1_000_000,
        description="A result longer than this is cut (and marked truncated).",
    )
    enabled: bool = Field(default=True, description="Off: its tools are not offered at all.")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a program started over stdio) or url, not "
                             "both and not neither")
        if self.url is not None and (self.args or self.env or self.secret_env):
            raise ValueError("args, env and secret_env apply to a command, not to a url")
        for name, value in self.env.items():
            if not _ENV_NAME.match(name):
                raise ValueError(f"env: {name!r} is not an environment variable name")
            if _SECRET_NAME.search(name):
                raise ValueError(
                    f"env: {name!r} looks like a secret; keep its value in the keyring and "
                    f"write secret_env = {{ {name} = \"<keyring entry name>\" }} instead"
                )
            if "\x00" in value:
                raise ValueError(f"env: the value of {name!r} holds a NUL character")
        for name, entry in self.secret_env.items():
            if not _ENV_NAME.match(name):
                raise ValueError(f"secret_env: {name!r} is not an environment variable name")
            if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,100}", entry) or len(entry) >= 40:
                raise ValueError(
                    f"secret_env: {name!r} must name a keyring entry (e.g. mcp.news.token), "
                    "not hold the secret itself"
                )
        return self

    @property
    def max_message_bytes(self) -> int:
        """The longest message Kestrel reads from a stdio server; a longer one is dropped.

        A result longer than ``max_result_chars`` is still read, then cut (and its full length
        shown), so the limit leaves room: at least 8 MiB (hundreds of times the default cap),
        and always room for ``max_result_chars`` characters in their longest JSON spelling.
        """
        return max(MIN_MESSAGE_BYTES,
                   BYTES_PER_RESULT_CHAR * self.max_result_chars + MESSAGE_ENVELOPE_BYTES)

    def describe(self) -> str:
        """Where the server is, in one line for a person (no secret values)."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


class McpSettings(BaseModel):
    """``[mcp]``: the configured servers by name (none by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    servers: dict[ServerName, McpServerSettings] = Field(
        default_factory=dict,
        description="MCP servers by name (lower-case letters, digits, single underscores).",
    )

    def active(self) -> dict[str, McpServerSettings]:
        return {name: server for name, server in self.servers.items() if server.enabled}
