"""The Trader policy: check its record, size by risk, order through the Risk Guard, protect, log.

A ``NEW_MARKET_ANALYSIS_SIGNAL`` task needs the symbol's ``trades.yaml`` and
``performance_summary.yaml`` (Part D's rule: memory before any decision), ``get_open_positions``
and ``get_account_balance``, each read with a call of its own (tagged in its thinking) unless the
task's data block carries it; then the decision:

- BUY while flat: size by risk (``sizing.py``), honour the memory rules, ``create_order``
  (MARKET, or LIMIT at the signal's price) with the stop and target in the reason; on success the
  trade goes into ``trades.yaml`` with its planned stop-loss and take-profit;
- BUY while long: no trade (no adding to an open position in the same direction);
- SELL while long: ``close_position`` (a SELL is an exit); SELL while flat: no trade (a spot
  account cannot sell short);

and every decision, taken or not, goes into the journal; an order is announced with
``send_notification`` (UI_ALERT and TRAY).

An ``ORDER_FILLED`` task protects an entry with ``set_position_tp_sl_orders`` at the planned
prices (or closes at once if the fill gapped through the stop) and records the fill; an exit
fill completes the trade in ``trades.yaml`` with its realised P&L and a reflection, and rewrites
``performance_summary.yaml``; past ``ROLL_AT`` closed trades it first moves the older ones to
``trades_archive/`` with a call of its own (written before the file is trimmed, their totals
kept under ``archived``). A Risk Guard refusal is recorded with its rule and reason and never
resent.

The records, the summary and the journal entry travel as blocks of the final answer
(``app.agents.answer_blocks``), which the runtime writes: a trade is the order, the notice and
the answer. ``blocks=False`` is the protocol before blocks (the cost baseline): each is a call of
its own, in base64, the journal entry before the notice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from app.agents.rules.calls import Answer, b64, call, final, memory_text
from app.agents.rules.rollover import free_name
from app.agents.rules.sizing import (
    STREAK,
    STREAK_CONFIDENCE,
    losing_streak,
    position_size,
    risk_adjustment,
)
from app.agents.rules.transcript import Step, Transcript
from app.domain.clock import ms_to_iso
from app.domain.numbers import plain
from app.memory.roles import (
    TradeRecord,
    TradesFile,
    load_yaml,
    performance_path,
    summarise,
    to_yaml,
    trades_archive_dir,
    trades_path,
)
from app.tools.protocol.result import Result

MODEL = "rules-trader-v1"
# trades.yaml keeps the open trades and the latest closed ones: past ROLL_AT closed trades, all but
# the latest KEEP_CLOSED move to an archive file, so the file (read on every signal, rewritten on
# every fill) stays near 60 KB instead of growing by about 1.2 KB a trade for ever
ROLL_AT = 50
KEEP_CLOSED = 25
SIGNAL = "NEW_MARKET_ANALYSIS_SIGNAL"
FILLED = "ORDER_FILLED"
EXITS = ("TAKE_PROFIT", "STOP_LOSS", "CLOSE")
NOTIFY_CHANNELS = ("channel", ["UI_ALERT", "TRAY"])
# the final answer's blocks: the symbol's trades.yaml and performance_summary.yaml rewritten whole,
# and the decision's journal entry
TRADES_BLOCK = "trades"
SUMMARY_BLOCK = "performance_summary"
JOURNAL_BLOCK = "journal"


def _dec(value: Any) -> Decimal | None:
    if value is None or value == "":
        return None
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def _places(text: Any) -> int:
    number = _dec(text)
    if number is None:
        return 2
    exponent = number.as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 2


def _round(value: Decimal, places: int) -> Decimal:
    return value.quantize(Decimal(1).scaleb(-places))


@dataclass(frozen=True, slots=True)
class Record:
    """The symbol's ``trades.yaml`` as read, or why it could not be used."""

    trades: TradesFile
    note: str = ""


def _read_trades(step: Step | None, symbol: str) -> Record:
    empty = TradesFile(symbol=symbol)
    if step is None or step.result is None or not step.result.ok:
        problem = step.result.problem() if step and step.result else "not read"
        return Record(empty, f"trades.yaml could not be read ({problem})")
    text = memory_text(step.result.first())
    if not text.strip():
        return Record(empty, "no trade history with this symbol yet")
    try:
        return Record(load_yaml(TradesFile, text))
    except ValueError as exc:
        return Record(empty, f"trades.yaml is unreadable and is left as it is ({str(exc)[:200]})")


