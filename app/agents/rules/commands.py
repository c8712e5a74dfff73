"""The plain commands the rule-engine Orchestrator understands, read from a person's words.

It is not a language model and says so; it reads a small, documented grammar (case does not
matter, words in any order):

- ``watch|monitor|track|analyse|set up analysis of SYMBOL[, SYMBOL…] [on INTERVAL]
  [every N (m|h|d) | hourly | daily | each candle | cron "EXPR"] [with a trend|mean-reversion
  analyst] [and a trader | and the existing trader | without a trader]``
  e.g. ``watch BTC/USDT on 1h every 1h with a trend analyst and a trader``;
- ``add a trader [for SYMBOL…]``: a Trader, linked to every analyst (of those symbols) that has
  none; when each has one, the Orchestrator asks which analyst the new Trader is for;
- ``status``: every agent with its state, last action and next scheduled run;
- ``pause|resume|stop all | NAME | ID | analysts | traders``;
- ``help``.

A coin alone (``BTC``) gets the default quote currency (``BTC/USDT``). What a setup lacks
(symbol, interval, schedule, which analyst) is asked for with ``ask_user_clarification``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from app.domain.words import describe_cron, every

INTERVALS = ("1m", "5m", "15m", "30m", "1h", "4h", "1d", "1w")
INTERVAL_SECONDS = {"1m": 60, "5m": 300, "15m": 900, "30m": 1800, "1h": 3600, "4h": 14_400,
                    "1d": 86_400, "1w": 604_800}
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_UNITS = {
    "m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d", "w": "w", "wk": "w", "week": "w", "weeks": "w",
}
_DURATION = r"(\d{1,4})\s*-?\s*(minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|wk|w)\b"
_EVERY = re.compile(rf"\bevery\s+(?:{_DURATION}|(minute|hour|day|week))", re.IGNORECASE)
_EVERY_CANDLE = re.compile(
    r"\b(each|every)\s+(new\s+)?(candle|bar|close)\b|\bon\s+(each|every)\s+close\b|"
    r"\bas\s+each\s+(candle|bar)\s+closes\b", re.IGNORECASE,
)
_CRON = re.compile(
    r"\bcron\s*[:=]?\s*(?:[\"'`]([^\"'`]+)[\"'`]|((?:[0-9*/,\-]+\s+){4}[0-9*/,\-]+))",
    re.IGNORECASE,
)
_DURATION_ANY = re.compile(rf"\b{_DURATION}", re.IGNORECASE)
_SYMBOL = re.compile(r"\b([A-Za-z0-9]{2,12})\s*/\s*([A-Za-z0-9]{2,12})\b")
_BARE_COIN = re.compile(r"\b([A-Z0-9]{2,10})\b")
_NOT_COINS = frozenset(
    "RSI MACD EMA SMA BBANDS ATR UTC AND OR THE ON IN TO OF FOR WITH EVERY ALL ID OK YES NO "
    "BUY SELL TP SL PNL USD USDT".split()
)
_WATCH = re.compile(
    r"\b(watch|monitor|track|analy[sz]e|analysis|follow|scan|set\s*up|setup)\b", re.IGNORECASE
)
_CONTROL = re.compile(r"^\s*(please\s+)?(pause|resume|stop|start|restart)\b\s*(.*)$",
                      re.IGNORECASE | re.DOTALL)
_ADD_TRADER = re.compile(r"^\s*(please\s+)?(add|create|make)\s+(a\s+|an\s+|one\s+)?(new\s+)?"
                         r"trader\b", re.IGNORECASE)
_STATUS = re.compile(r"^\s*(status|report|what'?s\s+running|how\s+are\s+(the\s+)?agents|"
                     r"show\s+(the\s+)?agents|list\s+(the\s+)?agents)\b", re.IGNORECASE)
_HELP = re.compile(r"^\s*(help|\?|commands|what\s+can\s+you\s+do)\b", re.IGNORECASE)
_CANCEL = re.compile(r"^\s*(cancel|never\s*mind|nevermind|abort|forget\s+it)\b", re.IGNORECASE)


class Kind(StrEnum):
    WATCH = "watch"
    ADD_TRADER = "add_trader"
    STATUS = "status"
    CONTROL = "control"
    HELP = "help"
    UNKNOWN = "unknown"


class Analyst(StrEnum):
    TREND = "trend"
    MEAN_REVERSION = "mean_reversion"


class TraderChoice(StrEnum):
    NEW = "new"
    EXISTING = "existing"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Schedule:
    interval_s: int | None = None
    cron: str | None = None

    def words(self) -> str:
        """The schedule as a person reads it: "every hour", "every hour at :30"."""
        if self.cron:
            return describe_cron(self.cron)
        return every(self.interval_s) if self.interval_s else "never"

    @staticmethod
    def listed_words(listed: str) -> str:
        """A job's schedule as ``list_agent_instances`` gives it ("every 3600 s", "cron 0 * * *
        *"), in a person's words."""
        found = re.fullmatch(r"every (\d+) s", listed)
        if found is not None:
            return Schedule(interval_s=int(found.group(1))).words()
        if listed.startswith("cron "):
            return Schedule(cron=listed.removeprefix("cron ")).words()
        return listed


