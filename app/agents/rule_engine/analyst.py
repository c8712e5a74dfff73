"""The Analyst policy: fetch, calculate, judge by the template's rules, signal, record.

For each symbol of the task (the ``RUN_ANALYSIS`` payload's, those named in a person's message,
or the configured ones) it needs, each named by a tag in its thinking so the next turn finds its
result, and each taken from the task's data block when the task carries it:

1. ``get_market_snapshot``: the market time and whether the newest candle is complete;
2. ``get_historical_klines`` (30 candles): observations, swing high and low;
3. ``calculate_technical_indicator`` for EMA (trend only), RSI, MACD and BBANDS, 3 values each,
   of which the last two complete ones are used;
4. ``dispatch_task_to_agent`` NEW_MARKET_ANALYSIS_SIGNAL to the configured Trader when the signal
   is BUY or SELL and its confidence reaches ``min_confidence``; without a Trader,
   ``send_notification`` instead.

Before the first symbol it reads ``current_market_assessment.yaml``. It ends with one line per
symbol, carrying as blocks (``app.agents.answer_blocks``) each symbol's entry of
``app.memory.roles`` for ``analysis_log.md`` and the assessment rewritten whole: a HOLD bar with
its data carried is one model call. When the log is full the runtime's append is refused; the
answer then comes back, and the log is rolled over to an archive file and started again with the
entries (``rollover.py``: read, list the archive, write the archive, write the log) before the
final line. A failing call is recorded as a NONE entry with the error, never retried blindly.
The rules themselves are in ``signals.py``.

``blocks=False`` is the protocol before answer blocks (the cost baseline): the entry is appended
with a call of its own before the signal, and the assessment rewritten with another, in base64.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from lxml import etree

from app.agents.rule_engine.calls import Answer, b64, call, final, indicator_call, memory_text
from app.agents.rule_engine.rollover import (
    ARCHIVE_DIR,
    archive_path,
    archived_paths,
    log_content,
    refused_as_full,
)
from app.agents.rule_engine.signals import (
    SWING_CANDLES,
    Assessment,
    Candle,
    Readings,
    assess_mean_reversion,
    assess_trend,
)
from app.agents.rule_engine.transcript import CACHED_TASKS, Step, TaskFacts, Transcript
from app.domain.clock import ms_to_iso
from app.domain.numbers import plain
from app.memory.roles import (
    ANALYSIS_LOG,
    MARKET_ASSESSMENT,
    AnalysisEntry,
    MarketAssessment,
    Signal,
    SymbolAssessment,
    load_yaml,
    render_analysis_entry,
    to_yaml,
)
from app.tools.protocol.result import Result

TREND = "rules-analyst-trend-v1"
MEAN_REVERSION = "rules-analyst-meanreversion-v1"
MODELS = (TREND, MEAN_REVERSION)
RUN_ANALYSIS = "RUN_ANALYSIS"
SIGNAL_TASK = "NEW_MARKET_ANALYSIS_SIGNAL"
KLINES = 30
VALUES = 3
SYMBOL_IN_TEXT = re.compile(r"\b([A-Za-z0-9]{2,12}/[A-Za-z0-9]{2,12})\b")
# assessments (and their converted rows) kept for the later turns of the tasks in progress (a
# task reads up to five results); each entry keeps its results' XML trees alive
CACHED_RESULTS = 8 * CACHED_TASKS
LOG_BLOCK = "analysis_log"  # the final answer's block appended to analysis_log.md
ASSESSMENT_BLOCK = "assessment"  # ... and the one that rewrites current_market_assessment.yaml
INTERVAL_MS = {"1m": 60_000, "5m": 300_000, "15m": 900_000, "30m": 1_800_000,
               "1h": 3_600_000, "4h": 14_400_000, "1d": 86_400_000, "1w": 604_800_000}


class _Failed:
    """A symbol whose analysis could not finish: the step and the tool's words."""

    def __init__(self, what: str, result: Result) -> None:
        self.text = f"{what} failed: {result.problem()}"


def _decimal(value: Any, default: Decimal) -> Decimal:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return default


def _symbols(t: Transcript, config: Mapping[str, Any]) -> list[str]:
    configured = [str(s) for s in config.get("symbols") or []]
    if t.task.task_type == RUN_ANALYSIS:
        symbol = t.task.payload.get("symbol")
        return [str(symbol)] if symbol else configured
    named = [m.upper() for m in SYMBOL_IN_TEXT.findall(t.task.text)]
    return list(dict.fromkeys(named)) or configured


