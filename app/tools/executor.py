"""The tool executor: permission, validation, execution with a timeout, rendering and recording.

Every tool call from every agent passes through ``ToolExecutor.execute``. It never raises for a bad
call: each failure becomes an error envelope the model can read and act on. Every call, good or bad,
is handed to the injected recorder with its parameters, result and duration. A tool's error text
comes from outside (an exchange, a mail server) and may quote a key: it is redacted here, once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
from collections import deque
from collections.abc import Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.domain.clock import Clock, WallClock
from app.domain.errors import (
    ErrorCode,
    InvalidParameterError,
    PermissionDeniedError,
    RiskRejection,
    ToolError,
    UnknownToolError,
)
from app.redaction import REDACTOR
from app.store.disk_full import DiskFullWatch
from app.tools.protocol.call import ToolCall
from app.tools.protocol.free_text import STRICT
from app.tools.protocol.parser import ParsedResponse, parse_response
from app.tools.protocol.render import (
    ToolResult,
    escape_text,
    render_error,
    render_rejected,
    render_success,
)
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext, ToolSpec, validate

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0


@dataclass(slots=True)
class ToolCallRecord:
    """One executed call as the audit trail stores it (one per call: slotted, not frozen, which
    makes it four times cheaper to build; recorders only read it)."""

    agent_id: str
    tool_name: str
    params: Mapping[str, Any]
    status: str
    error_code: str | None
    result_xml: str
    started_ms: int
    duration_ms: float


class ToolCallRecorder(Protocol):
    def record(self, entry: ToolCallRecord) -> None:
        """Store one call; must not raise for ordinary storage problems (log them instead)."""
        ...


@dataclass
class MemoryRecorder:
    """Keeps the most recent calls in memory: the CLI's recorder and the tests'."""

    capacity: int = 10_000
    entries: deque[ToolCallRecord] = field(default_factory=deque)

    def record(self, entry: ToolCallRecord) -> None:
        self.entries.append(entry)
        while len(self.entries) > self.capacity:
            self.entries.popleft()


class ToolExecutor:
    """Runs tool calls for agents against one registry."""

    def __init__(
        self,
        registry: ToolRegistry,
        recorder: ToolCallRecorder,
        clock: Clock | None = None,
        default_timeout_s: float | None = None,
        disk: DiskFullWatch | None = None,
    ) -> None:
        """``disk``: told when a call fails because the disk is full (not a bug of the tool:
        no traceback; the run stops and names what was not recorded)."""
        self.registry = registry
        self._disk = disk
        self._recorder = recorder
        self._clock = clock or WallClock()
        self._default_timeout_s = default_timeout_s
        self._names: frozenset[str] = frozenset()
        self._free_text = STRICT

    def set_default_timeout(self, seconds: float | None) -> None:
        """The longest a call without its own limit may run, from the next call on."""
        self._default_timeout_s = seconds

    def parse(self, response: str | bytes) -> ParsedResponse:
        names = self._tool_names()
        return parse_response(response, names, self._free_text)

    def _tool_names(self) -> frozenset[str]:
        """The registry's names (and free-text parameters), rebuilt only when a tool was
        registered since (never removed)."""
        if len(self._names) != len(self.registry):
            self._names = self.registry.names()
            self._free_text = self.registry.free_text()
        return self._names

    async def execute_text(self, ctx: AgentContext, response: str | bytes) -> ToolResult | None:
        """Parse a model response and execute its call; ``None`` when it is a plain text answer."""
        parsed = self.parse(response)
        if parsed.call is not None:
            return await self.execute(ctx, parsed.call)
        if parsed.is_text:
            return None
        return await self.execute_parsed(ctx, parsed)

    async def execute_parsed(self, ctx: AgentContext, parsed: ParsedResponse) -> ToolResult:
        """Execute a parsed call, or render the parse error; a text answer is an error here."""
        if parsed.error is not None:
            started = time.perf_counter()
            started_ms = self._clock.now_ms()
            result = render_error(
                parsed.tool_name or "unknown",
                parsed.error.code,
                parsed.error.message,
                parsed.error.details,
            )
            self._record(ctx, parsed.tool_name or "unknown", {}, result, started, started_ms)
            return result
        if parsed.call is None:
            raise ValueError("execute_parsed needs a call or an error, not a text answer")
        return await self.execute(ctx, parsed.call)

    async def execute(self, ctx: AgentContext, call: ToolCall) -> ToolResult:
        """Check, validate, run and render one call; always returns a result, never raises."""
        started = time.perf_counter()
        started_ms = self._clock.now_ms()
        params: dict[str, Any] = {}
        try:
            spec = self._resolve(ctx, call)
            params = validate(spec, call.params)
            data = await self._run(spec, ctx, params)
            result = render_success(call.name, data)
        except ToolError as exc:
            if self._disk is not None:
                self._disk.check(exc)  # a memory file the full disk refused stops the run
            result = render_error(call.name, exc.code, REDACTOR.redact(exc.message),
                                  REDACTOR.redact_data(exc.details))
        except RiskRejection as exc:
            result = render_rejected(call.name, exc.rule, exc.reason, exc.details)
        except Exception as exc:  # a bug in a tool must not kill the agent loop
            if self._disk is not None and self._disk.check(exc):
                result = render_error(
                    call.name, ErrorCode.INTERNAL_ERROR,
                    f"The disk holding the workspace is full ({self._disk.reason}): the call "
                    "could not be completed, and the run is stopping.",
                    {"reason": "disk_full"},
                )
                self._record(ctx, call.name, params or _raw_params(call), result, started,
                             started_ms)
                return result
            logger.exception("tool %s failed", call.name)
            result = render_error(
                call.name,
                ErrorCode.INTERNAL_ERROR,
                f"The tool failed with an internal error ({type(exc).__name__}). The call may be "
                "retried; if it fails again, report it.",
                {"exception": type(exc).__name__},
            )
        self._record(ctx, call.name, params or _raw_params(call), result, started, started_ms)
        return result

    def _resolve(self, ctx: AgentContext, call: ToolCall) -> ToolSpec:
        spec = self.registry.get(call.name)
        if spec is None:
            inner = [node.tag for node in call.params if node.tag in self.registry]
            if inner:
                raise UnknownToolError(
                    f"<{call.name}> is not a tool; write the call itself with nothing around it: "
                    f"<{inner[0]}>...</{inner[0]}>.",
                    details={"tool": call.name, "wrapped": inner[0]},
                )
            close = self.registry.closest(call.name, ctx.permissions)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise UnknownToolError(
                f"There is no tool named <{call.name}>.{hint} Only the tools listed under "
                "Available Tools exist.",
                details={"tool": call.name, "closest": close},
            )
        if spec.permission not in ctx.permissions:
            raise PermissionDeniedError(
                f"This agent ({ctx.role}) is not permitted to call <{spec.name}> (permission "
                f"group '{spec.permission}'). Use the tools in your Available Tools section, or "
                "dispatch the task to an agent whose role allows it.",
                details={"tool": spec.name, "permission": str(spec.permission)},
            )
        if call.attrs:
            example = "".join(
                f"<{k}>{escape_text(v)}</{k}>" for k, v in list(call.attrs.items())[:3]
            )
            raise InvalidParameterError(
                f"Parameters must be child elements, not attributes: write <{spec.name}>{example}"
                f"</{spec.name}>.",
                details={"attributes": sorted(call.attrs)},
            )
        if call.stray_text:
            shape = " Parameters are XML elements, not JSON." if call.stray_text[0] in "{[" else ""
            loose = call.stray_text[:40]
            raise InvalidParameterError(
                f"<{spec.name}> contains text outside any parameter ({loose!r}).{shape} Put every "
                f"value inside its parameter's element: {_example(spec)}.",
                details={"text": call.stray_text[:200]},
            )
        return spec

    async def _run(self, spec: ToolSpec, ctx: AgentContext, params: dict[str, Any]) -> Any:
        """Run the handler under its deadline.

        The handler's first step runs before the deadline is armed: a deadline can only fire
        while the handler is suspended, so a handler that finishes without suspending (most
        tools over in-memory state) skips the cost of arming and disarming a timer. One that
        suspends continues, from exactly where it stopped, inside the deadline.
        """
        timeout = spec.timeout_s
        if timeout is None:
            timeout = self._default_timeout_s or DEFAULT_TIMEOUT_S
        coro = spec.handler(ctx, params)
        scope: asyncio.Timeout | None = None
        try:
            try:
                suspended_on = coro.send(None)
            except StopIteration as done:
                return done.value
            scope = asyncio.timeout(timeout)  # armed only now: see the docstring
            async with scope:
                return await _resume(coro, suspended_on)
        except TimeoutError:
            if scope is not None and scope.expired():
                message = (
                    f"<{spec.name}> did not finish within {timeout:g} s and was stopped. Try "
                    "again, or ask for less data."
                )
                details: dict[str, Any] = {"timeout_s": timeout}
            else:  # the tool's own wait on a service timed out, not our deadline
                message = (
                    f"<{spec.name}> timed out waiting for a service it depends on. Try again later."
                )
                details = {"timeout_s": timeout, "source": "service"}
            raise ToolError(message, code=ErrorCode.TIMEOUT, details=details) from None

    def _record(
        self,
        ctx: AgentContext,
        tool_name: str,
        params: Mapping[str, Any],
        result: ToolResult,
        started: float,
        started_ms: int,
    ) -> None:
        entry = ToolCallRecord(  # positional, in field order: built once per call
            ctx.agent_id,
            tool_name,
            params if type(params) is dict else dict(params),  # a fresh dict per call already
            result.status,
            result.error_code.value if result.error_code else None,
            result.xml,
            started_ms,
            (time.perf_counter() - started) * 1000,
        )
        try:
            self._recorder.record(entry)
        except Exception as exc:  # the audit trail failing must be loud, but not lose the result
            if self._disk is not None and self._disk.check(exc):
                return  # a full disk is said once, by the run, naming what was not recorded
            logger.exception("could not record the call to %s", tool_name)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], suspended_on: Any) -> Generator[Any, Any, Any]:
    """Continue a coroutine that has already suspended once, as ``await coro`` would have.

    What it yielded goes up to the running task unchanged (a future to wait for, or None for a
    bare yield); what the task sends or throws back (a result, a cancellation) goes down to it.
    """
    try:
        while True:
            try:
                sent = yield suspended_on
            except BaseException as exc:  # passed on to the coroutine, not handled here
                suspended_on = coro.throw(exc)
            else:
                suspended_on = coro.send(sent)
    except StopIteration as done:
        return done.value
    finally:
        coro.close()  # a no-op once it has finished; stops it if we are closed half-way


def _example(spec: ToolSpec) -> str:
    """The call with its required parameters, as the prompt's invocation format shows them."""
    inner = "".join(
        f"<{p.name}>{escape_text(p.placeholder())}</{p.name}>" for p in spec.params if p.required
    )
    return f"<{spec.name}>{inner}</{spec.name}>"


def _raw_params(call: ToolCall) -> dict[str, Any]:
    return {node.tag: node.text[:200] for node in call.params}