@dataclass(frozen=True, slots=True)
class Command:
    kind: Kind
    symbols: tuple[str, ...] = ()
    interval: str | None = None
    bad_interval: str | None = None  # a duration given as the interval that is not one we have
    schedule: Schedule | None = None
    every_candle: bool = False  # "each candle": the schedule follows the interval
    analyst: Analyst | None = None
    trader: TraderChoice | None = None
    action: str = ""  # pause / resume / stop
    target: str = ""  # what a control command names

    def resolved_schedule(self) -> Schedule | None:
        if self.schedule is not None:
            return self.schedule
        if self.every_candle and self.interval is not None:
            return Schedule(interval_s=INTERVAL_SECONDS[self.interval])
        return None

    def missing(self) -> str | None:
        """The first thing a setup still lacks, in the order they are asked."""
        if not self.symbols:
            return "symbols"
        if self.interval is None:
            return "interval"
        if self.resolved_schedule() is None:
            return "schedule"
        if self.analyst is None:
            return "analyst"
        return None

    def merged(self, other: Command, asked: str) -> Command:
        """This command with what ``other`` (a reply to the question about ``asked``) adds.

        The asked-for field takes the reply's value; the others only fill what is missing.
        """
        def pick(name: str) -> Any:
            mine, theirs = getattr(self, name), getattr(other, name)
            if name == asked or name in _ASKED_WITH.get(asked, ()):
                return theirs if theirs not in (None, ()) else mine
            return mine if mine not in (None, (), False) else theirs

        return replace(
            self,
            symbols=pick("symbols"),
            interval=pick("interval"),
            bad_interval=other.bad_interval if asked == "interval" else self.bad_interval,
            schedule=pick("schedule"),
            every_candle=bool(pick("every_candle")),
            analyst=pick("analyst"),
            trader=pick("trader"),
        )


_ASKED_WITH = {"schedule": ("every_candle",), "analyst": ("trader",)}


def normalise_interval(amount: int, unit: str) -> str | None:
    """``(4, "hours")`` -> ``"4h"`` when the market serves that interval, else ``None``."""
    key = f"{amount}{_UNITS.get(unit.lower(), '?')}"
    return key if key in INTERVALS else None


def _symbols(text: str, default_quote: str, watching: bool) -> tuple[str, ...]:
    found = [f"{a.upper()}/{b.upper()}" for a, b in _SYMBOL.findall(text)]
    if not found and watching:
        stripped = _SYMBOL.sub(" ", text)
        found = [f"{coin}/{default_quote}" for coin in _BARE_COIN.findall(stripped)
                 if coin not in _NOT_COINS and not coin.isdigit()
                 and not re.fullmatch(r"\d+[MHDW]", coin)]
    return tuple(dict.fromkeys(found))


def _schedule(text: str) -> tuple[Schedule | None, bool, str]:
    """The schedule, whether it is "each candle", and the text with the schedule words removed."""
    cron = _CRON.search(text)
    if cron is not None:
        expression = " ".join((cron.group(1) or cron.group(2) or "").split())
        return Schedule(cron=expression), False, text[:cron.start()] + text[cron.end():]
    every = _EVERY.search(text)
    if every is not None:
        if every.group(3):
            seconds = _UNIT_SECONDS[_UNITS[every.group(3).lower()]]
        else:
            seconds = int(every.group(1)) * _UNIT_SECONDS[_UNITS[every.group(2).lower()]]
        rest = _EVERY_CANDLE.sub(" ", text[:every.start()] + text[every.end():])
        return (Schedule(interval_s=seconds) if seconds > 0 else None), False, rest
    if _EVERY_CANDLE.search(text):
        return None, True, _EVERY_CANDLE.sub(" ", text)
    lowered = text.lower()
    for word, seconds in (("hourly", 3600), ("daily", 86_400), ("weekly", 604_800)):
        if re.search(rf"\b{word}\b", lowered) and not re.search(rf"\b{word}\s+candles?", lowered):
            return Schedule(interval_s=seconds), False, re.sub(rf"\b{word}\b", " ", text,
                                                                flags=re.IGNORECASE)
    return None, False, text


