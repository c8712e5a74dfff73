"""One syntax for every number read from text (tool parameters, settings, risk files, the CLI),
and one for every number written: ``plain`` spells a decimal the way the reader accepts it.

Python's own readers are generous: ``Decimal("1_000")`` is 1000, ``Decimal("٥٠٠")`` is 500 and
``int("１２")`` is 12. A model that writes ``٥٠٠`` as a quote amount placed a 500 USD order while
``<limit>`` refused the same text, so every number written as text goes through here instead and
means the same thing everywhere:

- a decimal is an optional sign, then ASCII digits with at most one decimal point and at least one
  digit: ``25000``, ``0.5``, ``-2.75``, ``.5``, ``5.``;
- a whole number is an optional sign, then ASCII digits.

Nothing else: no exponent (``1e3``: our own output never writes one, so a model never copies one),
no underscores, no thousands separators, no digits of other scripts, no ``NaN`` or ``Infinity``.
Whitespace around the number is ignored. Whether a sign is allowed is the caller's range check.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated

from pydantic import BeforeValidator

DECIMAL_SYNTAX = (
    "a decimal number such as 0.5, 25000 or -2.75, written plainly: an optional sign, ASCII "
    "digits 0-9 and at most one '.' (no exponent, underscores, thousands separators or other "
    "digits)"
)
INTEGER_SYNTAX = (
    "a whole number such as 10 or -3, written plainly: an optional sign and ASCII digits 0-9 (no "
    "underscores, separators or other digits)"
)

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)", re.ASCII)
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)


class NumberSyntaxError(ValueError):
    """Text that is not a number in the one accepted syntax; the message names the syntax."""


def _shown(text: str) -> str:
    return repr(text[:40] + ("…" if len(text) > 40 else ""))


def is_plain_decimal(text: str) -> bool:
    """Whether ``text`` (stripped) is a decimal in the accepted syntax."""
    return _DECIMAL.fullmatch(text.strip()) is not None


def is_plain_integer(text: str) -> bool:
    """Whether ``text`` (stripped) is a whole number in the accepted syntax."""
    return _INTEGER.fullmatch(text.strip()) is not None


def parse_decimal(text: str) -> Decimal:
    """Read a decimal written as ``text``.

    Raises:
        NumberSyntaxError: ``text`` is not a plain decimal; the message says what is.
    """
    stripped = text.strip()
    if _DECIMAL.fullmatch(stripped) is None:
        raise NumberSyntaxError(f"{_shown(text)} is not {DECIMAL_SYNTAX}")
    return Decimal(stripped)


def parse_integer(text: str) -> int:
    """Read a whole number written as ``text``.

    Raises:
        NumberSyntaxError: ``text`` is not a plain whole number; the message says what is.
    """
    stripped = text.strip()
    if _INTEGER.fullmatch(stripped) is None:
        raise NumberSyntaxError(f"{_shown(text)} is not {INTEGER_SYNTAX}")
    return int(stripped)


def to_decimal(value: object) -> Decimal:
    """A finite Decimal from a value a settings or data file holds: text in the one syntax, an
    int, a Decimal, or a float (by its shortest repr, so ``0.1`` stays ``0.1``).

    Raises:
        NumberSyntaxError: text in another syntax, a bool, another type, NaN or an infinity.
    """
    if isinstance(value, bool):
        raise NumberSyntaxError(f"{value!r} is not a number; write {DECIMAL_SYNTAX}")
    if isinstance(value, str):
        return parse_decimal(value)
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        number = Decimal(repr(value))
    else:
        raise NumberSyntaxError(
            f"a {type(value).__name__} is not a number; write {DECIMAL_SYNTAX}"
        )
    if not number.is_finite():
        raise NumberSyntaxError(f"{value!r} is not a finite number; write {DECIMAL_SYNTAX}")
    return number


#: A Decimal field of a pydantic settings model that reads text in the one syntax only.
PlainDecimal = Annotated[Decimal, BeforeValidator(to_decimal)]

# Money is kept to 8 decimal places (``app.exchange.book``) in Decimal's default precision of 28
# significant digits: an amount of 10^20 or more cannot even be rounded to 8 places (every
# command that valued such an account failed), and sums and products of amounts not far below
# lose digits. So no amount of money Kestrel keeps, set or stored, may exceed a trillion.
MAX_MONEY = Decimal(10) ** 12
MONEY_PLACES = 8
MONEY_LIMIT_REASON = (
    "money is kept to 8 decimal places within 28 significant digits, so amounts above "
    "1000000000000 (a trillion) cannot be computed exactly"
)


def plain(value: Decimal) -> str:
    """The shortest plain spelling: no exponent, no trailing zeros, ``0`` for zero of any sign.

    Every number that leaves the program (tool results, prompts, the rule engine's calls, order
    previews, the command line, Telegram) is written this way, so it reads the same everywhere
    and a model that copies one back writes what ``parse_decimal`` accepts.
    """
    if not value.is_finite():
        raise ValueError(f"cannot write the non-finite number {value}")
    text = str(value)  # the fast path; exponent forms (1E+3, 1E-8) need the slower "f" format
    if "E" in text:
        text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", ""):
        text = "0"
    return text