class TraderPolicy:
    """The Trader's turns. ``blocks``: the record, the summary and the journal entry travel as
    blocks of the final answer, which the runtime writes; without, each is a call of its own,
    in base64, as before (the baseline the cost is measured against)."""

    def __init__(self, agent_id: str, config: Mapping[str, Any], *, blocks: bool = True) -> None:
        self.blocks = blocks
        self.agent_id = agent_id
        self.symbols = [str(s).upper() for s in config.get("symbols") or []]
        self.risk_pct = _dec(config.get("risk_per_trade_pct")) or Decimal(1)
        self.max_position_pct = _dec(config.get("max_position_pct")) or Decimal(20)
        self.default_stop_pct = _dec(config.get("default_stop_pct")) or Decimal(2)
        self.take_profit_r = _dec(config.get("take_profit_r")) or Decimal(2)
        self.order_type = str(config.get("order_type") or "MARKET").upper()

    def turn(self, t: Transcript) -> Answer:
        kind = t.task.task_type
        if kind == SIGNAL:
            return self._signal(t)
        if kind == FILLED:
            return self._filled(t)
        if t.task.is_user_message:
            return self._status(t)
        return final(
            f"The rule-engine trader acts on {SIGNAL} and {FILLED} tasks and answers plain "
            f"questions with its positions; a {kind} task is not one of them. Nothing done."
        )

    # -- a signal ------------------------------------------------------------------------------

    def _signal(self, t: Transcript) -> Answer:
        p = t.task.payload
        symbol = str(p.get("symbol") or "").upper()
        side = str(p.get("side") or "").upper()
        confidence = _dec(p.get("confidence"))
        problem = ""
        if not symbol:
            problem = "the signal names no symbol"
        elif side not in ("BUY", "SELL"):
            problem = f"side {side or '(none)'} is not BUY or SELL"
        elif confidence is None or not 0 <= confidence <= 1:
            problem = f"confidence {p.get('confidence')!r} is not a number from 0 to 1"
        elif self.symbols and symbol not in self.symbols:
            problem = f"{symbol} is not one of my symbols ({', '.join(self.symbols)})"
        if problem:
            return self._close_out(t, symbol or "?", f"Ignored a signal: {problem}.", None)
        assert confidence is not None
        try:
            key_path = trades_path(symbol)
        except ValueError as exc:
            return final(f"Ignored a signal: {exc}.")
        history = t.tagged("history") or t.carried(
            "read_agent_memory_file", file_path_read=key_path
        )
        if history is None:
            return call(
                "read_agent_memory_file", "history",
                f"{side} signal on {symbol} at confidence {confidence}. My record with "
                f"{symbol} comes first.", file_path=key_path,
            )
        performance = t.tagged("performance") or t.carried(
            "read_agent_memory_file", file_path_read=performance_path(symbol)
        )
        if performance is None:
            return call(
                "read_agent_memory_file", "performance",
                "And my performance summary with it.", file_path=performance_path(symbol),
            )
        positions = t.tagged("positions") or t.carried("get_open_positions")
        if positions is None:
            return call(
                "get_open_positions", "positions", f"Do I already hold {symbol}?", symbol=symbol,
            )
        balance = t.tagged("balance") or t.carried("get_account_balance")
        if balance is None:
            return call("get_account_balance", "balance", "Equity and cash, to size the order.")
        for step in (positions, balance):
            if step.result is None or not step.result.ok:
                problem = step.result.problem() if step.result else "no result"
                return self._close_out(
                    t, symbol, f"No trade: cannot decide, {step.name} failed ({problem}).", None
                )
        record = _read_trades(history, symbol)
        held = _position_size(positions.result, symbol)
        if side == "BUY" and held > 0:
            return self._close_out(
                t, symbol, f"No trade: I already hold {plain(held)} {symbol}; I do not add to an "
                "open position in the same direction.", None,
            )
        if side == "SELL":
            if held <= 0:
                return self._close_out(
                    t, symbol, f"No trade: a SELL signal while I hold no {symbol}, and this spot "
                    "account cannot sell short.", None,
                )
            return self._exit_on_signal(t, symbol, held, confidence)
        streak = losing_streak(record.trades)
        if streak >= STREAK and confidence < STREAK_CONFIDENCE:
            return self._close_out(
                t, symbol, f"No trade: my last {streak} trades with {symbol} lost, so I only take "
                f"signals of confidence {STREAK_CONFIDENCE} or more; this one is {confidence}.",
                None,
            )
        assert balance.result is not None  # checked with the positions' above
        return self._enter(t, symbol, confidence, record, balance.result)

    def _enter(
        self, t: Transcript, symbol: str, confidence: Decimal, record: Record, balance: Result
    ) -> Answer:
        p = t.task.payload
        entry = _dec(p.get("price"))
        if entry is None or entry <= 0:
            return self._close_out(t, symbol, "Ignored a BUY signal without a valid price.", None)
        places = _places(p.get("price"))
        stop = _dec(p.get("stop_loss"))
        if stop is None or not 0 < stop < entry:
            stop = _round(entry * (1 - self.default_stop_pct / 100), places)
        target = _dec(p.get("take_profit"))
        if target is None or target <= entry:
            target = _round(entry + (entry - stop) * self.take_profit_r, places)
        factor, why_factor = risk_adjustment(record.trades)
        equity = _dec(balance.attr("equity")) or Decimal(0)
        cash = _dec(balance.attr("cash")) or Decimal(0)
        order = t.tagged("order")
        step = order.params.get("quantity") if order is not None else None
        size = position_size(
            equity=equity, cash=cash, entry=entry, stop=stop, risk_pct=self.risk_pct * factor,
            max_position_pct=self.max_position_pct,
        )
        reasoning = (
            f"BUY {symbol}: signal confidence {confidence} from {t.task.source} "
            f"({str(p.get('reason') or '')[:300]}); {record.note or 'my record allows it'}"
            f"{'; ' + why_factor if why_factor else ''}; {size.explanation}; stop-loss "
            f"{plain(stop)}, take-profit {plain(target)}."
        )
        if size.quantity <= 0:
            return self._close_out(t, symbol, f"No trade: {reasoning}", None)
        if order is None:
            return self._order(symbol, size.quantity, entry, stop, target, reasoning, "order")
        result = order.result
        retry = t.tagged("order again")
        if result is not None and result.status == "error" and retry is None:
            requantised = _requantise(result, Decimal(str(step or size.quantity)))
            if requantised is not None:
                return self._order(symbol, requantised, entry, stop, target,
                                   f"{reasoning} Retried on the market's amount step.",
                                   "order again")
        final_order = retry or order
        outcome = final_order.result
        if outcome is None or not outcome.ok:
            problem = outcome.problem() if outcome else "no result"
            return self._close_out(t, symbol, f"Order not placed: {problem}. {reasoning}", None)
        order_id = outcome.attr("order_id") or ""
        quantity = _dec(final_order.params.get("quantity")) or size.quantity
        trade = TradeRecord(
            trade_id=order_id, side="BUY", quantity=quantity, entry_price=entry,
            opened_at=ms_to_iso(t.task.market_time_ms or 0), signal_source=_sender(t),
            signal=str(p.get("reason") or "")[:500], confidence=confidence,
            reasoning=reasoning, order_ids=[order_id], stop_loss=stop, take_profit=target,
        )
        trades = record.trades.upsert(trade)
        if not self.blocks and t.tagged("record") is None:
            return self._write_trades(symbol, trades, "record",
                                      f"Recording order {order_id} in my {symbol} trades.")
        message = (
            f"Placed {self.order_type} BUY {plain(quantity)} {symbol} (order {order_id}, "
            f"status {outcome.attr('status')}); stop-loss {plain(stop)}, take-profit "
            f"{plain(target)} once filled."
        )
        return self._close_out(t, symbol, f"{message} {reasoning}", message,
                               {TRADES_BLOCK: to_yaml(trades)})

    def _order(self, symbol: str, quantity: Decimal, entry: Decimal, stop: Decimal,
               target: Decimal, reasoning: str, tag: str) -> Answer:
        limit = self.order_type == "LIMIT"
        return call(
            "create_order", tag, reasoning, symbol=symbol, side="BUY",
            order_type=self.order_type, quantity=quantity, price=entry if limit else None,
            reason=f"signal entry; stop {plain(stop)}, target {plain(target)}",
        )

    def _exit_on_signal(
        self, t: Transcript, symbol: str, held: Decimal, confidence: Decimal
    ) -> Answer:
        closing = t.tagged("close")
        why = str(t.task.payload.get("reason") or "")[:300]
        reasoning = (
            f"SELL signal on {symbol} at confidence {confidence} from {t.task.source} while I "
            f"hold {plain(held)}: closing the position ({why})."
        )
        if closing is None:
            return call("close_position", "close", reasoning, symbol=symbol,
                        reason="analyst SELL signal")
        if closing.result is None or not closing.result.ok:
            problem = closing.result.problem() if closing.result else "no result"
            return self._close_out(t, symbol, f"Close not placed: {problem}. {reasoning}", None)
        order_id = closing.result.attr("order_id")
        message = f"Closing {plain(held)} {symbol} on a SELL signal (order {order_id})."
        return self._close_out(t, symbol, f"{message} {reasoning}", message)

    # -- a fill --------------------------------------------------------------------------------

    def _filled(self, t: Transcript) -> Answer:
        p = t.task.payload
        symbol = str(p.get("symbol") or "").upper()
        try:
            path = trades_path(symbol)
        except ValueError as exc:
            return final(f"Could not handle a fill: {exc}.")
        history = t.tagged("history") or t.carried("read_agent_memory_file", file_path_read=path)
        if history is None:
            return call(
                "read_agent_memory_file", "history",
                f"Order {p.get('order_id')} filled: {p.get('side')} {p.get('quantity')} {symbol} "
                f"at {p.get('price')}. Reading my trades with {symbol}.", file_path=path,
            )
        record = _read_trades(history, symbol)
        if str(p.get("exit_kind") or "NONE") in EXITS:
            return self._exit_fill(t, symbol, record)
        return self._entry_fill(t, symbol, record)

    def _entry_fill(self, t: Transcript, symbol: str, record: Record) -> Answer:
        p = t.task.payload
        price = _dec(p.get("price")) or Decimal(0)
        quantity = _dec(p.get("quantity")) or Decimal(0)
        order_id = str(p.get("order_id") or "")
        trade = next((x for x in record.trades.trades if order_id in x.order_ids), None)
        places = _places(p.get("price"))
        stop = trade.stop_loss if trade and trade.stop_loss else _round(
            price * (1 - self.default_stop_pct / 100), places)
        target = trade.take_profit if trade and trade.take_profit else _round(
            price + (price - stop) * self.take_profit_r, places)
        if str(p.get("side")).upper() != "BUY":
            return final(f"Recorded a {p.get('side')} fill of {symbol} with no exit kind; "
                         "nothing to protect.")
        protect = t.tagged("protect")
        if stop >= price:
            closing = t.tagged("close")
            why = (f"The entry filled at {plain(price)}, at or below the planned stop-loss "
                   f"{plain(stop)}: closing at once instead of protecting.")
            if closing is None:
                return call("close_position", "close", why, symbol=symbol,
                            reason="filled through the stop")
            return self._close_out(t, symbol, why, f"{symbol}: entry filled through the stop; "
                                   "closing the position.")
        if protect is None:
            return call(
                "set_position_tp_sl_orders", "protect",
                f"Entry filled at {plain(price)}: protecting the position with the planned "
                f"take-profit {plain(target)} and stop-loss {plain(stop)}.",
                symbol=symbol, take_profit_price=target, stop_loss_price=stop,
            )
        protected = protect.result is not None and protect.result.ok
        exit_ids = [
            v for v in (protect.result.attr("take_profit_order_id"),
                        protect.result.attr("stop_loss_order_id"))
            if v
        ] if protected and protect.result is not None else []
        fee = _dec(p.get("fee")) or Decimal(0)
        filled = TradeRecord(
            trade_id=trade.trade_id if trade else order_id, side="BUY",
            quantity=quantity, entry_price=price, opened_at=str(p.get("time")),
            fees=(trade.fees if trade else Decimal(0)) + fee,
            signal_source=trade.signal_source if trade else None,
            signal=trade.signal if trade else "", confidence=trade.confidence if trade else None,
            reasoning=trade.reasoning if trade else "an order placed outside a signal task",
            order_ids=list(dict.fromkeys([*(trade.order_ids if trade else [order_id]), *exit_ids])),
            stop_loss=stop, take_profit=target,
        )
        trades = record.trades.upsert(filled)
        if not self.blocks and t.tagged("record") is None:
            return self._write_trades(symbol, trades, "record",
                                      f"Recording the fill of order {order_id}.")
        left_out = protect.result.attr("note") if protected and protect.result else None
        if protected and left_out:
            message = (f"Bought {plain(quantity)} {symbol} at {plain(price)}; stop-loss "
                       f"{plain(stop)} set. {left_out}")
        elif protected:
            message = (f"Bought {plain(quantity)} {symbol} at {plain(price)}; take-profit "
                       f"{plain(target)}, stop-loss {plain(stop)} set.")
        else:
            problem = protect.result.problem() if protect.result else "no result"
            message = (f"Bought {plain(quantity)} {symbol} at {plain(price)} but could NOT set "
                       f"take-profit/stop-loss: {problem}. The position is unprotected.")
        return self._close_out(t, symbol, message, message, {TRADES_BLOCK: to_yaml(trades)})

    def _exit_fill(self, t: Transcript, symbol: str, record: Record) -> Answer:
        p = t.task.payload
        price = _dec(p.get("price")) or Decimal(0)
        pnl = _dec(p.get("realized_pnl"))
        fee = _dec(p.get("fee")) or Decimal(0)
        kind = str(p.get("exit_kind"))
        open_trades = [x for x in record.trades.trades if x.realized_pnl is None]
        trade = open_trades[-1] if open_trades else None
        if trade is None:
            text = (f"An exit fill of {symbol} ({kind}) at {plain(price)} matched no open trade "
                    "in my record; nothing to complete.")
            return self._close_out(t, symbol, text, None)
        if pnl is None:
            pnl = (price - trade.entry_price) * trade.quantity - trade.fees - fee
        risk = ((trade.entry_price - trade.stop_loss) * trade.quantity
                if trade.stop_loss else None)
        r_multiple = f" ({(pnl / risk):+.2f}R)" if risk else ""
        verdict = "won" if pnl > 0 else "lost"
        reflection = (
            f"{kind.replace('_', ' ').lower()} at {plain(price)}: {verdict} {abs(pnl):.2f}"
            f"{r_multiple} on a signal of confidence {trade.confidence}. "
            + ("The plan worked as set." if pnl > 0 else
               "The stop did its job; weigh similar signals with more care." if kind == "STOP_LOSS"
               else "Closed before the target.")
        )
        closed = trade.model_copy(update={
            "exit_price": price, "closed_at": str(p.get("time")), "fees": trade.fees + fee,
            "realized_pnl": pnl, "reflection": reflection,
            "order_ids": list(dict.fromkeys([*trade.order_ids, str(p.get("order_id"))])),
        })
        trades = record.trades.upsert(closed)
        if len(trades.closed_pnls) > ROLL_AT:
            moved = trades.oldest_closed(KEEP_CLOSED)
            path = _archive_path(moved, trades, symbol)
            archiving = t.tagged("archive")
            if archiving is None:
                archive = TradesFile(symbol=trades.symbol, trades=moved)
                return call(
                    "write_agent_memory_file", "archive",
                    f"My {symbol} record holds {len(trades.closed_pnls)} closed trades: moving "
                    f"the oldest {len(moved)} to {path} before I trim it.",
                    file_path=path, content_base64=b64(to_yaml(archive)), file_type_hint="YAML",
                )
            if archiving.result is not None and archiving.result.ok:
                trades = trades.without(moved, path)  # only what is safely archived leaves
        summary = to_yaml(summarise(trades, t.task.market_time_ms or 0))
        if not self.blocks:
            if t.tagged("record") is None:
                return self._write_trades(symbol, trades, "record",
                                          f"Completing trade {trade.trade_id}: {reflection}")
            if t.tagged("summary") is None:
                return call(
                    "write_agent_memory_file", "summary",
                    f"Updating my performance summary with {symbol}.",
                    file_path=performance_path(symbol), content_base64=b64(summary),
                    file_type_hint="YAML",
                )
        message = f"Closed {plain(trade.quantity)} {symbol}: {reflection}"
        return self._close_out(t, symbol, message, message,
                               {TRADES_BLOCK: to_yaml(trades), SUMMARY_BLOCK: summary})

    # -- status and endings --------------------------------------------------------------------

    def _status(self, t: Transcript) -> Answer:
        positions = t.tagged("positions")
        if positions is None:
            return call("get_open_positions", "positions", "The person asked: my positions first.")
        balance = t.tagged("balance")
        if balance is None:
            return call("get_account_balance", "balance", "And the account.")
        lines = []
        held = positions.result.first() if positions.result and positions.result.ok else None
        # a person reads this: money and percentages to the cent, prices as the market quotes
        # them (the tools' results keep every digit for the agents)
        if held is not None:
            for item in held:
                last = item.get("current_price") or ""
                lines.append(
                    f"{item.get('symbol')}: {item.get('size')} at "
                    f"{_like(item.get('avg_price'), last)}, last {last}, unrealized P&L "
                    f"{_cents(item.get('unrealized_pnl'))} ({_cents(item.get('weight_pct'))}% of "
                    "equity)"
                )
        if balance.result is not None and balance.result.ok:
            b = balance.result
            lines.append(
                f"Equity {_cents(b.attr('equity'))} {b.attr('quote_currency')}, cash "
                f"{_cents(b.attr('cash'))}, total P&L {_cents(b.attr('total_pnl'))}, max "
                f"drawdown {_cents(b.attr('max_drawdown_pct'))}%."
            )
        return final("\n".join(lines) or "No positions and no account data available.")

    def _write_trades(self, symbol: str, trades: TradesFile, tag: str, why: str) -> Answer:
        return call(
            "write_agent_memory_file", tag, why, file_path=trades_path(symbol),
            content_base64=b64(to_yaml(trades)), file_type_hint="YAML",
        )

    def _close_out(
        self, t: Transcript, symbol: str, decision: str, notice: str | None,
        records: Mapping[str, str] | None = None,
    ) -> Answer:
        """Notify when something was traded, then answer in one line; the decision goes into
        the journal and ``records`` (block name -> the file's new text) into memory as the
        answer's blocks. Without blocks, the journal entry is a call before the notice."""
        if not self.blocks and t.tagged("journal") is None:
            return call(
                "log_journal_entry", "journal", "Logging the decision and why.",
                content=f"{symbol}: {decision}",
            )
        if notice is not None and t.tagged("notify") is None:
            return call(
                "send_notification", "notify", "Telling the person what was traded.",
                channels=NOTIFY_CHANNELS, message_text=notice,
                subject_text=f"Trader: {symbol}", urgency_level="MEDIUM",
            )
        if not self.blocks:
            return final(decision)
        if not t.answered:
            return final(decision, {**(records or {}), JOURNAL_BLOCK: f"{symbol}: {decision}"})
        refused = [
            f"Could not write {name}: {step.result.problem()}."
            for name in (*(records or {}), JOURNAL_BLOCK)
            if (step := t.block(name)) is not None and step.result is not None
            and not step.result.ok
        ]
        return final(" ".join([decision, *refused]))