def _carried_indicator(
    t: Transcript, name: str, symbol: str, interval: str, params: Mapping[str, Any]
) -> Step | None:
    """The indicator the task carried with exactly these parameters (compared as numbers: the
    tool writes ``std=2`` for 2.0), or None."""
    step = t.carried("calculate_technical_indicator", name=name, symbol=symbol,
                     interval=interval)
    first = step.result.first() if step is not None and step.result is not None else None
    if first is None:
        return None
    carried: dict[str, Decimal] = {}
    for pair in (first.get("params") or "").split(","):
        key, _, value = pair.partition("=")
        carried[key.strip()] = _decimal(value, Decimal(-1))
    wanted = {key: _decimal(value, Decimal(-2)) for key, value in params.items()}
    return step if all(carried.get(k) == v for k, v in wanted.items()) else None


def _snapshot(t: Transcript, symbol: str, interval: str) -> Step | None:
    """The market snapshot of ``symbol``: the engine's own call's, else the task's carried one."""
    return t.tagged(f"snapshot {symbol}") or t.carried(
        "get_market_snapshot", symbol=symbol, interval=interval
    )


@lru_cache(maxsize=CACHED_RESULTS)
def _last_complete(
    result: Result, now_ms: int, interval_ms: int, count: int
) -> tuple[dict[str, Decimal], ...]:
    """The last ``count`` points of complete candles (open time + interval <= now) of a result,
    oldest first, as decimals; the points before them are not converted. The rules read an
    indicator's last two values and the last ``SWING_CANDLES`` candles, of the dozens a result
    carries. Cached: every turn of a task reads the same results again (``parse_result`` hands
    back the same ``Result`` for the same text); the rows are shared and only read."""
    root = result.first()
    last: list[etree._Element] = []
    for point in reversed(root if root is not None else ()):
        if int(point.get("timestamp_ms", "0")) + interval_ms <= now_ms:
            last.append(point)
            if len(last) == count:
                break
    return tuple(
        {key: Decimal(value) for key, value in point.attrib.items() if key != "time_iso"}
        for point in reversed(last)
    )


@dataclass(frozen=True, slots=True)
class _Rules:
    """The settings an assessment depends on (a cache key)."""

    trend: bool
    rsi_period: int
    overbought: Decimal
    oversold: Decimal
    macd: tuple[int, int, int]  # fast, slow, signal
    bb_length: int
    bb_std: Decimal
    ema_period: int


@lru_cache(maxsize=CACHED_RESULTS)
def _judge(
    rules: _Rules, klines: Result, results: tuple[tuple[str, Result], ...], now_ms: int,
    interval_ms: int,
) -> Assessment | _Failed:
    """The assessment from the candles and indicator results, once each has two complete
    values. A pure function of its arguments, cached for the task's later turns, which ask
    again with the same results."""
    values = {key: _last_complete(result, now_ms, interval_ms, 2) for key, result in results}
    candles = [
        Candle(int(row["timestamp_ms"]), row["open"], row["high"], row["low"], row["close"],
               row["volume"])
        for row in _last_complete(klines, now_ms, interval_ms, SWING_CANDLES)
    ]
    if len(candles) < 2:
        return _Failed("get_historical_klines", Result(
            "error", error_code="INSUFFICIENT_DATA", message="fewer than two complete candles"
        ))
    fast, slow, signal = rules.macd
    labels = {
        "rsi": f"RSI({rules.rsi_period})",
        "macd": f"MACD({fast},{slow},{signal})",
        "bbands": f"BBANDS({rules.bb_length},{plain(rules.bb_std)})",
        "ema": f"EMA({rules.ema_period})",
    }
    readings = Readings(
        candles=candles,
        rsi=(values["rsi"][0]["value"], values["rsi"][1]["value"]),
        macd=(values["macd"][0], values["macd"][1]),
        bbands=(values["bbands"][0], values["bbands"][1]),
        ema=(values["ema"][0]["value"], values["ema"][1]["value"]) if "ema" in values else None,
        labels=labels,
    )
    if rules.trend:
        return assess_trend(readings, rules.overbought, rules.oversold)
    return assess_mean_reversion(readings, rules.overbought, rules.oversold)


