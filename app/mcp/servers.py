"""Connections to the configured MCP servers: start, list, call, restart, stop.

Each server gets one ``McpConnection``. Its SDK client lives in one asyncio task of the app's own
event loop (anyio's scopes must be entered and left by the same task); agent steps in other tasks
send requests through it. A connection starts on first use, never at start-up, and a server that
crashed or could not start is started again on the next call, at most ``MAX_RESTARTS`` times a
minute. The server's stderr is kept as a short tail in memory (a flood cannot fill a disk) so a
crash can be explained. Foreign errors (the SDK's, the OS's) become ``ToolError``s here, once.
What a server says is redacted as it arrives (its tool listing, its stderr): a server started
with a secret in its environment may name it in a tool's description or print it, and the
listing goes on to the approvals file and every prompt.

A stdio server is reached through Kestrel's own transport (``app.mcp.stdio_transport``), which
reads in bounded chunks and drops a message longer than ``max_message_bytes``: the call it
answered fails with a clear error and the connection stays open, or, when it cannot be matched to
a call, the connection is closed and started again on the next call.

The ``mcp`` SDK is imported when the first connection starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from app.config.mcp import McpServerSettings
from app.domain.errors import ErrorCode, NetworkError, ToolError
from app.redaction import REDACTOR
from app.secrets import SecretSource

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult

    from app.mcp.stdio_transport import DroppedMessage

logger = logging.getLogger(__name__)

MAX_RESTARTS = 3  # starts within RESTART_WINDOW_S before the next one waits
RESTART_WINDOW_S = 60.0
MAX_TOOLS = 200
MAX_PAGES = 10
STDERR_TAIL_BYTES = 8192


class StderrTail:
    """The last few KB a server wrote to stderr, read by a thread from a pipe (any amount of
    output costs no memory beyond ``limit`` and never touches the event loop)."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self.limit = limit
        self._data = bytearray()
        self._lock = threading.Lock()
        read_fd, write_fd = os.pipe()
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd,), name="mcp-stderr", daemon=True
        )
        self._thread.start()

    def _pump(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 65536):
                with self._lock:
                    self._data += chunk
                    if len(self._data) > self.limit:
                        del self._data[: len(self._data) - self.limit]
        except OSError:
            pass  # the pipe was closed under the read: nothing more to keep
        finally:
            os.close(fd)

    def close_writer(self) -> None:
        """Our copy of the write end; the tail ends once the server's copy closes too."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def text(self) -> str:
        with self._lock:
            return bytes(self._data).decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class Listing:
    """What a server lists: each tool as a plain dict (the wire's field names)."""

    server: str
    tools: tuple[dict[str, Any], ...]


def _mcp_error_code(exc: BaseException) -> int | None:
    error = getattr(exc, "error", None)
    return getattr(error, "code", None)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, which anyio's task groups raise."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


class McpConnection:
    """One configured server and, while it runs, its SDK client.

    Args:
        name: the server's name in the settings.
        settings: how to reach it.
        secrets: reads the keyring entries named by ``secret_env`` (and says how to set one).
        monotonic: the clock the restart limit is measured with (injected in tests).
    """

    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        secrets: SecretSource,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.settings = settings
        self._secrets = secrets
        self._monotonic = monotonic
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._start_lock = asyncio.Lock()
        self._starts: list[float] = []
        self._tail: StderrTail | None = None
        self._dropped: DroppedMessage | None = None  # the last message dropped for its size
        self.last_error = ""
        self.exit_code: int | None = None

    @property
    def running(self) -> bool:
        return self._client is not None and self._owner is not None and not self._owner.done()

    def stderr_tail(self) -> str:
        return REDACTOR.redact(self._tail.text()) if self._tail is not None else ""

    # -- lifecycle -----------------------------------------------------------------------------

    def _transport(self) -> Any:
        """The SDK transport for the settings (imported here: start-up never pays for it)."""
        from mcp import StdioServerParameters
        from mcp.client.streamable_http import streamable_http_client

        from app.mcp.stdio_transport import stdio_client

        if self.settings.url is not None:
            return streamable_http_client(self.settings.url)
        env = dict(self.settings.env)
        for variable, entry in self.settings.secret_env.items():
            value = self._secrets.get(entry)
            if value is None:
                how = self._secrets.how_to_set(entry, "Settings > MCP servers")
                raise ToolError(
                    f"The MCP server '{self.name}' needs the secret {entry!r} (for its "
                    f"{variable}), which is not set. A person must {how[:1].lower()}{how[1:]}.",
                    code=ErrorCode.NETWORK_ERROR, details={"server": self.name, "entry": entry},
                )
            env[variable] = value
        assert self.settings.command is not None
        params = StdioServerParameters(
            command=self.settings.command, args=list(self.settings.args), env=env or None,
            encoding_error_handler="replace",
        )
        self._tail = StderrTail()
        self._dropped = None
        return stdio_client(params, errlog=self._tail.writer,
                            max_message_bytes=self.settings.max_message_bytes,
                            on_dropped=self._note_dropped)

    def _note_dropped(self, dropped: DroppedMessage) -> None:
        self._dropped = dropped

    async def _own(self, ready: asyncio.Future[Client]) -> None:
        """Hold the client open until asked to stop (runs as the connection's own task)."""
        from mcp import Client

        try:
            transport = self._transport()
            async with Client(transport, cache=None) as client:
                if not ready.done():
                    ready.set_result(client)
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure to start or to stay connected ends this client
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.info("MCP server %s: the connection ended: %r", self.name, exc)
        finally:
            self._client = None
            if self._tail is not None:
                self._tail.close_writer()

    async def client(self) -> Client:
        """The running client, starting the server first when it is not running.

        Raises:
            ToolError: it cannot be started (TIMEOUT, or NETWORK_ERROR with the reason), or it
                was restarted too often in the last minute.
        """
        if self.running:
            assert self._client is not None
            return self._client
        async with self._start_lock:
            if self.running:
                assert self._client is not None
                return self._client
            await self._stop_owner()
            now = self._monotonic()
            self._starts = [t for t in self._starts if now - t < RESTART_WINDOW_S]
            if len(self._starts) >= MAX_RESTARTS:
                wait = RESTART_WINDOW_S - (now - self._starts[0])
                raise NetworkError(
                    f"The MCP server '{self.name}' was started {MAX_RESTARTS} times in the last "
                    f"minute and failed each time; it is not started again for {wait:.0f} s. "
                    f"Last error: {self.last_error or 'unknown'}",
                    details={"server": self.name, "retry_after_s": round(wait)},
                )
            self._starts.append(now)
            return await self._start()

    async def _start(self) -> Client:
        self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self._owner = loop.create_task(self._own(ready), name=f"mcp-{self.name}")
        timeout = self.settings.timeout_s
        try:
            async with asyncio.timeout(timeout):
                client = await asyncio.shield(ready)
        except TimeoutError:
            self.last_error = f"it did not answer within {timeout:g} s of starting"
            await self._stop_owner()
            raise ToolError(
                f"The MCP server '{self.name}' did not start within {timeout:g} s.",
                code=ErrorCode.TIMEOUT, details={"server": self.name, "timeout_s": timeout},
            ) from None
        except ToolError as exc:
            self.last_error = exc.message
            await self._stop_owner()
            raise
        except Exception as exc:
            self.last_error = self._describe_failure(exc)
            await self._stop_owner()
            raise NetworkError(
                f"The MCP server '{self.name}' could not be started: {self.last_error}",
                details={"server": self.name},
            ) from None
        self._client = client
        self.last_error = ""
        logger.info("MCP server %s started (%s)", self.name, self.settings.describe())
        return client

    def _describe_failure(self, exc: BaseException) -> str:
        leaves = _leaves(exc)
        reason = "; ".join(f"{type(leaf).__name__}: {leaf}"[:200] for leaf in leaves[:3])
        tail = self.stderr_tail().strip().splitlines()[-3:]
        if tail:
            reason += " (its last stderr lines: " + " | ".join(line[:200] for line in tail) + ")"
        return reason

    async def _stop_owner(self) -> None:
        owner, self._owner = self._owner, None
        self._client = None
        if owner is None:
            return
        self._stop.set()
        if not owner.done():
            # the SDK closes stdin, waits, then terminates the server's process group: bounded
            try:
                async with asyncio.timeout(10):
                    await asyncio.shield(owner)
            except TimeoutError:
                owner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await owner
        with contextlib.suppress(asyncio.CancelledError, Exception):
            owner.result()

    async def aclose(self) -> None:
        async with self._start_lock:
            await self._stop_owner()

    def _lost(self, exc: BaseException) -> NetworkError:
        """The connection broke during a request: forget the client so the next call restarts."""
        self._client = None
        self._stop.set()
        dropped = self._dropped
        if dropped is not None and dropped.endless:
            self.last_error = f"it sent {dropped.describe()}"
            return NetworkError(
                f"The MCP server '{self.name}' sent {dropped.describe()} (the most Kestrel reads "
                "of one message, even to drop it), so the connection was closed and every call "
                "waiting on it failed. The server will be started again on the next call.",
                details={"server": self.name, "limit": dropped.limit, "unit": dropped.unit},
            )
        if dropped is not None and dropped.closed:
            self.last_error = f"it sent {dropped.describe()} that matched no call"
            return NetworkError(
                f"The MCP server '{self.name}' sent {dropped.describe()}; it was dropped. It "
                "could not be matched to one call, so the connection was closed and every call "
                "waiting on it failed. The server will be started again on the next call.",
                details={"server": self.name, "limit": dropped.limit, "unit": dropped.unit},
            )
        tail = self.stderr_tail().strip().splitlines()[-2:]
        said = f" Its last stderr lines: {' | '.join(t[:200] for t in tail)}" if tail else ""
        self.last_error = f"the connection was lost ({exc})"
        return NetworkError(
            f"The MCP server '{self.name}' stopped or closed the connection during the call "
            f"({exc}). It will be started again on the next call.{said}",
            details={"server": self.name},
        )

    # -- requests ------------------------------------------------------------------------------

    async def _request[T](self, what: str, make: Callable[[Client], Awaitable[T]]) -> T:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = await self.client()
        timeout = self.settings.timeout_s
        try:
            async with asyncio.timeout(timeout):
                return await make(client)
        except TimeoutError:
            raise ToolError(
                f"The MCP server '{self.name}' did not answer {what} within {timeout:g} s; the "
                "request was abandoned.",
                code=ErrorCode.TIMEOUT, details={"server": self.name, "timeout_s": timeout},
            ) from None
        except MCPError as exc:
            if _mcp_error_code(exc) == CONNECTION_CLOSED:
                raise self._lost(exc) from None
            too_large = self._too_large(exc, what)
            if too_large is not None:
                raise too_large from None
            raise ToolError(
                f"The MCP server '{self.name}' refused {what}: {str(exc)[:300]}",
                code=ErrorCode.INVALID_PARAMETER if _mcp_error_code(exc) == -32602
                else ErrorCode.INTERNAL_ERROR,
                details={"server": self.name, "mcp_error_code": _mcp_error_code(exc)},
            ) from None
        except (OSError, EOFError) as exc:
            raise self._lost(exc) from None
        except ValueError as exc:  # the SDK's validation of a malformed answer (pydantic)
            raise ToolError(
                f"The MCP server '{self.name}' answered {what} with something malformed: "
                f"{str(exc)[:300]}",
                code=ErrorCode.INTERNAL_ERROR, details={"server": self.name},
            ) from None
        except RuntimeError as exc:  # the SDK: an answer of a kind it cannot hand back
            raise ToolError(
                f"The MCP server '{self.name}' answered {what} in a way Kestrel cannot use: "
                f"{str(exc)[:300]}",
                code=ErrorCode.INTERNAL_ERROR, details={"server": self.name},
            ) from None

    def _too_large(self, exc: BaseException, what: str) -> ToolError | None:
        """The error of a call whose answer the transport dropped for its size (None: another
        error). Worded from the numbers alone: the code could be faked by a server."""
        from app.mcp.stdio_transport import MESSAGE_TOO_LARGE

        error = getattr(exc, "error", None)
        data = getattr(error, "data", None)
        if _mcp_error_code(exc) != MESSAGE_TOO_LARGE or not isinstance(data, dict):
            return None
        limit, unit = data.get("limit"), data.get("unit")
        if not isinstance(limit, int) or unit not in ("bytes", "JSON values"):
            return None
        return ToolError(
            f"The MCP server '{self.name}' sent a message of more than {limit} {unit} as its "
            f"answer to {what}; it was dropped. The connection stays open: ask the tool for "
            "less (a narrower query, fewer items).",
            code=ErrorCode.INTERNAL_ERROR,
            details={"server": self.name, "limit": limit, "unit": unit,
                     "source": "mcp_server"},
        )

    async def list_tools(self) -> Listing:
        """Every tool the server lists now (following pages, at most ``MAX_TOOLS``)."""

        async def fetch(client: Client) -> list[dict[str, Any]]:
            from mcp_types import PaginatedRequestParams

            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                params = PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await client.session.list_tools(params=params)
                tools += [REDACTOR.redact_data(
                    t.model_dump(mode="json", by_alias=True, exclude_none=True))
                    for t in page.tools]
                cursor = page.next_cursor
                if not cursor or len(tools) >= MAX_TOOLS:
                    break
            return tools[:MAX_TOOLS]

        return Listing(self.name, tuple(await self._request("the tool listing", fetch)))

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        async def call(client: Client) -> CallToolResult:
            return await client.session.call_tool(tool, arguments)

        return await self._request(f"the call of {tool}", call)


class McpConnections:
    """The connections of every enabled server, made on first use; closed together."""

    def __init__(
        self,
        servers: dict[str, McpServerSettings],
        secrets: SecretSource,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = dict(servers)
        self._secrets = secrets
        self._monotonic = monotonic
        self._connections: dict[str, McpConnection] = {}

    def get(self, name: str) -> McpConnection:
        """The server's connection.

        Raises:
            ToolError: NOT_FOUND when no enabled server has that name.
        """
        connection = self._connections.get(name)
        if connection is None:
            settings = self.settings.get(name)
            if settings is None:
                raise ToolError(
                    f"No MCP server named '{name}' is configured (Settings > MCP servers).",
                    code=ErrorCode.NOT_FOUND, details={"server": name},
                )
            connection = McpConnection(name, settings, self._secrets, self._monotonic)
            self._connections[name] = connection
        return connection

    def started(self) -> list[McpConnection]:
        return list(self._connections.values())

    async def aclose(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)
