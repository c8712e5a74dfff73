"""What a failed or odd ``create_order`` means, sorted once at the border, and the answer check.

Sorting an order's failure is not the same as sorting a read's: a read that timed out is simply
asked again, but an order that timed out may have been booked, and sending it again could buy
twice. So every failure of ``create_order`` falls in one of three bins:

- REJECTED (definitive): the exchange answered and refused; nothing was booked. Insufficient
  funds, an invalid order, an unknown symbol, a refused key, a rate limit (429/418 are refused
  before the matching engine) and a refused timestamp (-1021). The exchange's reason goes to the
  agent in the error envelope.
- DUPLICATE: the exchange refused because it already has an order with this client id. ccxt calls
  this ``InvalidOrder`` on Binance, so the refusal's text is checked against the venue's markers
  (``client_ids``): the order exists and must be looked up, never marked rejected.
- AMBIGUOUS: no readable answer (timeout, network error, 5xx, a malformed body, a cancelled task,
  anything unexpected once the request may have left). The order is UNKNOWN until it is found by
  its client id; the agent is told its outcome is being checked, and nothing is resent.

``check_answer`` validates a 2xx answer: ccxt 4.5 returns an order whose id is ``None`` from a
body it could not read (a non-JSON page), without raising, although the exchange booked it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.ccxt.client_ids import ClientIdRules
from app.ccxt.errors import is_ccxt_error, translate
from app.domain.errors import ErrorCode, ToolError


class Outcome(StrEnum):
    REJECTED = "rejected"
    DUPLICATE = "duplicate"
    AMBIGUOUS = "ambiguous"


# The bin of a ccxt class, by the first class of its MRO found here (so a subclass ccxt adds
# later lands in its parent's bin): the NetworkError subclasses refused before the matching
# engine are rejections; the rest of the OperationFailed branch, and an exchange closed
# mid-request, are not answers; the ExchangeError branch is the exchange's refusal.
_BINS: dict[str, Outcome] = {
    "DuplicateOrderId": Outcome.DUPLICATE,
    "ChecksumError": Outcome.AMBIGUOUS,  # an InvalidNonce subclass, but a stream's, not a refusal
    "RateLimitExceeded": Outcome.REJECTED,
    "DDoSProtection": Outcome.REJECTED,
    "InvalidNonce": Outcome.REJECTED,
    "OperationFailed": Outcome.AMBIGUOUS,
    "ExchangeClosedByUser": Outcome.AMBIGUOUS,
    "BaseError": Outcome.REJECTED,
}
KNOWN_STATUSES = ("open", "closed", "canceled", "expired", "rejected")


def sort_failure(exc: BaseException, rules: ClientIdRules) -> Outcome:
    """The bin of an exception raised by ``exchange.create_order`` (see the module docstring)."""
    if not is_ccxt_error(exc):
        return Outcome.AMBIGUOUS
    if any(marker in str(exc) for marker in rules.duplicate_markers):
        return Outcome.DUPLICATE
    for klass in type(exc).__mro__:
        if klass.__module__.startswith("ccxt") and klass.__name__ in _BINS:
            return _BINS[klass.__name__]
    return Outcome.REJECTED


class OrderOutcomeUnknownError(ToolError):
    """The order may or may not have been placed; Kestrel is finding out. Never retry it.

    Deliberately not a ``TemporaryError``: no retrier may send the order again. The agent learns
    the order's fate from ``get_order_status`` or ``get_open_orders`` once it is resolved.
    """

    code = ErrorCode.EXCHANGE_ERROR


def unknown_outcome(
    exc: BaseException | None, venue: str, client_order_id: str, agent_order_id: str, why: str
) -> OrderOutcomeUnknownError:
    """The error envelope of an ambiguous create: what happened, and that it is being checked."""
    code = ErrorCode.EXCHANGE_ERROR
    cause: dict[str, Any] = {}
    if exc is not None and is_ccxt_error(exc):
        translated = translate(exc, venue, what="placing the order")
        code = translated.code
        cause = {"error_class": translated.details.get("error_class"),
                 "exchange_message": translated.details.get("exchange_message")}
    elif exc is not None:
        cause = {"error_class": type(exc).__name__}
    message = (
        f"{venue}: the order's outcome is unknown ({why}). It may have been placed. Kestrel is "
        f"checking with the exchange under client order id {agent_order_id!r} and will not send "
        "it again; see get_order_status or get_open_orders in a few seconds before deciding "
        "anything else about it."
    )
    return OrderOutcomeUnknownError(message, code=code, details={
        "exchange": venue, "outcome": "unknown", "client_order_id": agent_order_id,
        "exchange_client_order_id": client_order_id, "do_not_resend": True, **cause,
    })


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """Whether a 2xx answer to ``create_order`` proves the order exists.

    Attributes:
        ok: it names the order (an id) and is about our order (client id, when given, matches).
        why: what is wrong with it, in words, when not ``ok``.
    """

    ok: bool
    why: str = ""


def check_answer(answer: Any, client_order_id: str) -> AnswerCheck:
    if not isinstance(answer, Mapping):
        return AnswerCheck(False, f"the answer is not an order ({type(answer).__name__})")
    order_id = answer.get("id")
    if not isinstance(order_id, str | int) or str(order_id).strip() == "":
        return AnswerCheck(False, "the answer carries no order id (an unreadable body)")
    echoed = answer.get("clientOrderId")
    if echoed not in (None, "") and str(echoed) != client_order_id:
        return AnswerCheck(
            False, f"the answer is about client order id {echoed!r}, not {client_order_id!r}")
    return AnswerCheck(True)
