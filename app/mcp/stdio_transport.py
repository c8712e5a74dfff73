"""Kestrel's stdio transport for the MCP SDK's client: a server's output can never stall the loop.

Drop-in for ``mcp.client.stdio.stdio_client``: an async context manager that starts the server in
its own process group and yields the SDK's two memory streams (``SessionMessage`` or ``Exception``
in, ``SessionMessage`` out). Why our own: the SDK's reader joins the growing text of one message
to each new chunk (``buffer + chunk``), so a message costs the square of its size. Measured
(``tests/benchmarks/bench_mcp_flood.py``): one 32 MB answer paused the app's event loop (shared
with the Qt window) up to 160 ms at a time for 7 s; a 128 MB one was not read within 30 s, paused
the loop ~200 ms at a time, and was still being read after the call had been abandoned.

Here stdout is read in chunks of ``READ_CHUNK_BYTES`` and framed by ``LineFramer`` in linear time.
Two limits bound what one message may cost the loop:

- ``max_message_bytes`` (from the server's settings): a longer message is never held whole. Its
  first and last bytes are kept; the rest is discarded as it arrives, up to its newline.
- ``MAX_MESSAGE_VALUES``: parsing costs per JSON value (the Python objects made), not per byte,
  and the parser holds the GIL, so a worker thread would not help. A message of more values is
  dropped unparsed (the count runs in a worker thread when it is not obviously small).

A dropped message is answered for, never silently lost:

- when its id names a request of ours that is still waiting (and it has no ``method``: not a
  request of the server's), that request gets a JSON-RPC error with code ``MESSAGE_TOO_LARGE``
  at once, even while the rest is still arriving; the connection stays open, since the server
  framed its output correctly and only this one answer is lost;
- when it names nothing waiting (a notification, a late answer, a request of the server's), it is
  logged and forgotten;
- when it cannot be matched (no id in its edges) while requests of ours are waiting, one of them
  may be waiting for it forever: the connection is closed, so every waiting request ends now
  (``CONNECTION_CLOSED``), and the owner starts the server again on the next call.

A dropped message is read to its newline (its id may come last), but not forever: one that
passes ``DROPPED_LINE_FACTOR`` times the limit without ending is not a message a server
meant to end; the connection is closed as above, whether or not its call was answered for.

``on_dropped`` hears of each drop (the connection words its errors with it). Shutdown follows the
SDK's (close stdin, wait 2 s, SIGTERM the process group, wait 2 s, SIGKILL it), and then SIGKILLs
the group in any case, so nothing the server started outlives the connection. On Linux the server
runs under a keeper (``app.mcp.process_tree``) that also ends what left the group (a daemon that
double-forked and called ``setsid``), and does so when Kestrel dies too. POSIX only: on Windows
the SDK's transport is used as it is.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TextIO

import anyio
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from anyio.abc import AsyncResource, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from app.mcp.framing import (
    HEAD_BYTES,
    TAIL_BYTES,
    LineFramer,
    Overflow,
    Oversized,
    Peek,
    count_values,
    peek_id,
    value_bound,
)
from app.mcp.process_tree import keep_command

logger = logging.getLogger(__name__)

MESSAGE_TOO_LARGE = -32019
"""JSON-RPC error code of the answer a dropped message gets. Like the SDK's CONNECTION_CLOSED it is
made on this side and never sent on the wire; it sits at the far end of the implementation-defined
band (-32000..-32019) the SDK allocates from -32000 up."""

READ_CHUNK_BYTES = 65536
DROPPED_LINE_FACTOR = 16
"""How far past the limit a dropped message is read, looking for its end: 16 times (128 MiB for
the default 8 MiB) takes well under a second from a pipe, and no server that writes one JSON
message per line sends one that long."""
MAX_MESSAGE_VALUES = 50_000  # at most ~40 ms of parsing and validation (measured at the limit)
COUNT_INLINE_BYTES = MAX_MESSAGE_VALUES  # one byte per value at least: a shorter line is within
PENDING_IDS_MAX = 4096  # waiting requests remembered; the oldest are forgotten past this
PROCESS_TERMINATION_TIMEOUT_S = 2.0  # the SDK's grace after stdin closes
FORCE_KILL_TIMEOUT_S = 2.0  # the SDK's wait between SIGTERM and SIGKILL
KILL_REAP_TIMEOUT_S = 2.0
WRITER_FLUSH_TIMEOUT_S = 0.5
EXIT_POLL_S = 0.01


@dataclass(frozen=True, slots=True)
class DroppedMessage:
    """A message of the server that was dropped for its size.

    Attributes:
        limit: the limit it passed.
        unit: ``"bytes"`` or ``"JSON values"``.
        closed: the connection was closed because of it (it could not be matched to a call, or
            it did not end).
        endless: it passed ``limit`` (``DROPPED_LINE_FACTOR`` times the message limit) without
            ending, and reading it was given up.
    """

    limit: int
    unit: str
    closed: bool
    endless: bool = False

    def describe(self) -> str:
        if self.endless:
            return f"a message of more than {self.limit} {self.unit} that did not end"
        return f"a message of more than {self.limit} {self.unit}"


OnDropped = Callable[[DroppedMessage], None]
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                MemoryObjectSendStream[SessionMessage]]


def _hand_over_gil() -> None:
    time.sleep(0)  # releases the GIL: the event loop's thread runs now if it is waiting


def _request_key(request_id: int | str) -> int | str:
    """The id as the SDK's dispatcher correlates it ("7" and 7 are one id)."""
    if isinstance(request_id, str):
        with suppress(ValueError):
            return int(request_id)
    return request_id