def _interval(text: str) -> tuple[str | None, str | None]:
    """The candle interval named in ``text`` (schedule words already removed), or a bad one."""
    lowered = text.lower()
    for word, interval in (("hourly candles", "1h"), ("daily candles", "1d"),
                           ("weekly candles", "1w")):
        if word in lowered:
            return interval, None
    match = _DURATION_ANY.search(text)
    if match is None:
        return None, None
    normalised = normalise_interval(int(match.group(1)), match.group(2))
    return (normalised, None) if normalised else (None, match.group(0).strip())


def _analyst(text: str) -> Analyst | None:
    lowered = text.lower()
    if re.search(r"mean[\s-]*reversion|reversion|mean[\s-]*revert", lowered):
        return Analyst.MEAN_REVERSION
    if re.search(r"\btrend", lowered):
        return Analyst.TREND
    return None


def _trader(text: str) -> TraderChoice | None:
    lowered = text.lower()
    if re.search(r"\b(without|no)\s+(a\s+)?trader|signals?\s+only|analysts?\s+only|"
                 r"only\s+(an\s+)?analyst|\bno\s+trading\b", lowered):
        return TraderChoice.NONE
    if re.search(r"\b(existing|current|same)\s+trader", lowered):
        return TraderChoice.EXISTING
    if re.search(r"\btrader\b", lowered):
        return TraderChoice.NEW
    return None


def parse_fragment(
    text: str, default_quote: str, watching: bool = True, asked: str | None = None
) -> Command:
    """Every setup field ``text`` names: a whole command, or a reply to the question about
    ``asked`` (a bare duration answering "how often?" is the schedule, not the interval)."""
    schedule, every_candle, rest = _schedule(text)
    interval, bad = _interval(rest)
    if asked == "schedule" and schedule is None and not every_candle:
        duration = _DURATION_ANY.search(rest)
        if duration is not None:
            unit = _UNITS[duration.group(2).lower()]
            schedule = Schedule(interval_s=int(duration.group(1)) * _UNIT_SECONDS[unit])
            interval = bad = None
    return Command(
        Kind.WATCH, symbols=_symbols(text, default_quote, watching), interval=interval,
        bad_interval=bad, schedule=schedule, every_candle=every_candle, analyst=_analyst(text),
        trader=_trader(text),
    )


def is_cancel(text: str) -> bool:
    return _CANCEL.match(text) is not None


def parse_command(text: str, default_quote: str = "USDT") -> Command:
    """What the person asked for (``Kind.UNKNOWN`` when it is none of the commands)."""
    if _HELP.match(text):
        return Command(Kind.HELP)
    control = _CONTROL.match(text)
    if control is not None:
        action = control.group(2).lower()
        action = {"start": "resume", "restart": "resume"}.get(action, action)
        target = control.group(3).strip().strip(".!").strip()
        return Command(Kind.CONTROL, action=action, target=target)
    if _ADD_TRADER.match(text):
        symbols = _symbols(text, default_quote, watching=False)
        return Command(Kind.ADD_TRADER, symbols=symbols)
    if _STATUS.match(text):
        return Command(Kind.STATUS)
    if _WATCH.search(text) or _SYMBOL.search(text):
        return parse_fragment(text, default_quote)
    return Command(Kind.UNKNOWN)


HELP_TEXT = (
    "I am the built-in rule engine (not an LLM): I understand a few plain commands.\n"
    "- watch BTC/USDT on 1h every 1h with a trend analyst and a trader\n"
    "  (also: a mean-reversion analyst; and the existing trader; without a trader;\n"
    "  cron \"0 */4 * * *\")\n"
    "- add a trader [for BTC/USDT]: a Trader for the analysts that have none (or the one\n"
    "  you name when I ask)\n"
    "- status: the agents, their state, last action and next run\n"
    "- pause | resume | stop all | <agent name or id> | analysts | traders\n"
    "Connect a language model in Settings to talk freely."
)