def _archive_path(moved: list[TradeRecord], trades: TradesFile, symbol: str) -> str:
    """``trades_archive/<first trade's date>_<last close's date>.yaml`` of the trades moved,
    numbered when an earlier roll-over already used the name."""
    first, last = moved[0].opened_at[:10], (moved[-1].closed_at or moved[-1].opened_at)[:10]
    taken = set(trades.archived.files) if trades.archived else set()
    return free_name(f"{trades_archive_dir(symbol)}/{first}_{last}", ".yaml", taken)


def _position_size(result: Result | None, symbol: str) -> Decimal:
    rows = result.first() if result is not None else None
    if rows is None:
        return Decimal(0)
    for item in rows:
        if str(item.get("symbol", "")).upper() == symbol:
            return _dec(item.get("size")) or Decimal(0)
    return Decimal(0)


def _sender(t: Transcript) -> str | None:
    source = t.task.source
    if source.startswith("agent:"):
        return source.removeprefix("agent:")
    sent_by = t.task.payload.get("analyst_agent_id")
    return str(sent_by) if sent_by else None


def _requantise(result: Result, quantity: Decimal) -> Decimal | None:
    """The quantity rounded down to the step an INVALID_ORDER names, if that is what failed."""
    if result.error_code != "INVALID_ORDER" or result.details.get("rule") != "amount_precision":
        return None
    step = _dec(result.details.get("step"))
    if step is None or step <= 0:
        return None
    rounded = (quantity // step) * step
    return rounded if rounded > 0 else None


def _cents(text: str | None) -> str:
    """A money amount or a percentage from a tool result, to two decimals, for a person."""
    try:
        return f"{Decimal(text or '').quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)}"
    except ArithmeticError:
        return text or "?"


def _like(text: str | None, model: str) -> str:
    """A price from a tool result with as many decimals as ``model`` (the market's last price,
    written at its precision)."""
    places = len(model.partition(".")[2]) if "." in model else 0
    try:
        return f"{Decimal(text or '').quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)}"
    except ArithmeticError:
        return text or "?"