class _Pipes:
    """The two pipe tasks of one server process and the state they share."""

    def __init__(
        self, process: Process, server: StdioServerParameters, max_message_bytes: int,
        on_dropped: OnDropped | None,
    ) -> None:
        self.process = process
        self.encoding = server.encoding
        self.errors = server.encoding_error_handler
        self.utf8 = server.encoding.lower().replace("_", "-") in ("utf-8", "utf8")
        self.framer = LineFramer(max_message_bytes)
        self.endless_bytes = DROPPED_LINE_FACTOR * max_message_bytes
        self.on_dropped = on_dropped
        self.read_send, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception](0)
        self.write_stream, self.write_receive = anyio.create_memory_object_stream[
            SessionMessage](0)
        self.pending: dict[int | str, None] = {}  # ids of our requests still waiting, in order
        self.writer_done = anyio.Event()
        self.shutting_down = False
        self._answered = False  # the line being dropped now was already answered for

    # -- stdout ---------------------------------------------------------------------------------

    async def read_stdout(self) -> None:
        try:
            async with self.read_send:
                await self._pump()
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not self.shutting_down:
                logger.exception("Reading from the MCP server's stdout failed mid-session")
        finally:
            await self._drain()

    async def _pump(self) -> None:
        """Frame and deliver until the output ends, the session goes, or we give up on it."""
        assert self.process.stdout is not None
        while True:
            try:
                chunk = await self.process.stdout.receive(READ_CHUNK_BYTES)
            except anyio.EndOfStream:
                return
            for frame in self.framer.feed(chunk):
                if not await self._handle(frame):
                    return
            if self.framer.line_bytes > self.endless_bytes:
                logger.warning("The MCP server sent a message of more than %d bytes that did not "
                               "end; the connection is closed", self.endless_bytes)
                self._tell(DroppedMessage(self.endless_bytes, "bytes", closed=True, endless=True))
                return
            await anyio.lowlevel.checkpoint()  # a server that never pauses still takes turns

    async def _handle(self, frame: bytes | Overflow | Oversized) -> bool:
        """Deliver one frame; False when reading should stop (session gone or closed on purpose)."""
        if isinstance(frame, Overflow):
            return await self._overflowed(frame.head)
        if isinstance(frame, Oversized):
            if self._answered:
                self._answered = False
                return True
            return await self._dropped(frame.head, frame.tail, self.framer.limit, "bytes")
        if len(frame) > COUNT_INLINE_BYTES and value_bound(frame) > MAX_MESSAGE_VALUES:
            values = await anyio.to_thread.run_sync(  # exactly, at Python speed: off the loop
                count_values, frame, MAX_MESSAGE_VALUES, _hand_over_gil)
            if values > MAX_MESSAGE_VALUES:
                return await self._dropped(frame[:HEAD_BYTES], frame[-TAIL_BYTES:],
                                           MAX_MESSAGE_VALUES, "JSON values")
        return await self._deliver(self._parse(frame))

    def _parse(self, line: bytes) -> SessionMessage | Exception:
        """One message, or the parse error as a value for the session to see (as the SDK does)."""
        try:
            message = types.jsonrpc_message_adapter.validate_json(self._text(line), by_name=False)
        except ValueError as exc:
            logger.warning("The MCP server sent a line that is not a JSON-RPC message: %s",
                           str(exc)[:300])
            return exc
        return SessionMessage(message)

    def _text(self, line: bytes) -> bytes | str:
        """What the parser reads: the bytes when they are valid UTF-8 (parsed twice as fast as
        text), else the text decoded with the server's error handler."""
        if self.utf8 and line.isascii():
            return line
        if self.utf8:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                return line
        return line.decode(self.encoding, errors=self.errors)

    async def _deliver(self, item: SessionMessage | Exception) -> bool:
        if not isinstance(item, Exception):
            message = item.message
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and (
                message.id is not None
            ):
                self.pending.pop(_request_key(message.id), None)
        try:
            await self.read_send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False  # the session is gone; only the drain remains
        return True

    def _waiting(self, peek: Peek) -> bool:
        """The dropped message answers a request of ours that still waits."""
        return (peek.id is not None and not peek.method
                and _request_key(peek.id) in self.pending)

    async def _overflowed(self, head: bytes) -> bool:
        """A line just passed the byte limit: when its head names a waiting request, that
        request is answered now, not once the rest has been read."""
        peek = peek_id(head, b"")
        self._answered = self._waiting(peek)
        if self._answered:
            return await self._answer(peek, self.framer.limit, "bytes")
        return True

    async def _dropped(self, head: bytes, tail: bytes, limit: int, unit: str) -> bool:
        """A dropped message ended: answer for it (module docstring). False: stop reading."""
        peek = peek_id(head, tail)
        if self._waiting(peek):
            return await self._answer(peek, limit, unit)
        what = DroppedMessage(limit, unit, closed=False).describe()
        if peek.method or peek.id is not None or not self.pending:
            logger.warning("The MCP server sent %s that no request waits for (%s); dropped", what,
                           "a request or notification" if peek.method else f"id {peek.id!r}")
            return True
        logger.warning("The MCP server sent %s that cannot be matched to a request while %d "
                       "wait; the connection is closed", what, len(self.pending))
        self._tell(DroppedMessage(limit, unit, closed=True))
        return False

    async def _answer(self, peek: Peek, limit: int, unit: str) -> bool:
        """Give the waiting request named by ``peek`` its error."""
        assert peek.id is not None
        self.pending.pop(_request_key(peek.id), None)
        dropped = DroppedMessage(limit, unit, closed=False)
        logger.warning("The MCP server sent %s (the answer to request %r); dropped",
                       dropped.describe(), peek.id)
        self._tell(dropped)
        error = types.ErrorData(code=MESSAGE_TOO_LARGE, message=dropped.describe(),
                                data={"limit": limit, "unit": unit})
        return await self._deliver(SessionMessage(types.JSONRPCError(
            jsonrpc="2.0", id=peek.id, error=error)))

    def _tell(self, dropped: DroppedMessage) -> None:
        if self.on_dropped is not None:
            self.on_dropped(dropped)

    async def _drain(self) -> None:
        """Read and discard what is left, so a server blocked on a full pipe can exit; ends when
        shutdown closes the pipe (shielded, like the SDK's)."""
        assert self.process.stdout is not None
        with anyio.CancelScope(shield=True), suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
            ConnectionError, OSError,
        ):
            while True:
                await self.process.stdout.receive(READ_CHUNK_BYTES)

    # -- stdin ----------------------------------------------------------------------------------

    async def write_stdin(self) -> None:
        assert self.process.stdin is not None
        try:
            async with self.write_receive:
                async for session_message in self.write_receive:
                    message = session_message.message
                    self._note_outgoing(message)
                    json = message.model_dump_json(by_alias=True, exclude_unset=True)
                    await self.process.stdin.send(
                        (json + "\n").encode(self.encoding, errors=self.errors))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # the server may still be alive: end the session rather than leave a request hanging
            await self.read_send.aclose()
        finally:
            self.writer_done.set()

    def _note_outgoing(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self.pending[_request_key(message.id)] = None
            while len(self.pending) > PENDING_IDS_MAX:
                del self.pending[next(iter(self.pending))]
        elif isinstance(message, types.JSONRPCNotification) and (
            message.method == "notifications/cancelled" and message.params
        ):
            cancelled = message.params.get("requestId")
            if isinstance(cancelled, int | str):
                self.pending.pop(_request_key(cancelled), None)

    # -- shutdown -------------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Stop traffic, let accepted writes flush, stop the server, release the streams."""
        self.read_stream.close()  # unblocks the reader into its drain
        self.write_stream.close()
        with anyio.move_on_after(WRITER_FLUSH_TIMEOUT_S):
            await self.writer_done.wait()
        await _stop_process(self.process)
        for stream in (self.read_stream, self.write_stream, self.read_send, self.write_receive):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()


async def _stop_process(process: Process) -> None:
    """Close stdin, give the server its grace, then end its whole process group."""
    assert process.stdin is not None and process.stdout is not None
    await _close_quietly(process.stdin)
    if not await _poll(lambda: process.returncode is not None, PROCESS_TERMINATION_TIMEOUT_S):
        _signal_group(process.pid, signal.SIGTERM)
        await _poll(lambda: not _group_alive(process), FORCE_KILL_TIMEOUT_S)
    # always: whatever the server started in its group goes with it (its pid is the group's id;
    # the group cannot be reused while a member lives)
    _signal_group(process.pid, signal.SIGKILL)
    if not await _poll(lambda: process.returncode is not None, KILL_REAP_TIMEOUT_S):
        logger.warning("MCP server process %d is still alive after SIGKILL; abandoning it",
                       process.pid)
    await _close_quietly(process.stdout)
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):  # else the asyncio transport warns at GC while a survivor holds a pipe
        with suppress(PermissionError):
            close()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(process: Process) -> bool:
    _ = process.returncode  # lets the leader be reaped
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a zombie or a member we may not signal: not proof that it is gone
    return True


