"""The types of the indicator catalogue and the binding of a caller's raw parameters to them.

An indicator is described once, as data (``IndicatorDef``): its parameters with types and
ranges, the pandas-ta function (or a documented numpy replacement) that computes it, which
pandas-ta column feeds which public output, and how many bars it needs before its first value.
Validation, the tools' descriptions and the engine are all derived from that one description, so
they cannot drift apart.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from app.domain.errors import InvalidParameterError, UnknownIndicatorError
from app.domain.numbers import DECIMAL_SYNTAX, INTEGER_SYNTAX, is_plain_decimal

CATEGORIES = ("momentum", "overlap", "trend", "volatility", "volume")

#: Parameter names callers commonly use for the main look-back, mapped to the catalogue's name.
PARAM_ALIASES = {"period": "length", "timeperiod": "length", "window": "length"}

_INT_RE = re.compile(r"[+-]?[0-9]{1,9}", re.ASCII)  # the one integer syntax, at most 9 digits

ParamValues = Mapping[str, int | float]
Compute = str | Callable[..., Any]


@dataclass(frozen=True, slots=True)
class ParamDef:
    """One tunable parameter of an indicator.

    Attributes:
        kind: ``int`` or ``float``; what the caller must give.
        targets: the pandas-ta keyword(s) this value is passed as (one public ``std`` feeds both
            ``lower_std`` and ``upper_std`` of BBANDS, for example). Empty means ``(name,)``.
    """

    name: str
    kind: type
    default: int | float
    minimum: int | float
    maximum: int | float
    description: str
    targets: tuple[str, ...] = ()

    @property
    def type_name(self) -> str:
        return "int" if self.kind is int else "float"

    def keywords(self) -> tuple[str, ...]:
        return self.targets or (self.name,)


@dataclass(frozen=True, slots=True)
class IndicatorDef:
    """One catalogued indicator.

    Attributes:
        name: the upper-case id callers use (``RSI``, ``MACD``).
        compute: a pandas-ta function name, called with ``talib=False`` so pandas-ta's own code
            runs, or a callable taking the same keyword arguments (our numpy replacements).
        inputs: the pandas-ta keyword names of the price inputs (``open_`` is the open column).
        outputs: (public column, pandas-ta column prefix) pairs; the prefix is the part of the
            pandas-ta column name before its first ``_`` (``MACDh`` of ``MACDh_12_26_9``).
        min_bars: bars needed for the first complete value, from the effective parameters.
        fixed: keyword arguments always passed (conventions such as ``ddof=0``).
        ordered: (a, b) pairs of parameters where a must be smaller than b.
    """

    name: str
    category: str
    description: str
    compute: Compute
    inputs: tuple[str, ...]
    params: tuple[ParamDef, ...]
    outputs: tuple[tuple[str, str], ...]
    min_bars: Callable[[ParamValues], int]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    ordered: tuple[tuple[str, str], ...] = ()

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.outputs)

    def param(self, name: str) -> ParamDef | None:
        for param in self.params:
            if param.name == name:
                return param
        return None

    def defaults(self) -> dict[str, int | float]:
        return {param.name: param.default for param in self.params}


class Catalogue:
    """The indicators by name, with lookup that suggests the closest names on a miss."""

    def __init__(self, indicators: tuple[IndicatorDef, ...]) -> None:
        self._by_name: dict[str, IndicatorDef] = {}
        for indicator in indicators:
            if indicator.name in self._by_name:
                raise ValueError(f"indicator {indicator.name} is catalogued twice")
            if indicator.category not in CATEGORIES:
                raise ValueError(f"{indicator.name}: unknown category {indicator.category!r}")
            self._by_name[indicator.name] = indicator

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self) -> Iterator[IndicatorDef]:
        return iter(self._by_name.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def in_category(self, category: str | None) -> list[IndicatorDef]:
        return [i for i in self._by_name.values() if category is None or i.category == category]

    def get(self, name: str) -> IndicatorDef:
        """Find an indicator case-insensitively.

        Raises:
            UnknownIndicatorError: naming the closest catalogued names.
        """
        key = name.strip().upper().replace("-", "_").replace(" ", "_")
        found = self._by_name.get(key)
        if found is not None:
            return found
        close = difflib.get_close_matches(key, list(self._by_name), n=3, cutoff=0.5)
        hint = f" Closest: {', '.join(close)}." if close else ""
        raise UnknownIndicatorError(
            f"There is no indicator named {name.strip()[:40]!r}.{hint} Call "
            "list_technical_indicators to see every indicator.",
            details={"indicator": name[:40], "closest": close},
        )


def _reject(indicator: IndicatorDef, param: str, message: str, **details: Any) -> Exception:
    return InvalidParameterError(
        f"{indicator.name} parameter {param!r} {message}",
        details={"indicator": indicator.name, "parameter": param, **details},
    )


def _coerce(indicator: IndicatorDef, param: ParamDef, text: str) -> int | float:
    raw = text.strip()
    if param.kind is int:
        if not _INT_RE.fullmatch(raw):
            raise _reject(
                indicator, param.name, f"must be {INTEGER_SYNTAX}; got {raw[:40]!r}.",
                expected="int", got=raw[:40],
            )
        value: int | float = int(raw)
    else:
        if len(raw) > 26 or not is_plain_decimal(raw):
            raise _reject(
                indicator, param.name, f"must be {DECIMAL_SYNTAX}; got {raw[:40]!r}.",
                expected="float", got=raw[:40],
            )
        value = float(raw)
    if not param.minimum <= value <= param.maximum:
        raise _reject(
            indicator,
            param.name,
            f"must be between {param.minimum} and {param.maximum}, got {raw}.",
            minimum=param.minimum,
            maximum=param.maximum,
            got=raw,
        )
    return value


def bind_params(indicator: IndicatorDef, raw: Mapping[str, str]) -> dict[str, int | float]:
    """Turn the caller's ``name -> text`` map into typed values with every default filled.

    Raises:
        InvalidParameterError: for an unknown name, a wrong type, a value out of its documented
            range, or parameters in the wrong order (MACD's fast must be below slow).
    """
    values = indicator.defaults()
    seen: set[str] = set()
    for given, text in raw.items():
        name = given.strip().lower()
        if indicator.param(name) is None and PARAM_ALIASES.get(name) is not None:
            name = PARAM_ALIASES[name]
        param = indicator.param(name)
        if param is None:
            allowed = ", ".join(p.name for p in indicator.params) or "none"
            raise _reject(
                indicator, given, f"does not exist. Its parameters are: {allowed}.",
                allowed=[p.name for p in indicator.params],
            )
        if name in seen:
            raise _reject(indicator, given, "is given twice.")
        seen.add(name)
        values[name] = _coerce(indicator, param, text)
    for first, second in indicator.ordered:
        if not values[first] < values[second]:
            raise _reject(
                indicator,
                first,
                f"must be smaller than {second!r} ({values[first]} >= {values[second]}).",
            )
    return values


def format_number(value: int | float) -> str:
    """Render a parameter value the way the caller would write it: ``14``, ``2``, ``0.015``."""
    if isinstance(value, float) and math.isfinite(value):
        text = format(Decimal(repr(value)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    return str(value)


def describe_values(values: ParamValues) -> str:
    """``fast=12,slow=26,signal=9``: the effective parameters, as the result's ``params``."""
    return ",".join(f"{name}={format_number(value)}" for name, value in values.items())
