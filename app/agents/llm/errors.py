"""How a model server's failures become the port's errors: one table for both vendor SDKs.

Why a table: the OpenAI-compatible and the Anthropic clients meet the same failures (the SDK's
timeout, a server it cannot reach, an HTTP error status, an answer it cannot parse, an error
event mid-stream, a connection that stalls or drops below the SDK, an answer past its time limit)
through two look-alike exception trees. ``ERROR_TABLE`` says once, in order, which failure is
retried (``TemporaryLLMError``; ``ThrottledLLMError`` with the server's Retry-After), which is
not (``PermanentLLMError``), which means the server takes no native tools
(``ToolsRefusedError``), and in which words; ``app.agents.faults`` reads those words to tell the
person what to do. An ``SdkErrors`` names one SDK's classes for each failure, and the two hints
that are true of one vendor only, so the clients cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

import httpx2

from app.agents.llm.port import (
    LLMError,
    PermanentLLMError,
    TemporaryLLMError,
    ToolsRefusedError,
)
from app.agents.llm.retry import ThrottledLLMError, parse_retry_after

# statuses with which a server refuses a request's native tools (when its words name tools)
_TOOLS_STATUSES = frozenset({400, 422, 500, 501})


class Failure(StrEnum):
    """What went wrong, whichever SDK reported it."""

    SDK_TIMEOUT = "sdk_timeout"  # the SDK's own time limit on a request
    UNREACHABLE = "unreachable"  # no connection to the server
    STATUS = "status"  # the server answered with an HTTP error status
    BAD_FORMAT = "bad_format"  # an answer the SDK could not read
    MID_ANSWER = "mid_answer"  # an error event in the middle of a stream
    STALLED = "stalled"  # a read below the SDK timed out (a stream that stopped)
    CONNECTION_LOST = "connection_lost"  # the connection failed below the SDK
    ANSWER_TIMEOUT = "answer_timeout"  # the whole answer's time limit passed
    CLIENT = "client"  # anything else the SDK raised


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """One vendor SDK as the table sees it: its exception class for each failure, and the words
    true of that vendor only.

    Attributes:
        provider: the port's provider name the errors carry.
        client: the SDK's name, for "the <client> client failed".
        unreachable_hint: said before the SDK's words when the server cannot be reached.
        not_found_hint: said after an unknown model (HTTP 404).
    """

    provider: str
    client: str
    timeout: type[Exception]
    unreachable: type[Exception]
    status: type[Exception]
    bad_format: type[Exception]
    mid_answer: type[Exception]
    base: type[Exception]
    unreachable_hint: str = ""
    not_found_hint: str = ""

    @property
    def caught(self) -> tuple[type[Exception], ...]:
        """Every exception a client hands to ``translate_error``."""
        return (self.base, httpx2.TransportError, TimeoutError)

    def failure_of(self, exc: BaseException) -> Failure:
        """Which failure ``exc`` is; a subclass is tested before its base.

        Raises:
            TypeError: ``exc`` is none of ``caught`` (a client passed the wrong error).
        """
        kinds: tuple[tuple[Failure, type[BaseException]], ...] = (
            (Failure.SDK_TIMEOUT, self.timeout),  # a subclass of the SDK's connection error
            (Failure.UNREACHABLE, self.unreachable),
            (Failure.STATUS, self.status),  # status and bad format subclass the SDK's API error
            (Failure.BAD_FORMAT, self.bad_format),
            (Failure.MID_ANSWER, self.mid_answer),
            (Failure.STALLED, httpx2.TimeoutException),  # a subclass of TransportError
            (Failure.CONNECTION_LOST, httpx2.TransportError),
            (Failure.ANSWER_TIMEOUT, TimeoutError),
            (Failure.CLIENT, self.base),
        )
        for failure, kind in kinds:
            if isinstance(exc, kind):
                return failure
        raise TypeError(f"{type(exc).__name__} is not an error of the {self.client} client")


@dataclass(frozen=True, slots=True)
class ErrorFacts:
    """What a row may test and say about one failure."""

    failure: Failure
    where: str  # "the server at <base_url>"
    base_url: str
    model: str
    timeout_s: float
    offered_tools: bool  # the request offered tools natively
    exc: str  # the exception's own words
    message: str  # the SDK's message (an error event's text)
    status: int = 0  # the HTTP status of a STATUS failure
    detail: str = ""  # the server's own message of a STATUS failure
    retry_after_s: float | None = None  # the server's Retry-After of a STATUS failure
    client: str = ""
    unreachable_hint: str = ""
    not_found_hint: str = ""

    def fields(self) -> dict[str, Any]:
        """The names a row's message may use."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


FactTest = Callable[[ErrorFacts], bool]


def _always(facts: ErrorFacts) -> bool:
    return True


def _status(*codes: int) -> FactTest:
    return lambda facts: facts.status in codes


def _tools_refused(facts: ErrorFacts) -> bool:
    """A request that offered tools natively, refused in words that name tools (a model without
    tool support, vLLM without ``--enable-auto-tool-choice``, llama.cpp without ``--jinja``, a
    proxy): retrying cannot help, sending the tools as XML can."""
    return (facts.offered_tools and facts.status in _TOOLS_STATUSES
            and "tool" in facts.detail.lower())


def _server_side(facts: ErrorFacts) -> bool:
    """The server failed or was busy (a timeout, a conflict, any 5xx): worth asking again."""
    return facts.status in (408, 409) or facts.status >= 500


