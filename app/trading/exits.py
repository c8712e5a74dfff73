"""Moving a position's exits without leaving it unprotected when the new exit is refused.

``set_position_tp_sl_orders`` cancels the old take profit and stop loss before placing the new ones
(an exchange locks the coins of a resting sell, so the new one could not be placed beside it).
Everything is checked before the cancel, but an exchange can still refuse at placement: a rate
limit, a filter Kestrel does not model, a price that moved through the stop in between. The old
exit is then placed again, at its own prices, so a refused move leaves the position protected as it
was, and the error says so. If that fails too, the error says in plain words that the position has
no stop loss (or take profit) now. An order whose outcome is unknown is different: it may be
resting on the exchange, and putting the old exit back could sell the same coins twice, so nothing
is put back and the error says what to check.
"""

from __future__ import annotations

from decimal import Decimal

from app.domain.errors import KestrelError, RiskRejection, ToolError
from app.domain.market_rules import fmt
from app.domain.trading import ExitKind, Order, OrderType, Side
from app.trading.port import OrderRequest

_NAMES = {ExitKind.TAKE_PROFIT: "take profit", ExitKind.STOP_LOSS: "stop loss"}


def exit_name(kind: ExitKind) -> str:
    return _NAMES.get(kind, "exit")


def is_unknown_outcome(exc: BaseException) -> bool:
    """An order that may have been placed (its answer was lost): never to be doubled."""
    return isinstance(exc, ToolError) and exc.details.get("outcome") == "unknown"


def putting_back(old: Order, held: Decimal) -> OrderRequest:
    """The request that places a cancelled exit again as it was (type, prices, owner), for no
    more than is held now."""
    return OrderRequest(
        old.agent_id, old.symbol, Side.SELL, old.order_type, min(old.remaining, held),
        price=old.price if old.order_type is not OrderType.STOP else None,
        stop_price=old.stop_price, reduce_only=True, exit_kind=old.exit_kind,
        reason=f"{exit_name(old.exit_kind)} put back after a refused move",
    )


def _described(old: Order) -> str:
    level = old.stop_price if old.exit_kind is ExitKind.STOP_LOSS else old.price
    return f"{exit_name(old.exit_kind)} at {fmt(level) if level is not None else '?'}"


def move_refused(
    exc: KestrelError,
    cancelled: list[Order],
    restored: list[Order],
    lost: list[tuple[Order, KestrelError]],
) -> KestrelError:
    """``exc`` (the new exit's refusal) with what became of the exits cancelled before it."""
    sentences: list[str] = []
    if is_unknown_outcome(exc):
        for old in cancelled:
            sentences.append(
                f"The previous {_described(old)} was cancelled first and is not put back while "
                "this order's outcome is unknown (both could sell the same coins); if it turns "
                f"out not placed, the position has no {exit_name(old.exit_kind)}: set it again."
            )
    for new in restored:
        sentences.append(
            f"The previous {_described(new)} was cancelled first and has been placed again "
            f"(order {new.order_id}): it protects the position as before."
        )
    for old, why in lost:
        if is_unknown_outcome(why):
            sentences.append(
                f"The previous {_described(old)} was cancelled first; placing it again got no "
                "answer, so whether it is back is being checked: see get_open_orders before "
                "setting it again."
            )
            continue
        sentences.append(
            f"The previous {_described(old)} was cancelled first and could not be placed again "
            f"({why}): the position has NO {exit_name(old.exit_kind)} now. Set one with "
            "set_position_tp_sl_orders."
        )
    note = " ".join(sentences)
    facts = {
        "previous_exits_restored": [o.order_id for o in restored],
        "previous_exits_not_restored": [_described(o) for o, _ in lost],
    }
    if isinstance(exc, RiskRejection):
        return RiskRejection(exc.rule, f"{exc.reason} {note}".strip(), {**exc.details, **facts})
    if isinstance(exc, ToolError):
        moved = type(exc)(f"{exc.message} {note}".strip(), code=exc.code,
                          details={**exc.details, **facts})
        moved.__cause__ = exc
        return moved
    return exc


def subject_of(unprotected: list[tuple[Order, KestrelError]]) -> str:
    kinds = " and ".join(dict.fromkeys(exit_name(o.exit_kind) for o, _ in unprotected))
    return f"Kestrel: {unprotected[0][0].symbol} has no {kinds} now"


def _short(exc: BaseException, limit: int = 160) -> str:
    text = exc.message if isinstance(exc, ToolError) else str(exc)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unprotected_alert(
    unprotected: list[tuple[Order, KestrelError]], refused: KestrelError
) -> str:
    """What the person is told when a position is left without an exit it had: in a person's
    words (the agent's error names the tool to call)."""
    symbol = unprotected[0][0].symbol
    what = ", ".join(_described(old) for old, _ in unprotected)
    first = _short(refused)
    reasons = list(dict.fromkeys(_short(why) for _, why in unprotected))
    again = "for the same reason" if reasons == [first] else f"too ({'; '.join(reasons)})"
    return (
        f"The {symbol} position lost its {what}. It was cancelled to be moved, the exchange "
        f"refused the new order ({first}), and placing it again was refused {again}. Set a "
        "stop loss in the account panel, or close the position."
    )