async def _poll(done: Callable[[], bool], within_s: float) -> bool:
    """Whether ``done()`` came true within ``within_s``. Polled: no event says a process group
    is gone, and ``process.wait()`` also waits for the pipes, which a surviving child holds."""
    with anyio.move_on_after(within_s):
        while not done():  # noqa: ASYNC110 - polling process state, no event exists for it
            await anyio.sleep(EXIT_POLL_S)
    return done()


async def _close_quietly(stream: AsyncResource) -> None:
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()


@asynccontextmanager
async def stdio_client(
    server: StdioServerParameters,
    errlog: TextIO = sys.stderr,
    *,
    max_message_bytes: int,
    on_dropped: OnDropped | None = None,
) -> AsyncGenerator[Streams, None]:
    """Start the server and connect to it over its stdin and stdout.

    Args:
        server: the SDK's parameters (command, args, env merged over the SDK's safe defaults,
            cwd, encoding and its error handler).
        errlog: where the server's stderr goes (a file with a descriptor).
        max_message_bytes: the longest message kept; longer ones are dropped (module docstring).
        on_dropped: told of each dropped message.

    Raises:
        OSError: the server could not be started.
    """
    if sys.platform == "win32":  # pragma: no cover - no process groups; the SDK's handles jobs
        from mcp.client.stdio import stdio_client as sdk_stdio_client

        async with sdk_stdio_client(server, errlog) as streams:
            yield streams
        return

    env = get_default_environment() | (server.env or {})
    process = await anyio.open_process(
        keep_command([server.command, *server.args], env),  # ends what the server leaves behind
        env=env, stderr=errlog, cwd=server.cwd, start_new_session=True,
    )
    # started: no await until the task group is entered, or a cancellation would leak it
    pipes = _Pipes(process, server, max_message_bytes, on_dropped)
    async with anyio.create_task_group() as group:
        group.start_soon(pipes.read_stdout)
        group.start_soon(pipes.write_stdin)
        try:
            yield pipes.read_stream, pipes.write_stream
        finally:
            pipes.shutting_down = True
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                await pipes.shutdown()
            group.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