def _client_side(facts: ErrorFacts) -> bool:
    return 400 <= facts.status < 500


@dataclass(frozen=True, slots=True)
class ErrorRow:
    """One line of the table: a failure (and a test of its facts), the port error it becomes and
    the message, a ``str.format`` template over ``ErrorFacts.fields()``."""

    failure: Failure
    applies: FactTest
    error: type[LLMError]
    message: str

    def build(self, provider: str, facts: ErrorFacts) -> LLMError:
        text = self.message.format(**facts.fields())
        if issubclass(self.error, ThrottledLLMError):
            return self.error(provider, text, facts.retry_after_s)
        return self.error(provider, text)


ERROR_TABLE: tuple[ErrorRow, ...] = (
    ErrorRow(Failure.SDK_TIMEOUT, _always, TemporaryLLMError,
             "{where} did not answer within {timeout_s:g} s"),
    ErrorRow(Failure.UNREACHABLE, _always, TemporaryLLMError,
             "cannot reach {where} ({unreachable_hint}{exc})"),
    ErrorRow(Failure.STATUS, _tools_refused, ToolsRefusedError,
             "{where} refused the tools offered natively (HTTP {status}): {detail}"),
    ErrorRow(Failure.STATUS, _status(429), ThrottledLLMError,
             "{where} is rate limiting (HTTP 429): {detail}"),
    ErrorRow(Failure.STATUS, _server_side, ThrottledLLMError,
             "{where} failed (HTTP {status}): {detail}"),
    ErrorRow(Failure.STATUS, _status(401), PermanentLLMError,
             "the API key was refused by {where} (HTTP 401): {detail}. Check the key stored in "
             "the OS keyring (or the KESTREL_<NAME> environment variable)."),
    ErrorRow(Failure.STATUS, _status(403), PermanentLLMError,
             "{where} refused access to the model {model!r} (HTTP 403): {detail}"),
    ErrorRow(Failure.STATUS, _status(404), PermanentLLMError,
             "{where} does not know the model {model!r} (HTTP 404: {detail}){not_found_hint}"),
    ErrorRow(Failure.STATUS, _status(402), PermanentLLMError,
             "{where} asks for payment (HTTP 402): {detail}"),
    ErrorRow(Failure.STATUS, _client_side, PermanentLLMError,
             "{where} refused the request (HTTP {status}): {detail}"),
    ErrorRow(Failure.STATUS, _always, PermanentLLMError,
             "{where} answered HTTP {status}: {detail}"),
    ErrorRow(Failure.BAD_FORMAT, _always, PermanentLLMError,
             "{where} sent an answer in an unexpected format: {exc}"),
    ErrorRow(Failure.MID_ANSWER, _always, TemporaryLLMError,
             "{where} reported an error mid-answer: {message}"),
    ErrorRow(Failure.STALLED, _always, TemporaryLLMError,
             "{where} stopped answering for {timeout_s:g} s"),
    ErrorRow(Failure.CONNECTION_LOST, _always, TemporaryLLMError,
             "the connection to {base_url} failed: {exc}"),
    ErrorRow(Failure.ANSWER_TIMEOUT, _always, TemporaryLLMError,
             "no complete answer from {base_url} within {timeout_s:g} s (the time limit of one "
             "answer); the connection was closed"),
    ErrorRow(Failure.CLIENT, _always, PermanentLLMError, "the {client} client failed: {exc}"),
)


def server_detail(body: object, fallback: str) -> str:
    """The server's own message from an error body (``{"error": {"message": ...}}``,
    ``{"message": ...}`` or plain text), else ``fallback``."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        said = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(said, str):
            return said
        said = body.get("message")
        if isinstance(said, str):
            return said
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return fallback


def facts_of(
    exc: BaseException, sdk: SdkErrors, *, base_url: str, model: str, timeout_s: float,
    offered_tools: bool = False,
) -> ErrorFacts:
    """Everything the table may need about ``exc``, read once."""
    failure = sdk.failure_of(exc)
    status, detail, retry_after = 0, "", None
    if failure is Failure.STATUS:
        status = int(getattr(exc, "status_code", 0))
        detail = server_detail(getattr(exc, "body", None), str(exc))
        response = getattr(exc, "response", None)
        retry_after = parse_retry_after(getattr(response, "headers", None))
    return ErrorFacts(
        failure=failure, where=f"the server at {base_url}", base_url=base_url, model=model,
        timeout_s=timeout_s, offered_tools=offered_tools, exc=str(exc),
        message=str(getattr(exc, "message", exc)), status=status, detail=detail,
        retry_after_s=retry_after, client=sdk.client, unreachable_hint=sdk.unreachable_hint,
        not_found_hint=sdk.not_found_hint,
    )


def row_for(facts: ErrorFacts) -> ErrorRow:
    """The first row of ``ERROR_TABLE`` for these facts (every failure ends in a catch-all)."""
    return next(row for row in ERROR_TABLE if row.failure is facts.failure and row.applies(facts))


def translate_error(
    exc: BaseException, sdk: SdkErrors, *, base_url: str, model: str, timeout_s: float,
    offered_tools: bool = False,
) -> LLMError:
    """The port error for one failure of ``sdk``'s client, in words that say what to do.

    Raises:
        TypeError: ``exc`` is not one of ``sdk.caught``.
    """
    facts = facts_of(exc, sdk, base_url=base_url, model=model, timeout_s=timeout_s,
                     offered_tools=offered_tools)
    return row_for(facts).build(sdk.provider, facts)