# (rules, symbol, interval, id(task)) -> (task, snapshot, outcome): the outcomes computed from a
# task's data block alone, for the task's later turns; the task and snapshot are kept, so the id
# stays theirs and a hit is checked to be them. As many as the tasks in progress the parsed
# tasks' cache holds (each keeps its results' XML trees alive), oldest dropped first
# (an OrderedDict: a plain dict's first key is found by walking past every key deleted before it)
_FROM_TASK_DATA: OrderedDict[
    tuple[_Rules, str, str, int], tuple[TaskFacts, Result, Assessment | _Failed]
] = OrderedDict()
_FROM_TASK_DATA_LOCK = threading.Lock()  # a backtest may run on a thread beside the desk


@dataclass(frozen=True, slots=True)
class _Analysed:
    """One symbol analysed: its outcome, the Trader it was sent to (or why not), its log entry
    and the market time it was made at."""

    symbol: str
    outcome: Assessment | _Failed
    sent: str | None
    entry: str
    now_ms: int


def logged_base64(step: Step) -> str:
    """The entry an ``append_to_agent_memory_file`` call of the engine's carried, as base64."""
    return str(step.params.get("content_to_append_base64") or "")


class AnalystPolicy:
    """The Analyst's turns. ``blocks``: end with the final answer carrying the log entry and the
    assessment as blocks the runtime writes (one model call for a HOLD bar); without, append and
    rewrite with calls of their own, in base64, as before (the baseline the cost is measured
    against)."""

    def __init__(
        self, model: str, agent_id: str, config: Mapping[str, Any], *, blocks: bool = True
    ) -> None:
        self.blocks = blocks
        self.trend = model == TREND
        self.agent_id = agent_id
        self.config = config
        self.interval = str(config.get("interval") or "1h")
        self.rsi_period = int(config.get("rsi_period", 14))
        self.overbought = _decimal(config.get("rsi_overbought"), Decimal(70))
        self.oversold = _decimal(config.get("rsi_oversold"), Decimal(30))
        self.macd = {"fast": int(config.get("macd_fast", 12)),
                     "slow": int(config.get("macd_slow", 26)),
                     "signal": int(config.get("macd_signal", 9))}
        bb_length = int(config.get("bb_period", 20))
        bb_std = _decimal(config.get("bb_std"), Decimal(2))
        self.bbands = {"length": bb_length, "std": bb_std}
        self.ema_period = int(config.get("trend_ema_period", 50))
        self.min_confidence = _decimal(config.get("min_confidence"), Decimal("0.6"))
        self.trader = str(config.get("trader_agent_id") or "")
        self.strategy = "Trend Following" if self.trend else "Mean Reversion"
        self.rules = _Rules(
            self.trend, self.rsi_period, self.overbought, self.oversold,
            (self.macd["fast"], self.macd["slow"], self.macd["signal"]),
            bb_length, bb_std, self.ema_period,
        )
        # (tag key, indicator, parameters) of each indicator the assessment reads, in the
        # order they are asked for; the keys also tell ``_calculate`` which calls of its own
        # the task may have made
        self.indicators: list[tuple[str, str, dict[str, Any]]] = [
            *([("ema", "EMA", {"length": self.ema_period})] if self.trend else []),
            ("rsi", "RSI", {"length": self.rsi_period}),
            ("macd", "MACD", dict(self.macd)),
            ("bbands", "BBANDS", dict(self.bbands)),
        ]

    # -- the plan ------------------------------------------------------------------------------

    def turn(self, t: Transcript) -> Answer:
        if t.task.task_type not in (RUN_ANALYSIS, "USER_MESSAGE"):
            return final(
                f"The rule-engine analyst handles {RUN_ANALYSIS} tasks and plain requests such as "
                f"'analyse BTC/USDT'; a {t.task.task_type} task is not one of them. Nothing done."
            )
        symbols = _symbols(t, self.config)
        if not symbols:
            return final(
                "No symbol to analyse: none was named and none is configured. Name one, e.g. "
                "'analyse BTC/USDT'."
            )
        interval = str(t.task.payload.get("interval") or self.interval)
        if interval not in INTERVAL_MS:
            return final(
                f"Cannot analyse on interval {interval!r}: use one of {', '.join(INTERVAL_MS)}."
            )
        read = t.tagged("read assessment") or t.carried(
            "read_agent_memory_file", file_path_read=MARKET_ASSESSMENT
        )
        if read is None:
            return call(
                "read_agent_memory_file", "read assessment",
                "My latest view comes first, so this analysis updates it rather than starting "
                "over.", file_path=MARKET_ASSESSMENT,
            )
        outcomes: list[_Analysed] = []
        for symbol in symbols:
            step = self._analyse(t, symbol, interval)
            if isinstance(step, Answer):
                return step
            outcomes.append(step)
        assessments = {o.symbol: o.outcome for o in outcomes if isinstance(o.outcome, Assessment)}
        if self.blocks:
            return self._answer(t, read.result, outcomes, assessments, interval)
        written = t.tagged("write assessment")
        if written is None and assessments:
            return self._write_assessment(t, read.result, assessments, interval)
        lines = []
        for o in outcomes:
            lines.append(self._line(o.symbol, interval, o.outcome, o.sent))
            lines += self._log_note(t, o.symbol, t.tagged(f"log {o.symbol}"))
        if written is not None and written.result is not None and not written.result.ok:
            lines.append(f"Could not rewrite {MARKET_ASSESSMENT}: {written.result.problem()}")
        return final("\n".join(lines))

    def _answer(
        self, t: Transcript, read: Result | None, outcomes: Sequence[_Analysed],
        assessments: Mapping[str, Assessment], interval: str,
    ) -> Answer:
        """The final answer, its entries and the rewritten assessment as blocks the runtime
        writes; when one of them was refused, the roll-over of a full log, then the answer
        saying what became of them."""
        lines = [self._line(o.symbol, interval, o.outcome, o.sent) for o in outcomes]
        entries = "".join(o.entry for o in outcomes)
        if not t.answered:
            blocks = {LOG_BLOCK: entries}
            if assessments:
                blocks[ASSESSMENT_BLOCK] = self._assessment_yaml(t, read, assessments, interval)
            return final("\n".join(lines), blocks)
        logged = t.block(LOG_BLOCK)
        if logged is not None:
            rolling = self._roll(t, "log", logged, b64(entries), outcomes[-1].now_ms)
            if rolling is not None:
                return rolling
            lines += self._log_note(t, "log", logged)
        written = t.block(ASSESSMENT_BLOCK)
        if written is not None and written.result is not None and not written.result.ok:
            lines.append(f"Could not rewrite {MARKET_ASSESSMENT}: {written.result.problem()}")
        return final("\n".join(lines))

    def _analyse(
        self, t: Transcript, symbol: str, interval: str
    ) -> Answer | _Analysed:
        """The next call for ``symbol``, or its outcome once every call has been answered."""
        snap = _snapshot(t, symbol, interval)
        if snap is None:
            return call(
                "get_market_snapshot", f"snapshot {symbol}",
                f"Analysing {symbol} on {interval}: first the market time and the current bar.",
                symbol=symbol, interval=interval,
            )
        outcome: Assessment | _Failed | None = None
        if snap.result is None or not snap.result.ok:
            outcome = _Failed("get_market_snapshot", snap.result or Result("error"))
        else:
            outcome_or_call = self._calculate(t, symbol, interval, snap.result)
            if isinstance(outcome_or_call, Answer):
                return outcome_or_call
            outcome = outcome_or_call
        now_ms = int(snap.result.attr("time_ms") or 0) if snap.result and snap.result.ok else 0
        sending = self._should_send(outcome)
        entry = self._entry(symbol, interval, now_ms, outcome, sending)
        if not self.blocks:  # the entry is a call of its own, before the signal
            logged = t.tagged(f"log {symbol}")
            if logged is None:
                return self._log(symbol, entry, outcome)
            rolling = self._roll(t, symbol, logged, logged_base64(logged), now_ms)
            if rolling is not None:
                return rolling
        done = _Analysed(symbol, outcome, None, entry, now_ms)
        if not isinstance(outcome, Assessment) or outcome.signal not in (Signal.BUY, Signal.SELL):
            return done
        if sending:
            sent = t.tagged(f"dispatch {symbol}")
            if sent is None:
                return self._dispatch(symbol, interval, now_ms, outcome)
            if sent.result is not None and sent.result.ok:
                return replace(done, sent=self.trader)
            return replace(
                done, sent="failed: " + (sent.result.problem() if sent.result else "no result")
            )
        if not self.trader and outcome.confidence >= self.min_confidence:
            noted = t.tagged(f"notify {symbol}")
            if noted is None:
                return self._notify(symbol, interval, outcome)
        return done

    def _calculate(
        self, t: Transcript, symbol: str, interval: str, snapshot: Result
    ) -> Answer | Assessment | _Failed:
        """The assessment of ``symbol``, or the call still needed for it.

        When the task's data block carried every input (no call of the task's own fetched one),
        the outcome is a function of the task, the snapshot and the rules alone; the later turns
        of the task (recording, writing, answering) ask again, and get it from
        ``_FROM_TASK_DATA`` instead of reading the carried results again.
        """
        keys = ("klines", *(key for key, _name, _params in self.indicators))
        if any(t.tagged(f"{key} {symbol}") is not None for key in keys):
            return self._calculate_from(t, symbol, interval, snapshot)
        memo_key = (self.rules, symbol, interval, id(t.task))
        with _FROM_TASK_DATA_LOCK:
            known = _FROM_TASK_DATA.get(memo_key)
        if known is not None and known[0] is t.task and known[1] is snapshot:
            return known[2]
        outcome = self._calculate_from(t, symbol, interval, snapshot)
        if not isinstance(outcome, Answer):
            with _FROM_TASK_DATA_LOCK:
                _FROM_TASK_DATA[memo_key] = (t.task, snapshot, outcome)
                while len(_FROM_TASK_DATA) > CACHED_TASKS:
                    _FROM_TASK_DATA.popitem(last=False)
        return outcome

    def _calculate_from(
        self, t: Transcript, symbol: str, interval: str, snapshot: Result
    ) -> Answer | Assessment | _Failed:
        klines = t.tagged(f"klines {symbol}") or t.carried(
            "get_historical_klines", symbol=symbol, interval=interval
        )
        if klines is None:
            return call(
                "get_historical_klines", f"klines {symbol}",
                f"The last {KLINES} candles of {symbol} {interval}, for the swing high and low.",
                symbol=symbol, interval=interval, limit=KLINES,
            )
        if klines.result is None or not klines.result.ok:
            return _Failed("get_historical_klines", klines.result or Result("error"))
        now_ms = int(snapshot.attr("time_ms") or 0)
        interval_ms = INTERVAL_MS[interval]
        results: list[tuple[str, Result]] = []
        for key, name, params in self.indicators:
            got = t.tagged(f"{key} {symbol}") or _carried_indicator(
                t, name, symbol, interval, params
            )
            if got is None:
                shown = ",".join(plain(Decimal(str(v))) for v in params.values())
                return indicator_call(
                    f"{key} {symbol}", f"{name}({shown}) of {symbol} {interval}.",
                    symbol, interval, name, params, VALUES,
                )
            if got.result is None or not got.result.ok:
                return _Failed(f"{name}", got.result or Result("error"))
            if len(_last_complete(got.result, now_ms, interval_ms, 2)) < 2:
                return _Failed(name, Result(
                    "error", error_code="INSUFFICIENT_DATA",
                    message=f"fewer than two complete {name} values yet",
                ))
            results.append((key, got.result))
        return _judge(self.rules, klines.result, tuple(results), now_ms, interval_ms)

    def _should_send(self, outcome: Assessment | _Failed) -> bool:
        return (
            isinstance(outcome, Assessment) and bool(self.trader)
            and outcome.signal in (Signal.BUY, Signal.SELL)
            and outcome.confidence >= self.min_confidence
        )

    # -- the calls that record and signal ------------------------------------------------------

    def _entry(
        self, symbol: str, interval: str, now_ms: int, outcome: Assessment | _Failed, sending: bool
    ) -> str:
        """The symbol's ``analysis_log.md`` entry (``app.memory.roles``), as written."""
        if isinstance(outcome, Assessment):
            entry = AnalysisEntry(
                time=ms_to_iso(now_ms), symbol=symbol, interval=interval, signal=outcome.signal,
                confidence=outcome.confidence, indicators=dict(outcome.indicators),
                observations=outcome.observations,
                reasoning=f"{self.strategy} rules (rule engine): " + "; ".join(outcome.reasons),
                dispatched_to=self.trader if sending else None,
            )
        else:
            entry = AnalysisEntry(
                time=ms_to_iso(now_ms), symbol=symbol, interval=interval, signal=Signal.NONE,
                confidence=Decimal(0), reasoning=f"No analysis: {outcome.text}",
            )
        return render_analysis_entry(entry)

    @staticmethod
    def _log(symbol: str, entry: str, outcome: Assessment | _Failed) -> Answer:
        if isinstance(outcome, Assessment):
            why = (f"{symbol}: {outcome.signal.value} with confidence {outcome.confidence}. "
                   "Recording the analysis before anything else.")
        else:
            why = f"{symbol}: the analysis could not finish ({outcome.text}); recording why."
        return call(
            "append_to_agent_memory_file", f"log {symbol}", why, file_path=ANALYSIS_LOG,
            content_to_append_base64=b64(entry),
        )

    def _roll(
        self, t: Transcript, key: str, logged: Step, restart_base64: str, now_ms: int
    ) -> Answer | None:
        """The next call of rolling a full log over (``rollover.py``), or None: the log took the
        entry, the roll is done, or a step of it failed (the final answer says which). ``key``
        names the roll's steps (``roll <key> read``...); the log starts again with
        ``restart_base64``, the entries it refused."""
        if not refused_as_full(logged.result, ANALYSIS_LOG):
            return None
        read = t.tagged(f"roll {key} read")
        if read is None:
            return call(
                "read_agent_memory_file", f"roll {key} read",
                f"{ANALYSIS_LOG} is full ({logged.result.problem() if logged.result else ''}). "
                "Its entries move to an archive file first, then the log starts again with this "
                "entry.", file_path=ANALYSIS_LOG,
            )
        log = log_content(read.result) if read.result is not None else None
        if log is None:
            return None
        listed = t.tagged(f"roll {key} list")
        if listed is None:
            return call(
                "list_agent_memory_files", f"roll {key} list",
                "The archives I already have, so this one gets a name of its own.",
                folder=ARCHIVE_DIR,
            )
        archived = t.tagged(f"roll {key} archive")
        if archived is None:
            taken = archived_paths(listed.result) if listed.result is not None else frozenset()
            path = archive_path(log, taken, ms_to_iso(now_ms)[:10])
            return call(
                "write_agent_memory_file", f"roll {key} archive",
                f"Archiving the {log.entries} entries ({log.size} bytes) of {ANALYSIS_LOG} "
                f"unchanged in {path}.", file_path=path, content_base64=log.content_base64,
            )
        if archived.result is None or not archived.result.ok:
            return None
        if t.tagged(f"roll {key} restart") is None:
            return call(
                "write_agent_memory_file", f"roll {key} restart",
                f"The entries are safe in {archived.params.get('file_path')}: {ANALYSIS_LOG} "
                "starts again with this analysis.", file_path=ANALYSIS_LOG,
                content_base64=restart_base64,
            )
        return None

    @staticmethod
    def _log_note(t: Transcript, key: str, logged: Step | None) -> list[str]:
        """What became of the log entry, when it is not simply appended."""
        if logged is None or logged.result is None or logged.result.ok:
            return []
        if not refused_as_full(logged.result, ANALYSIS_LOG):
            return [f"Could not record the analysis in {ANALYSIS_LOG}: "
                    f"{logged.result.problem()}"]
        steps = [t.tagged(f"roll {key} {name}") for name in ("read", "archive", "restart")]
        _, archived, restarted = steps
        if restarted is not None and restarted.result is not None and restarted.result.ok:
            assert archived is not None
            return [f"{ANALYSIS_LOG} was full: its entries are archived in "
                    f"{archived.params.get('file_path')} and it starts again with this entry."]
        failed = next((s for s in steps if s is not None and s.result is not None
                       and not s.result.ok), None)
        if failed is not None and failed.result is not None:
            why = failed.result.problem()
        else:
            why = "it holds nothing to archive"
        return [f"{ANALYSIS_LOG} is full and could not be rolled over ({why}); this analysis "
                "is not recorded, and the log is left as it was."]

    def _dispatch(self, symbol: str, interval: str, now_ms: int, a: Assessment) -> Answer:
        payload = {
            "symbol": symbol, "side": a.signal.value, "confidence": plain(a.confidence),
            "price": plain(a.price), "stop_loss": plain(a.stop_loss) if a.stop_loss else None,
            "take_profit": plain(a.take_profit) if a.take_profit else None,
            "reason": "; ".join(a.reasons), "interval": interval,
            "signal_time": ms_to_iso(now_ms), "analyst_agent_id": self.agent_id,
        }
        return call(
            "dispatch_task_to_agent", f"dispatch {symbol}",
            f"Confidence {a.confidence} reaches {self.min_confidence}: the signal goes to the "
            "Trader, which decides.",
            target_agent_id=self.trader, task_type=SIGNAL_TASK, task_payload_json=payload,
            reply_expected=False,
        )

    def _notify(self, symbol: str, interval: str, a: Assessment) -> Answer:
        return call(
            "send_notification", f"notify {symbol}",
            "No Trader is linked to me, so the signal is only reported.",
            channels=("channel", ["UI_ALERT"]),
            message_text=(
                f"{a.signal.value} signal on {symbol} {interval} at {plain(a.price)} (confidence "
                f"{a.confidence}); no Trader is linked, so nothing was traded. "
                + "; ".join(a.reasons)
            ),
            subject_text=f"{self.strategy} signal: {a.signal.value} {symbol}",
            urgency_level="MEDIUM",
        )

    def _assessment_yaml(
        self, t: Transcript, read: Result | None, assessments: Mapping[str, Assessment],
        interval: str,
    ) -> str:
        """``current_market_assessment.yaml`` with these assessments: the file as read, each
        symbol's entry replaced (a file that does not parse is replaced whole)."""
        previous: MarketAssessment | None = None
        if read is not None and read.ok:
            text = memory_text(read.first())
            if text.strip():
                try:
                    previous = load_yaml(MarketAssessment, text)
                except ValueError:
                    previous = None
        stamp = self._assessed_at(t, assessments, interval)
        document = previous or MarketAssessment(updated_at=stamp)
        for symbol, a in assessments.items():
            document = document.with_symbol(symbol, SymbolAssessment(
                trend=a.trend, regime=a.regime, bias=a.signal, confidence=a.confidence,
                support=list(a.support), resistance=list(a.resistance),
                indicators=dict(a.indicators), summary="; ".join(a.reasons),
                assessed_at=stamp,
            ))
        return to_yaml(document)

    def _write_assessment(
        self, t: Transcript, read: Result | None, assessments: Mapping[str, Assessment],
        interval: str,
    ) -> Answer:
        note = ""
        if read is not None and read.ok and memory_text(read.first()).strip():
            try:
                load_yaml(MarketAssessment, memory_text(read.first()))
            except ValueError as exc:
                note = f" The previous file was unreadable and is replaced ({exc})."[:300]
        return call(
            "write_agent_memory_file", "write assessment",
            f"Rewriting my current view of {', '.join(assessments)}.{note}",
            file_path=MARKET_ASSESSMENT,
            content_base64=b64(self._assessment_yaml(t, read, assessments, interval)),
            file_type_hint="YAML",
        )

    @staticmethod
    def _assessed_at(t: Transcript, assessments: Mapping[str, Assessment], interval: str) -> str:
        """The market time of the newest snapshot the assessments were made at (the one the
        task carried, or the one the engine asked for)."""
        times = [
            int(step.result.attr("time_ms") or 0)
            for symbol in assessments
            if (step := _snapshot(t, symbol, interval)) is not None and step.result is not None
        ]
        return ms_to_iso(max(times, default=0))

    def _line(
        self, symbol: str, interval: str, outcome: Assessment | _Failed, sent: str | None
    ) -> str:
        if isinstance(outcome, _Failed):
            return f"{symbol} {interval}: no analysis ({outcome.text})."
        head = f"{symbol} {interval}: {outcome.signal.value} (confidence {outcome.confidence})"
        if outcome.signal not in (Signal.BUY, Signal.SELL):
            return f"{head}, nothing to dispatch."
        if sent is not None and sent == self.trader:
            return f"{head}, dispatched to Trader {sent}."
        if sent is not None:
            return f"{head}, dispatch {sent}."
        if outcome.confidence < self.min_confidence:
            return f"{head}, below the minimum confidence {self.min_confidence}: not dispatched."
        return f"{head}, no Trader linked: notified, not dispatched."
