"""The one error tree of Kestrel and the protocol's error codes.

Tools raise ``ToolError`` subclasses carrying a protocol ``ErrorCode``; the executor renders them
into the ``<error_details>`` envelope. Foreign exceptions (ccxt, sqlite, OS) are translated at the
border, once, into one of these, so the code above never sees a library's exception type.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Error codes of the tool protocol (TOOLS_PART_B.md, last section)."""

    PARSE_ERROR = "PARSE_ERROR"
    # the server cut the answer at its token limit: nothing in it was run (Kestrel's own code)
    ANSWER_CUT = "ANSWER_CUT"
    MULTIPLE_TOOL_CALLS = "MULTIPLE_TOOL_CALLS"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    MISSING_PARAMETER = "MISSING_PARAMETER"
    INVALID_PARAMETER = "INVALID_PARAMETER"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    ACCESS_DENIED = "ACCESS_DENIED"
    NOT_FOUND = "NOT_FOUND"
    UNKNOWN_INDICATOR = "UNKNOWN_INDICATOR"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"
    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
    INVALID_ORDER = "INVALID_ORDER"
    EXCHANGE_ERROR = "EXCHANGE_ERROR"
    NETWORK_ERROR = "NETWORK_ERROR"
    RATE_LIMITED = "RATE_LIMITED"
    TIMEOUT = "TIMEOUT"
    INTERNAL_ERROR = "INTERNAL_ERROR"


class KestrelError(Exception):
    """Base of every error Kestrel raises on purpose."""


class OperationalError(KestrelError):
    """The environment is wrong and a person must act (bad config, corrupt file, no keyring)."""


class TemporaryError(KestrelError):
    """A transient failure that is worth retrying with backoff."""


class ToolError(KestrelError):
    """A tool call failed; rendered as ``<status>error</status>`` with this code and message.

    Args:
        code: the protocol error code.
        message: what was wrong and what would be right, in words the model can act on.
        details: specifics (parameter, allowed range, exchange error class), rendered as JSON.
    """

    code: ErrorCode = ErrorCode.INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details = dict(details or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.value}: {self.message})"


class ParseError(ToolError):
    code = ErrorCode.PARSE_ERROR


class UnknownToolError(ToolError):
    code = ErrorCode.UNKNOWN_TOOL


class MissingParameterError(ToolError):
    code = ErrorCode.MISSING_PARAMETER


class InvalidParameterError(ToolError):
    code = ErrorCode.INVALID_PARAMETER


class PermissionDeniedError(ToolError):
    code = ErrorCode.PERMISSION_DENIED


class AccessDeniedError(ToolError):
    code = ErrorCode.ACCESS_DENIED


class NotFoundError(ToolError):
    code = ErrorCode.NOT_FOUND


class UnknownIndicatorError(ToolError):
    code = ErrorCode.UNKNOWN_INDICATOR


class InsufficientDataError(ToolError):
    code = ErrorCode.INSUFFICIENT_DATA


class InsufficientFundsError(ToolError):
    code = ErrorCode.INSUFFICIENT_FUNDS


class InvalidOrderError(ToolError):
    code = ErrorCode.INVALID_ORDER


class ExchangeError(ToolError):
    code = ErrorCode.EXCHANGE_ERROR


class NetworkError(ToolError):
    code = ErrorCode.NETWORK_ERROR


class RateLimitedError(ToolError):
    code = ErrorCode.RATE_LIMITED


class ToolTimeoutError(ToolError):
    code = ErrorCode.TIMEOUT


# the rule under which a call is refused until a person approves it (order entry's approval
# policy); an agent's loop parks the task on it and asks the person
APPROVAL_RULE = "human_approval_required"


class RiskRejection(KestrelError):
    """The Risk Guard refused an order: rendered as ``<status>rejected</status>``, not as an error.

    Args:
        rule: the name of the rule that refused, e.g. ``max_position_weight``.
        reason: plain words with the numbers and the limit.
    """

    def __init__(self, rule: str, reason: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.rule = rule
        self.reason = reason
        self.details = dict(details or {})


class DataFileError(OperationalError):
    """A market data file is unusable; the message names the file, row and field."""
