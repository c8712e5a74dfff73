"""One number syntax everywhere: every reader of numbers written as text accepts the same
spellings, refuses the same spellings, and says in its error which syntax it accepts.

The readers: tool parameters (decimal and whole-number types), indicator parameters, the risk
profile and the settings file, agent-template config fields, the LLM price table, the backtest CLI
and times given as milliseconds. Before this, ``Decimal`` read ``1_000`` and ``٥٠٠`` (Arabic-Indic
digits) in quantity and amount fields while ``<limit>`` refused them: ``٥٠٠`` placed a 500 USD
order.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from app.agents.costs import PriceFileError, PriceTable
from app.agents.templates import ConfigField, coerce_value
from app.cli.backtest import add_backtest_arguments
from app.config import settings_from_mapping
from app.config.risk import RiskConfig
from app.domain.clock import parse_time
from app.domain.errors import InvalidParameterError, OperationalError
from app.domain.numbers import (
    NumberSyntaxError,
    is_plain_decimal,
    parse_decimal,
    parse_integer,
    plain,
    to_decimal,
)
from app.indicators.catalogue import default_catalogue
from app.indicators.model import bind_params
from app.tools.protocol.call import ParamNode
from app.tools.spec import ParamSpec, ParamType, coerce

#: Spellings every decimal reader accepts, with their value.
ACCEPTED = {
    "25000": Decimal(25000),
    "0.5": Decimal("0.5"),
    "+3": Decimal(3),
    ".5": Decimal("0.5"),
    "5.": Decimal(5),
    " 12.25 ": Decimal("12.25"),
    "007": Decimal(7),
    "0.00000001": Decimal("0.00000001"),
}
#: Accepted by the syntax, refused by readers that need a positive value (their range check).
ACCEPTED_SIGNED = {"-2.75": Decimal("-2.75"), "0": Decimal(0), "-0": Decimal(0)}
#: Spellings every reader refuses, each for a reason a model or a person might produce it.
REFUSED = {
    "underscore separator": "1_000",
    "Arabic-Indic digits": "٥٠٠",
    "Extended Arabic-Indic digits": "۵۰۰",
    "Devanagari digits": "५००",
    "fullwidth digits": "１２",
    "mathematical bold digits": "𝟏𝟐",
    "Arabic decimal separator": "١٢٫٥",
    "thousands comma": "1,000",
    "decimal comma": "12,5",
    "thin-space thousands": "1\u2009000",
    "no-break-space thousands": "1\u00a0000",
    "space thousands": "1 000",
    "exponent": "1e3",
    "negative exponent": "1E-8",
    "not a number": "NaN",
    "infinity": "Infinity",
    "short infinity": "inf",
    "hexadecimal": "0x10",
    "two points": "1.2.3",
    "two signs": "+-1",
    "sign alone": "-",
    "point alone": ".",
    "empty": "",
    "vulgar fraction": "½",
    "superscript": "²",
    "currency sign": "$5",
    "percent sign": "5%",
    "words": "five",
    "unit suffix": "5k",
}
SYNTAX_WORDS = "written plainly"  # every refusal names the accepted syntax with these words


def _tool_decimal(text: str) -> Decimal:
    spec = ParamSpec("quote_amount", ParamType.DECIMAL, "Spend", minimum=Decimal("0.00000001"))
    return coerce(spec, ParamNode("quote_amount", text))


def _tool_integer(text: str) -> int:
    return coerce(ParamSpec("limit", ParamType.INTEGER, "Levels"), ParamNode("limit", text))


def _risk_limit(text: str) -> Decimal:
    config = RiskConfig.model_validate({"max_order_notional": {"limit": text}})
    return config.max_order_notional.limit


def _risk_allotment(text: str) -> Decimal:
    config = RiskConfig.model_validate({"agent_budget": {"allotments": {"trader-1": text}}})
    return config.agent_budget.allotments["trader-1"]


def _settings_cash(text: str) -> Decimal:
    return settings_from_mapping({"paper": {"initial_cash": text}}).paper.initial_cash


def _template_field(text: str) -> Decimal:
    return coerce_value(ConfigField(type="decimal", description="a share"), text)


def _cli_cash(text: str) -> Decimal:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_backtest_arguments(parser)
    return parser.parse_args(["--data", "x.csv", "--out", "o", "--cash", text]).cash


def _indicator_float(text: str) -> float:
    bbands = default_catalogue().get("BBANDS")
    return bind_params(bbands, {"std": text})["std"]


READERS: dict[str, tuple[Callable[[str], object], type[Exception]]] = {
    "tool decimal parameter": (_tool_decimal, InvalidParameterError),
    "risk profile limit": (_risk_limit, ValueError),
    "risk profile allotment": (_risk_allotment, ValueError),
    "settings file": (_settings_cash, OperationalError),
    "agent template config field": (_template_field, ValueError),
    "backtest CLI --cash": (_cli_cash, argparse.ArgumentError),
    "indicator parameter": (_indicator_float, InvalidParameterError),
}
#: The value range each reader takes, where it is narrower than "positive".
RANGES = {"indicator parameter": (Decimal("0.1"), Decimal(10))}


@pytest.mark.parametrize("text", ACCEPTED | ACCEPTED_SIGNED)
def test_the_syntax_reads_plain_decimals(text: str) -> None:
    assert is_plain_decimal(text)
    assert parse_decimal(text) == (ACCEPTED | ACCEPTED_SIGNED)[text]


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_the_syntax_refuses_everything_else_and_names_itself(text: str) -> None:
    assert not is_plain_decimal(text)
    with pytest.raises(NumberSyntaxError, match=SYNTAX_WORDS):
        parse_decimal(text)
    with pytest.raises(NumberSyntaxError, match=SYNTAX_WORDS):
        parse_integer(text)


def _in_range(reader: str, value: Decimal) -> bool:
    low, high = RANGES.get(reader, (Decimal(0), Decimal("Infinity")))
    return low <= value <= high


@pytest.mark.parametrize(
    ("reader", "text"),
    [(r, t) for r in READERS for t, v in ACCEPTED.items() if _in_range(r, v)],
)
def test_every_decimal_reader_accepts_the_same_spellings(reader: str, text: str) -> None:
    read, _ = READERS[reader]
    assert Decimal(str(read(text))) == ACCEPTED[text]


@pytest.mark.parametrize("reader", READERS, ids=READERS.keys())
@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_every_decimal_reader_refuses_the_same_spellings_naming_the_syntax(
    reader: str, text: str
) -> None:
    read, error = READERS[reader]
    with pytest.raises(error) as caught:
        read(text)
    message = str(caught.value)
    if text:  # an empty optional value may mean "the default" elsewhere; here it is refused
        assert SYNTAX_WORDS in message, message


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_whole_number_readers_refuse_the_same_spellings(text: str) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        _tool_integer(text)
    if text:
        assert "written plainly" in caught.value.message
    rsi = default_catalogue().get("RSI")
    with pytest.raises(InvalidParameterError):
        bind_params(rsi, {"length": text})


def test_times_in_milliseconds_take_ascii_digits_only() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    for text in ("١٧٠٠٠٠٠٠٠٠٠٠٠", "１７００００００００００００", "1_700_000_000_000"):
        with pytest.raises(ValueError, match="not a time"):
            parse_time(text)


def test_price_file_refuses_other_digits_naming_the_syntax(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text('models:\n  m1: {input: "١٫٥", output: "2"}\n', encoding="utf-8")
    with pytest.raises(PriceFileError, match=SYNTAX_WORDS):
        PriceTable.load(bundled=prices)
    prices.write_text('models:\n  m1: {input: "1.5", output: "2"}\n', encoding="utf-8")
    assert PriceTable.load(bundled=prices).lookup("m1") is not None


def test_values_from_files_keep_their_types_and_refuse_what_is_not_a_number() -> None:
    assert to_decimal(5) == 5 and to_decimal(0.1) == Decimal("0.1")
    assert to_decimal(Decimal("2.5")) == Decimal("2.5")
    for bad in (True, None, [1], float("nan"), Decimal("Infinity")):
        with pytest.raises(NumberSyntaxError, match=SYNTAX_WORDS):
            to_decimal(bad)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (Decimal("1E+1"), "10"),
        (Decimal("1E-8"), "0.00000001"),
        (Decimal("9871.2300"), "9871.23"),
        (Decimal("10000"), "10000"),
        (Decimal("-0.0"), "0"),
        (Decimal("0E-12"), "0"),
        (Decimal("-2.750"), "-2.75"),
    ],
)
def test_every_number_the_program_writes_is_one_its_readers_accept(value, written):
    assert plain(value) == written
    assert is_plain_decimal(written)
    assert parse_decimal(written) == value


def test_a_non_finite_number_is_never_written_as_if_it_were_one():
    with pytest.raises(ValueError, match="non-finite"):
        plain(Decimal("NaN"))
