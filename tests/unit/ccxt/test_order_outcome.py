"""How a failed create_order is sorted (rejected / duplicate / unknown) and how answers are read.

Every ccxt exception class is sorted, as the error table's own test does for reads: a class that
lands in the wrong bin either loses an order's refusal (shown as unknown) or, worse, calls an
order that may exist "rejected", which invites a second one.
"""

from __future__ import annotations

import ccxt
import pytest

from app.ccxt.client_ids import VENUES, derive, rules_for
from app.ccxt.outcome import Outcome, check_answer, sort_failure, unknown_outcome
from app.domain.errors import ErrorCode, TemporaryError

BINANCE = rules_for("binance")

AMBIGUOUS = ["NetworkError", "RequestTimeout", "ExchangeNotAvailable", "OnMaintenance",
             "BadResponse", "NullResponse", "OperationFailed", "CancelPending", "ChecksumError",
             "ExchangeClosedByUser"]
REJECTED = ["RateLimitExceeded", "DDoSProtection", "InvalidNonce", "InsufficientFunds",
            "InvalidOrder", "OrderNotFillable", "OrderImmediatelyFillable", "BadSymbol",
            "BadRequest", "ArgumentsRequired", "AuthenticationError", "PermissionDenied",
            "AccountSuspended", "AccountNotEnabled", "RestrictedLocation", "MarketClosed",
            "OperationRejected", "NotSupported", "ExchangeError", "ContractUnavailable",
            "ManualInteractionNeeded", "InvalidAddress"]


def every_ccxt_error() -> list[str]:
    return sorted(name for name in dir(ccxt) if isinstance(getattr(ccxt, name), type)
                  and issubclass(getattr(ccxt, name), ccxt.BaseError))


@pytest.mark.parametrize("name", AMBIGUOUS)
def test_no_readable_answer_leaves_the_order_unknown(name):
    assert sort_failure(getattr(ccxt, name)("binance boom"), BINANCE) is Outcome.AMBIGUOUS


@pytest.mark.parametrize("name", REJECTED)
def test_a_refusal_from_the_exchange_is_a_rejection(name):
    assert sort_failure(getattr(ccxt, name)("binance no"), BINANCE) is Outcome.REJECTED


def test_every_ccxt_exception_class_is_sorted_into_a_bin_on_purpose():
    sorted_here = set(AMBIGUOUS) | set(REJECTED) | {"DuplicateOrderId", "OrderNotFound",
                                                    "OrderNotCached", "BaseError"}
    unsorted = [n for n in every_ccxt_error() if n not in sorted_here]
    # a class ccxt adds later falls to its parent's bin; listing it here makes that a decision
    assert all(sort_failure(getattr(ccxt, n)("x"), BINANCE) in Outcome for n in unsorted)
    for name in every_ccxt_error():
        klass = getattr(ccxt, name)
        refused = (ccxt.RateLimitExceeded, ccxt.DDoSProtection, ccxt.InvalidNonce)
        if issubclass(klass, ccxt.OperationFailed) and (
            not issubclass(klass, refused) or klass is ccxt.ChecksumError
        ):
            assert sort_failure(klass("x"), BINANCE) is Outcome.AMBIGUOUS, name


def test_binances_duplicate_refusal_seen_by_ccxt_as_invalid_order_means_the_order_exists():
    exc = ccxt.InvalidOrder('binance {"code":-2010,"msg":"Duplicate order sent."}')
    assert sort_failure(exc, BINANCE) is Outcome.DUPLICATE
    assert sort_failure(ccxt.DuplicateOrderId("okx"), rules_for("okx")) is Outcome.DUPLICATE


@pytest.mark.parametrize("exc", [TypeError("parse"), KeyError("id"), RuntimeError("ours")])
def test_anything_else_once_the_request_may_have_left_is_unknown(exc):
    assert sort_failure(exc, BINANCE) is Outcome.AMBIGUOUS


def test_the_unknown_outcome_envelope_says_it_is_being_checked_and_is_never_retried():
    error = unknown_outcome(ccxt.RequestTimeout("binance timed out"), "binance", "kstx", "k-1",
                            "RequestTimeout while placing it")
    assert error.code is ErrorCode.TIMEOUT
    assert not isinstance(error, TemporaryError)
    assert "will not send it again" in error.message and "'k-1'" in error.message
    assert error.details["do_not_resend"] is True and error.details["outcome"] == "unknown"


@pytest.mark.parametrize("answer, ok", [
    ({"id": "123", "status": "open", "clientOrderId": "kstx"}, True),
    ({"id": "123", "status": None}, True),
    ({"id": None, "status": None, "info": "<html>"}, False),  # ccxt's order from a non-JSON body
    ({"id": "", "status": "open"}, False),
    ({"id": "9", "clientOrderId": "someone-else"}, False),
    ("<html>502</html>", False),
])
def test_an_answer_proves_the_order_only_when_it_names_it(answer, ok):
    assert check_answer(answer, "kstx").ok is ok


def test_client_order_ids_are_deterministic_short_and_valid_everywhere():
    one = derive("binance", "trader-1", "k-task-9:4")
    assert one == derive("binance", "trader-1", "k-task-9:4")
    assert one != derive("binance", "trader-2", "k-task-9:4")
    assert one != derive("binance", "trader-1", "k-task-9:5")
    assert len(one) == 24 and one.isalnum()
    for venue, rules in VENUES.items():
        assert rules.accepts(derive(venue, "a" * 200, "k-" + "x" * 500)), venue
    assert not VENUES["okx"].accepts("has-dash")
    assert not VENUES["binance"].accepts("x" * 37)


def test_an_agent_id_spelled_in_another_case_derives_the_same_client_order_id():
    # ids differ only in case name one agent: its repeated call must find its order, not send
    upper = derive("binance", "TRADER-1", "k-task-9:4")
    assert upper == derive("binance", "trader-1", "k-task-9:4")
