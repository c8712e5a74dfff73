"""Indicator Tools (TOOLS_PART_B.md section 2): calculate, list and describe technical indicators.

The handlers only translate between the protocol and the indicator layer: the catalogue validates
names and parameters, the engine computes (cached in a replay), and values leave as decimal strings
of ten significant digits, so a model never reads float noise such as ``0.30000000000000004``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from app.domain.errors import InvalidParameterError
from app.domain.market import is_interval
from app.indicators.engine import IndicatorEngine, IndicatorValues
from app.indicators.model import (
    CATEGORIES,
    IndicatorDef,
    bind_params,
    describe_values,
    format_number,
)
from app.market.port import MarketData
from app.tools.group import ToolDef, ToolGroup
from app.tools.protocol.render import Element, el
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission

SIGNIFICANT_DIGITS = 10
MAX_VALUES = 500

_CALCULATE_RETURNS = """
<indicator_data name="MACD" symbol="BTC/USDT" interval="1h" params="fast=12,slow=26,signal=9">
    <point timestamp_ms="long" macd="0.351" signal="0.124" histogram="0.227" />
    <point timestamp_ms="long" macd="0.360" signal="0.170" histogram="0.190" />
</indicator_data>
"""

_LIST_RETURNS = """
<indicators>
    <indicator name="MACD" category="momentum" outputs="macd,signal,histogram" />
    <indicator name="RSI" category="momentum" outputs="value" />
</indicators>
"""

_DESCRIBE_RETURNS = """
<indicator name="RSI" category="momentum" description="Relative Strength Index, 0-100 ..." outputs="value" min_bars="15">
    <param name="length" type="int" default="14" min="2" max="500" description="Look-back in bars." />
</indicator>
"""  # noqa: E501 - an example payload, kept on one line as the model will see it


def indicator_number(value: float) -> str | Decimal:
    """Ten significant digits as an exact Decimal (rendered without exponent), or ``NaN``."""
    if math.isnan(value):
        return "NaN"
    return Decimal(f"{value:.{SIGNIFICANT_DIGITS}g}")


def render_values(values: IndicatorValues) -> Element:
    """The ``<indicator_data>`` payload: one ``<point>`` per bar, newest last."""
    names = list(values.columns)
    columns = [values.columns[name] for name in names]
    points = []
    for row, stamp in enumerate(values.timestamps):
        attrs: dict[str, Any] = {"timestamp_ms": int(stamp)}
        for name, column in zip(names, columns, strict=True):
            attrs[name] = indicator_number(float(column[row]))
        points.append(el("point", **attrs))
    return el(
        "indicator_data",
        None,
        *points,
        name=values.indicator.name,
        symbol=values.symbol,
        interval=values.interval,
        params=describe_values(values.params),
    )


def _summary(indicator: IndicatorDef) -> Element:
    return el(
        "indicator",
        name=indicator.name,
        category=indicator.category,
        outputs=",".join(indicator.output_names),
    )


def _description(indicator: IndicatorDef) -> Element:
    params = [
        el(
            "param",
            name=param.name,
            type=param.type_name,
            default=format_number(param.default),
            min=format_number(param.minimum),
            max=format_number(param.maximum),
            description=param.description,
        )
        for param in indicator.params
    ]
    return el(
        "indicator",
        None,
        *params,
        name=indicator.name,
        category=indicator.category,
        description=indicator.description,
        outputs=",".join(indicator.output_names),
        min_bars=int(indicator.min_bars(indicator.defaults())),
    )


INDICATOR_NAME = ParamSpec(
    "indicator_name",
    ParamType.STRING,
    "Indicator id, case-insensitive, e.g. RSI, MACD, BBANDS, EMA (see "
    "list_technical_indicators)",
    required=True,
    max_length=40,
)


class IndicatorTools(ToolGroup):
    """The three indicator tools, over one market and one engine (and its cache)."""

    GROUP = "Indicator Tools"
    TOOLS = (
        ToolDef(
            name="calculate_technical_indicator",
            description=(
                "Calculate a technical indicator on the candles visible now; its most recent "
                "values, newest last, one attribute per output (MACD: macd, signal, histogram). "
                "A bar's value uses that bar and earlier ones only; an undefined value is NaN. "
                "Omitted parameters take their defaults (the result's params lists all used)."
            ),
            params=(
                ParamSpec("symbol", ParamType.STRING, 'Market symbol, e.g. "BTC/USDT"',
                          required=True, max_length=40),
                ParamSpec("interval", ParamType.STRING, 'Candle interval, e.g. "1h"',
                          required=True, max_length=8),
                INDICATOR_NAME,
                ParamSpec(
                    "params",
                    ParamType.MAP,
                    "Parameters by name, e.g. length (describe_technical_indicator lists them)",
                    item_tag="param",
                    example="length",
                ),
                ParamSpec(
                    "values",
                    ParamType.INTEGER,
                    "How many of the latest values to return (2: the current and the previous)",
                    default=2,
                    minimum=1,
                    maximum=MAX_VALUES,
                ),
            ),
            permission=Permission.INDICATOR,
            returns=_CALCULATE_RETURNS,
        ),
        ToolDef(
            name="list_technical_indicators",
            description=(
                "List every technical indicator calculate_technical_indicator accepts, with its "
                "category and output columns."
            ),
            params=(
                ParamSpec(
                    "category",
                    ParamType.ENUM,
                    "Only indicators of this category",
                    choices=CATEGORIES,
                ),
            ),
            permission=Permission.INDICATOR,
            returns=_LIST_RETURNS,
        ),
        ToolDef(
            name="describe_technical_indicator",
            description=(
                "Describe an indicator: what it measures, its outputs, the bars it needs first "
                "(min_bars) and each parameter's type, default and range."
            ),
            params=(INDICATOR_NAME,),
            permission=Permission.INDICATOR,
            returns=_DESCRIBE_RETURNS,
        ),
    )

    def __init__(self, market: MarketData, engine: IndicatorEngine) -> None:
        self._market = market
        self._engine = engine
        self._catalogue = engine.catalogue

    async def calculate_technical_indicator(
        self, ctx: AgentContext, args: dict[str, Any]
    ) -> Element:
        """The indicator's latest values: the catalogue checks its name and parameters, and a
        malformed interval is refused here, before any candle is read."""
        indicator = self._catalogue.get(args["indicator_name"])
        params = bind_params(indicator, args.get("params") or {})
        interval = args["interval"]
        if not is_interval(interval):
            raise InvalidParameterError(
                f"Parameter <interval> must be an interval such as 1m, 15m, 1h, 4h or 1d, got "
                f"{interval!r}.",
                details={"parameter": "interval", "got": interval},
            )
        values = await self._engine.latest(
            self._market, args["symbol"], interval, indicator, params, args["values"]
        )
        return render_values(values)

    async def list_technical_indicators(
        self, ctx: AgentContext, args: dict[str, Any]
    ) -> Sequence[Element]:
        """The catalogue, or one category of it."""
        chosen = self._catalogue.in_category(args.get("category"))
        return [el("indicators", None, *(_summary(indicator) for indicator in chosen))]

    async def describe_technical_indicator(
        self, ctx: AgentContext, args: dict[str, Any]
    ) -> Element:
        """One indicator's description, outputs and parameters."""
        return _description(self._catalogue.get(args["indicator_name"]))
