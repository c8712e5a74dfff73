"""``kestrel run --venue live``: the confirmation and the unknown-orders decision, in words."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from app.cli.live import add_live_arguments, live_spec, unknown_decision
from app.config import VenueSettings
from app.domain.errors import OperationalError
from app.runtime.live_startup import UnknownOrderChoice
from tests.unit.runtime.test_live_startup import ORDER


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exchange")
    parser.add_argument("--symbol", dest="symbols", action="append", default=[])
    add_live_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_flag_naming_the_exchange_confirms_without_asking() -> None:
    asked: list[str] = []
    spec = live_spec(parse("--exchange", "Binance", "--confirm-live", "binance"),
                     VenueSettings(), asked.append)
    assert spec.kind == "live" and spec.exchange == "binance" and spec.confirmed == "binance"
    assert spec.symbols == ("BTC/USDT", "ETH/USDT")  # the workspace's [venue] symbols
    assert asked == []


def test_without_the_flag_the_person_types_the_exchange_after_reading_the_stakes() -> None:
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return "binance\n"

    spec = live_spec(parse("--exchange", "binance", "--symbol", "btc/usdt"), VenueSettings(), ask)
    assert spec.confirmed == "binance" and spec.symbols == ("BTC/USDT",)
    assert "REAL money" in prompts[0] and "Type binance" in prompts[0]
    nobody = live_spec(parse("--exchange", "binance"), VenueSettings(), lambda _p: None)
    assert nobody.confirmed == ""  # the venue then refuses to open


def test_no_exchange_at_all_is_refused() -> None:
    with pytest.raises(OperationalError, match="--exchange"):
        live_spec(parse(), VenueSettings.model_construct(exchange=""), lambda _p: None)


@pytest.mark.parametrize(("argv", "answer", "expected"), [
    (("--adopt-unknown",), None, UnknownOrderChoice.ADOPT),
    (("--ignore-unknown",), None, UnknownOrderChoice.IGNORE),
    ((), "adopt", UnknownOrderChoice.ADOPT),
    ((), " Ignore ", UnknownOrderChoice.IGNORE),
    ((), "maybe", None),
    ((), None, None),
])
def test_unknown_orders_are_decided_by_the_flag_or_the_persons_answer(
    argv: tuple[str, ...], answer: str | None, expected: UnknownOrderChoice | None
) -> None:
    decide = unknown_decision(parse("--exchange", "binance", *argv), lambda _p: answer)
    assert asyncio.run(decide([ORDER])) is expected


def test_adopt_and_ignore_cannot_both_be_given() -> None:
    with pytest.raises(SystemExit):
        parse("--adopt-unknown", "--ignore-unknown")
