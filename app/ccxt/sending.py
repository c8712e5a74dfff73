"""Sending one order to the exchange and sorting its outcome, for ``CcxtBroker`` and OCO lists.

The request is sent once, carrying the client id the intent was journaled under;
``create_order`` is never retried. The outcome is sorted once (``outcome``): a refusal is
REJECTED with the exchange's reason in the error envelope; an answer that does not name the
order, or no answer at all, leaves the order UNKNOWN and the agent is told its outcome is being
checked; a refused duplicate client id means the order exists and is looked up. An order held by
the exchange's gate (a ban or a rate limit, ``gate.py``) was certainly not booked: NOT_SENT when
nothing left, REJECTED when its own answer closed the gate (``paused``). ``unknown_run`` counts
consecutive sends whose outcome was unknown (the kill switch reads it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from app.ccxt.announce import Announcer
from app.ccxt.client_ids import ClientIdRules
from app.ccxt.errors import RequestsPausedError, translate
from app.ccxt.order_sync import OrderSync
from app.ccxt.orders import to_order
from app.ccxt.outcome import Outcome, check_answer, sort_failure, unknown_outcome
from app.domain.clock import Clock
from app.domain.errors import ToolError
from app.domain.trading import Order, OrderType, Side
from app.store.order_journal import JournalEntry, JournalState, OrderJournal

logger = logging.getLogger(__name__)

StepHook = Callable[[str, JournalEntry], Awaitable[None]]
Read = Callable[[Callable[[], Awaitable[Any]], str], Awaitable[Any]]


class OrderSender:
    """Sends journaled orders of one exchange account and records what became of them.

    Args:
        on_step: awaited at "journaled" and "sending" (crash tests stop the process there).
        read: the broker's retried read, used to measure the exchange's clock after a refused
            timestamp.
    """

    def __init__(
        self,
        exchange: Any,
        journal: OrderJournal,
        sync: OrderSync,
        announce: Announcer,
        id_rules: ClientIdRules,
        clock: Clock,
        read: Read,
        on_step: StepHook | None = None,
    ) -> None:
        self.exchange = exchange
        self.journal = journal
        self.sync = sync
        self.announce = announce
        self.id_rules = id_rules
        self.clock = clock
        self.read = read
        self.on_step = on_step
        self.venue = str(exchange.id)
        self.unknown_run = 0  # consecutive sends whose outcome was unknown (the kill switch)

    async def step(self, name: str, entry: JournalEntry) -> None:
        if self.on_step is not None:
            await self.on_step(name, entry)

    async def send(self, entry: JournalEntry) -> Order:
        """Send the order once and sort what comes back (see the module docstring)."""
        try:
            answer = await self._create_request(entry)
        except asyncio.CancelledError:
            self.mark_unknown(entry, "the request was cancelled while in flight")
            raise
        except RequestsPausedError as error:
            self.paused(entry, error)
            raise
        except Exception as exc:
            outcome = sort_failure(exc, self.id_rules)
            if outcome is Outcome.REJECTED:
                refusal = translate(exc, self.venue, what=f"placing the {entry.symbol} order")
                self.journal.update(entry, state=JournalState.REJECTED,
                                    reason=refusal.message, updated_ms=self.clock.now_ms())
                self.unknown_run = 0
                if type(exc).__name__ == "InvalidNonce":
                    await self._resync_time()
                raise refusal from exc
            if outcome is Outcome.DUPLICATE:
                entry = self.mark_unknown(entry, "the exchange already has this client order id")
                return await self.settle_now(entry, exc, "the exchange already has this "
                                             "client order id")
            why = f"{type(exc).__name__} while placing it"
            self.mark_unknown(entry, why)
            self.unknown_run += 1
            self.announce.unknown(entry, why, self.unknown_run)
            raise unknown_outcome(
                exc, self.venue, entry.client_order_id, entry.agent_order_id, why) from exc
        check = check_answer(answer, entry.client_order_id)
        if not check.ok:
            self.mark_unknown(entry, check.why)
            self.unknown_run += 1
            self.announce.unknown(entry, check.why, self.unknown_run)
            raise unknown_outcome(
                None, self.venue, entry.client_order_id, entry.agent_order_id, check.why)
        self.unknown_run = 0
        entry = self.sync.record(entry, answer)
        self.announce.placed(to_order(entry))  # before its fills, as the exchange saw it
        entry = await self.sync.record_fills(entry, answer)
        return to_order(entry)

    async def _create_request(self, entry: JournalEntry) -> Any:
        params: dict[str, Any] = {self.id_rules.create_param: entry.client_order_id}
        kind = "limit" if entry.order_type in (OrderType.LIMIT, OrderType.STOP_LIMIT) else "market"
        if entry.stop_price is not None:
            params["stopPrice"] = float(entry.stop_price)
        side = entry.side.value.lower()
        price = None if entry.price is None else float(entry.price)
        if entry.quote_amount is not None and kind == "market" and entry.side is Side.BUY:
            return await self.exchange.create_market_buy_order_with_cost(
                entry.symbol, float(entry.quote_amount), params)
        return await self.exchange.create_order(
            entry.symbol, kind, side, float(entry.quantity), price, params)

    def paused(self, entry: JournalEntry, error: RequestsPausedError) -> JournalEntry:
        """Journal an order the exchange's gate held: never booked, so never UNKNOWN.

        Held before it left: NOT_SENT, the attempt taken back (no request left this process),
        and the run of unknown outcomes left as it is (nothing was learnt about the exchange).
        Its own answer closed the gate (418, 429): REJECTED, as any refusal, which ends the run.
        The same tool call may send it again once the gate opens.
        """
        now = self.clock.now_ms()
        logger.info("%s: order %s (%s) not placed: %s", self.venue, entry.agent_order_id,
                    entry.client_order_id, error.message)
        if error.answered:
            self.unknown_run = 0
            return self.journal.update(entry, state=JournalState.REJECTED, reason=error.message,
                                       updated_ms=now)
        return self.journal.update(entry, state=JournalState.NOT_SENT, reason=error.message,
                                   attempts=max(entry.attempts - 1, 0), updated_ms=now)

    def mark_unknown(self, entry: JournalEntry, why: str) -> JournalEntry:
        logger.warning("%s: order %s (%s) outcome unknown: %s", self.venue,
                       entry.agent_order_id, entry.client_order_id, why)
        return self.journal.update(entry, state=JournalState.UNKNOWN, reason=why,
                                   updated_ms=self.clock.now_ms())

    async def settle_now(
        self, entry: JournalEntry, exc: BaseException | None, why: str
    ) -> Order:
        """Look an in-flight order up once: its order when found, else the unknown-outcome
        error (the reconciler keeps looking)."""
        found = await self.sync.lookup(entry)
        if found is not None:
            entry = await self.sync.apply(entry, found)
            return to_order(entry)
        raise unknown_outcome(exc, self.venue, entry.client_order_id, entry.agent_order_id, why)

    async def _resync_time(self) -> None:
        """After a refused timestamp, measure the exchange's clock so the next request fits."""
        load = getattr(self.exchange, "load_time_difference", None)
        if load is None:
            return
        self.exchange.options["adjustForTimeDifference"] = True
        try:
            await self.read(load, "reading the exchange's clock")
        except ToolError as exc:
            logger.warning("%s: could not measure the exchange's clock: %s", self.venue, exc)
