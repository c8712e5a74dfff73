"""A new workspace starts where the data of the symbols it will watch exists, in their currency;
when nothing could happen, it says why."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from app.domain.clock import ReplayClock, parse_time
from app.domain.errors import OperationalError
from app.market.replay import ReplayMarketData
from app.resources import sample_data_files
from app.runtime.start import (
    WARMUP_BARS,
    check_setup,
    named_symbols,
    new_workspace_start,
    plan_new_workspace,
    tradeable_symbol,
    untradeable,
)
from tests.helpers.paths import BTC_USDT_1H

HOUR = 3_600_000
DAY = 24 * HOUR
SETUP = "watch BTC/USDT on 1h every 1h with a trend analyst and a trader"
USDT_FIRST_OPEN = parse_time("2019-09-30T07:00:00Z")  # the bundled BTC/USDT file's first candle


@cache
def bundled() -> ReplayMarketData:
    """The bundled data, loaded once (nothing here moves its clock)."""
    return ReplayMarketData.from_paths(ReplayClock(0), sample_data_files())


def test_a_setup_watching_btc_usdt_starts_once_its_data_has_the_warm_up_and_keeps_usdt() -> None:
    plan = plan_new_workspace(bundled(), days=30, setup=SETUP)
    # 30 days before the data's end would be 2019-09-24, six days before BTC/USDT's first candle
    assert plan.start_ms == USDT_FIRST_OPEN + WARMUP_BARS * HOUR
    assert plan.quote_currency == "USDT"


def test_a_setup_on_a_longer_interval_waits_for_candles_of_that_interval() -> None:
    start = new_workspace_start(bundled(), days=30, setup=SETUP.replace("on 1h", "on 4h"))
    assert start == USDT_FIRST_OPEN + WARMUP_BARS * 4 * HOUR


def test_a_setup_with_plenty_of_history_starts_the_given_days_before_its_data_ends() -> None:
    market = bundled()
    plan = plan_new_workspace(market, days=30, setup=SETUP.replace("BTC/USDT", "BTC/USD"))
    assert plan.start_ms == parse_time("2019-10-17T10:00:00Z") - 30 * DAY  # BTC/USD's own end
    assert plan.quote_currency == "USD"


def test_without_a_setup_the_start_waits_for_every_symbol_still_trading() -> None:
    assert new_workspace_start(bundled(), days=30) == USDT_FIRST_OPEN + WARMUP_BARS * HOUR


def test_a_setup_naming_only_symbols_the_data_lacks_says_which_exist() -> None:
    with pytest.raises(OperationalError, match="ETH/USDT, but the data has no such symbol; it "
                                               "has BTC/USD, BTC/USDT"):
        plan_new_workspace(bundled(), days=30, setup="watch ETH/USDT on 1h")


def test_data_too_short_for_the_warm_up_says_so(tmp_path: Path) -> None:
    lines = BTC_USDT_1H.read_text().splitlines()[: WARMUP_BARS - 10]
    short = tmp_path / "BTC-USDT_1h_short.csv"
    short.write_text("\n".join(lines) + "\n")
    market = ReplayMarketData.from_paths(ReplayClock(0), [short])
    with pytest.raises(OperationalError, match="too short for the 60 candles"):
        plan_new_workspace(market, days=30, setup=SETUP)


def test_symbols_of_two_currencies_cannot_share_one_account() -> None:
    with pytest.raises(OperationalError, match="one paper account holds one quote currency"):
        plan_new_workspace(bundled(), days=30, setup="watch BTC/USD and BTC/USDT on 1h")


def test_a_used_workspace_refuses_a_setup_it_cannot_trade_and_says_why() -> None:
    market = bundled()
    now = parse_time("2019-10-05T00:00:00Z")
    with pytest.raises(OperationalError, match=r"holds USD, so BTC/USDT \(quoted in USDT\)"):
        check_setup(market, account_quote="USD", now_ms=now, setup=SETUP)
    later = parse_time("2019-10-20T00:00:00Z")
    with pytest.raises(OperationalError, match="the data of BTC/USD ended at 2019-10-17T10:00"):
        check_setup(market, account_quote="USD", now_ms=later, setup="watch BTC/USD on 1h")
    check_setup(market, account_quote="USDT", now_ms=now, setup=SETUP)  # fine: nothing raised


def test_the_chat_hint_names_a_symbol_the_account_can_trade_now() -> None:
    market = bundled()
    now = parse_time("2019-10-05T00:00:00Z")
    assert tradeable_symbol(market, account_quote="USD", now_ms=now) == "BTC/USD"
    assert tradeable_symbol(market, account_quote="USDT", now_ms=now) == "BTC/USDT"
    assert tradeable_symbol(market, account_quote="EUR", now_ms=now) is None


def test_symbols_are_read_from_a_request_once_each_in_order() -> None:
    assert named_symbols("watch btc/usdt and ETH/USDT, then BTC/USDT") == ["BTC/USDT", "ETH/USDT"]


def test_a_symbol_whose_data_has_not_begun_or_warmed_up_is_refused_with_when_it_will_be() -> None:
    market = bundled()
    before = parse_time("2019-09-01T00:00:00Z")  # the BTC/USDT hours begin on 2019-09-30
    with pytest.raises(OperationalError, match="the data of BTC/USDT begins at 2019-09-30"):
        check_setup(market, account_quote="USDT", now_ms=before, setup=SETUP)
    refused = untradeable("BTC/USDT", available=market.symbols(), account_quote="USDT",
                          now_ms=parse_time("2019-10-01T00:00:00Z"), history=market,
                          label="the replay")
    assert refused is not None and "fewer than the 60 candles an analyst reads" in refused.reason
    assert "there are enough from 2019-10-02 19:00 UTC" in refused.reason
