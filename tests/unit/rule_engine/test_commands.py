"""The rule-engine Orchestrator reads the documented plain commands, and only those."""

from __future__ import annotations

import pytest

from app.agents.rule_engine.commands import (
    Analyst,
    Kind,
    Schedule,
    TraderChoice,
    is_cancel,
    parse_command,
    parse_fragment,
)


def test_the_full_setup_sentence_names_everything_a_watch_needs() -> None:
    c = parse_command("watch BTC/USDT on 1h every 1h with a trend analyst and a trader")
    assert c.kind is Kind.WATCH and c.symbols == ("BTC/USDT",) and c.interval == "1h"
    assert c.resolved_schedule() == Schedule(interval_s=3600)
    assert (c.analyst, c.trader) == (Analyst.TREND, TraderChoice.NEW)
    assert c.missing() is None


@pytest.mark.parametrize(("text", "missing"), [
    ("watch BTC/USDT", "interval"),
    ("set up analysis of BTC/USDT on 4h", "schedule"),
    ("monitor eth/usdt on 15m every 15 minutes", "analyst"),
    ("set up analysis", "symbols"),
])
def test_what_a_setup_lacks_is_found_in_the_order_it_is_asked(text: str, missing: str) -> None:
    assert parse_command(text).missing() == missing


@pytest.mark.parametrize(("text", "schedule"), [
    ("watch BTC/USDT on 4h every 4 hours with a trend analyst", Schedule(interval_s=14_400)),
    ("watch BTC/USDT on 1h hourly with a trend analyst", Schedule(interval_s=3600)),
    ("watch BTC/USDT on 1d daily with a trend analyst", Schedule(interval_s=86_400)),
    ("watch BTC/USDT on 15m each candle with a trend analyst", Schedule(interval_s=900)),
    ('track BTC/USDT on 4h cron "0 */4 * * *" trend analyst', Schedule(cron="0 */4 * * *")),
    ("track BTC/USDT on 4h cron 0 */4 * * * trend analyst", Schedule(cron="0 */4 * * *")),
    ("watch BTC/USDT on 1h every minute with a trend analyst", Schedule(interval_s=60)),
])
def test_schedules_are_read_in_their_documented_forms(text: str, schedule: Schedule) -> None:
    assert parse_command(text).resolved_schedule() == schedule


def test_the_schedule_is_not_mistaken_for_the_interval() -> None:
    c = parse_command("watch BTC/USDT every 4h on 1h with a trend analyst")
    assert c.interval == "1h" and c.resolved_schedule() == Schedule(interval_s=14_400)


def test_an_interval_the_market_does_not_serve_is_kept_to_explain_it() -> None:
    c = parse_command("watch BTC/USDT on 2h every 2h with a trend analyst")
    assert c.interval is None and c.bad_interval == "2h" and c.missing() == "interval"


def test_a_bare_coin_gets_the_default_quote_and_indicator_names_are_not_coins() -> None:
    c = parse_command("watch ETH and BTC on 4h with RSI and MACD", default_quote="USD")
    assert c.symbols == ("ETH/USD", "BTC/USD")


@pytest.mark.parametrize(("text", "analyst", "trader"), [
    ("watch BTC/USDT with a mean-reversion analyst and a trader", Analyst.MEAN_REVERSION,
     TraderChoice.NEW),
    ("watch BTC/USDT with a trend analyst and the existing trader", Analyst.TREND,
     TraderChoice.EXISTING),
    ("watch BTC/USDT with a trend analyst without a trader", Analyst.TREND, TraderChoice.NONE),
    ("watch BTC/USDT with a trend analyst", Analyst.TREND, None),
])
def test_the_team_is_read_literally(text: str, analyst: Analyst, trader: TraderChoice | None,
                                    ) -> None:
    c = parse_command(text)
    assert (c.analyst, c.trader) == (analyst, trader)


@pytest.mark.parametrize(("text", "kind", "action", "target"), [
    ("pause all", Kind.CONTROL, "pause", "all"),
    ("Resume the BTC analyst.", Kind.CONTROL, "resume", "the BTC analyst"),
    ("start traders", Kind.CONTROL, "resume", "traders"),
    ("stop 1234-abcd", Kind.CONTROL, "stop", "1234-abcd"),
    ("status", Kind.STATUS, "", ""),
    ("what's running?", Kind.STATUS, "", ""),
    ("help", Kind.HELP, "", ""),
    ("add a trader for BTC/USDT", Kind.ADD_TRADER, "", ""),
    ("tell me a joke", Kind.UNKNOWN, "", ""),
])
def test_other_commands_are_recognised(text: str, kind: Kind, action: str, target: str) -> None:
    c = parse_command(text)
    assert (c.kind, c.action, c.target) == (kind, action, target)


def test_a_reply_to_how_often_reads_a_bare_duration_as_the_schedule() -> None:
    reply = parse_fragment("4 hours", "USDT", asked="schedule")
    assert reply.resolved_schedule() == Schedule(interval_s=14_400) and reply.interval is None
    suggested = parse_fragment("Every 1h, as each candle closes", "USDT", asked="schedule")
    assert suggested.resolved_schedule() == Schedule(interval_s=3600)


def test_a_reply_fills_what_was_asked_and_never_overrides_what_was_said() -> None:
    command = parse_command("watch BTC/USDT on 4h")
    merged = command.merged(parse_fragment("every 1h, and on 1d", "USDT", asked="schedule"),
                            "schedule")
    assert merged.interval == "4h" and merged.resolved_schedule() == Schedule(interval_s=3600)


@pytest.mark.parametrize("text", ["cancel", "Never mind", "abort that", "forget it"])
def test_cancel_words_end_a_setup(text: str) -> None:
    assert is_cancel(text)
