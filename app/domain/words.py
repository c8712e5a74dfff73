"""Times and schedules in the words a person reads, wherever Kestrel speaks to one.

Agents and tools speak in exact forms (``2019-07-20T14:00:00Z``, ``every 3600 s``, ``0 * * * *``),
which they read back reliably; a person reads "2019-07-20 14:00 UTC", "every hour" and "every hour
at :30" faster. The window, the rule engine's answers and Kestrel's alerts put them in these
words; tool results keep the exact forms. A cron expression too irregular to say briefly is shown
as it is, marked UTC (the market clock's zone).
"""

from __future__ import annotations

from app.domain.clock import ms_to_iso, parse_time

_UNITS = ((86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second"))
_WEEKDAYS = {"0": "Sunday", "1": "Monday", "2": "Tuesday", "3": "Wednesday", "4": "Thursday",
             "5": "Friday", "6": "Saturday", "7": "Sunday"}


def every(seconds: int) -> str:
    """``3600`` as ``every hour``, ``14400`` as ``every 4 hours``, ``90`` as ``every 90 seconds``.
    """
    size, unit = next((size, unit) for size, unit in _UNITS if seconds % size == 0)
    count = seconds // size
    return f"every {unit}" if count == 1 else f"every {count} {unit}s"


def describe_cron(expression: str) -> str:
    fields = expression.split()
    if len(fields) != 5:
        return f"cron {expression} (UTC)"
    minute, hour, day, month, weekday = fields
    if (day, month) != ("*", "*"):
        return f"cron {expression} (UTC)"
    if minute.startswith("*/") and hour == "*" and weekday == "*":
        return every(int(minute[2:]) * 60) if minute[2:].isdigit() else f"cron {expression} (UTC)"
    if not minute.isdigit():
        return f"cron {expression} (UTC)"
    at_minute = f":{int(minute):02d}"
    if hour == "*" and weekday == "*":
        return "every hour" if at_minute == ":00" else f"every hour at {at_minute}"
    if hour.startswith("*/") and hour[2:].isdigit() and weekday == "*":
        text = every(int(hour[2:]) * 3600)
        return text if at_minute == ":00" else f"{text} at {at_minute}"
    if hour.isdigit():
        clock = f"{int(hour):02d}{at_minute} UTC"
        if weekday == "*":
            return f"daily at {clock}"
        if weekday in _WEEKDAYS:
            return f"every {_WEEKDAYS[weekday]} at {clock}"
    return f"cron {expression} (UTC)"


def market_time(ms: int | None) -> str:
    """``2019-07-20 14:00 UTC`` (seconds only when there are any); ``—`` for none."""
    if ms is None or ms < 0:
        return "—"
    text = ms_to_iso(ms).removesuffix("Z").replace("T", " ")
    return f"{text.removesuffix(':00')} UTC"


def iso_in_words(iso: str) -> str:
    """A tool result's ISO time (``2019-07-20T14:00:00Z``) as ``market_time`` says it; text that
    is not a time is returned as it is."""
    try:
        return market_time(parse_time(iso))
    except ValueError:
        return iso
