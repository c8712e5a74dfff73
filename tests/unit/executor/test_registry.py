"""The registry and the "Available Tools" section generated from it, checked against the specs.

The section is what the model reads; these tests prove it lists exactly the permitted tools, names
every parameter with its rules, and that each invocation example, once its placeholders are filled
with valid values, parses and validates back to the same tool and parameters.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest
from lxml import etree

from app.domain.clock import ReplayClock
from app.market.replay import ReplayMarketData
from app.tools.market_tools import MarketTools
from app.tools.protocol.parser import parse_response
from app.tools.protocol.render import format_value
from app.tools.registry import ToolRegistry, render_tool
from app.tools.spec import ALL_PERMISSIONS, ParamSpec, ParamType, Permission, ToolSpec, validate
from tests.helpers.paths import BTC_USDT_1H
from tests.unit.protocol.sample_tools import FakeWorld, build_sample_specs

SAMPLE_SPECS = build_sample_specs(FakeWorld())


def _market_specs() -> list[ToolSpec]:
    return MarketTools(ReplayMarketData.from_paths(ReplayClock(0), [BTC_USDT_1H])).specs()


def _every_real_spec() -> list:
    """Every tool a world with agents registers (market, indicator, account, trade, memory and the
    orchestration tools)."""
    import asyncio
    import shutil
    import tempfile
    from pathlib import Path

    from app.runtime.world import build_world
    from app.workspace import Workspace

    folder = Path(tempfile.mkdtemp(prefix="kestrel-registry-"))
    world = build_world(Workspace.at(folder))
    try:
        return list(world.registry)
    finally:
        asyncio.run(world.aclose())
        shutil.rmtree(folder, ignore_errors=True)


SPEC_SETS = {
    "sample tools": SAMPLE_SPECS,
    "market tools": _market_specs(),
    "every real tool": _every_real_spec(),
}
ALL_SPECS = [spec for specs in SPEC_SETS.values() for spec in specs]


def _block(section: str, tool: str) -> str:
    """The invocation example of ``tool`` inside the section."""
    match = re.search(
        rf"#### `{tool}`\n.*?Invocation Format:\n```xml\n(<{tool}>.*?</{tool}>)\n```", section, re.S
    )
    assert match is not None, f"no invocation block for {tool}"
    return match.group(1)


def test_registering_a_name_twice_fails() -> None:
    registry = ToolRegistry(SAMPLE_SPECS)
    with pytest.raises(ValueError, match="'get_order_book' is registered twice"):
        registry.register(SAMPLE_SPECS[0])
    with pytest.raises(ValueError, match="registered twice"):
        ToolRegistry([SAMPLE_SPECS[0], SAMPLE_SPECS[0]])


def test_the_registry_knows_its_tools() -> None:
    registry = ToolRegistry(SAMPLE_SPECS)
    assert len(registry) == len(SAMPLE_SPECS)
    assert "create_order" in registry and "nope" not in registry
    assert registry.get("create_order") is SAMPLE_SPECS[3]
    assert [spec.name for spec in registry] == [spec.name for spec in SAMPLE_SPECS]
    assert registry.closest("get_oder_book")[0] == "get_order_book"
    assert registry.closest("ticker") == ["get_current_ticker_info"]
    assert "create_order" not in registry.closest("create_ordr", frozenset({Permission.MARKET}))


def test_the_section_lists_only_permitted_tools() -> None:
    registry = ToolRegistry(SAMPLE_SPECS)
    analyst = frozenset({Permission.MARKET, Permission.MEMORY})
    section = registry.available_tools_section(analyst)
    listed = re.findall(r"^#### `(\w+)`$", section, re.M)
    assert listed == [s.name for s in SAMPLE_SPECS if s.permission in analyst]
    assert "<create_order>" not in section and "Trading Tools" not in section
    assert registry.available_tools_section(frozenset()) == ""


def test_the_section_groups_tools_under_their_group_heading() -> None:
    section = ToolRegistry(SAMPLE_SPECS).available_tools_section(ALL_PERMISSIONS)
    headings = re.findall(r"^### (.+)$", section, re.M)
    assert headings == [
        "Market Data Tools",
        "Trading Tools",
        "Agent Memory Tools",
        "Orchestration Tools",
    ]


def test_a_tool_renders_in_the_seeds_invocation_format() -> None:
    text = render_tool(SAMPLE_SPECS[0])
    assert text == (
        "#### `get_order_book`\n"
        "Fetches the current order book (depth of market) for a symbol.\n"
        "Invocation Format:\n"
        "```xml\n"
        "<get_order_book>\n"
        '    <symbol>BTC/USDT</symbol> <!-- The trading symbol, e.g. "BTC/USDT". -->\n'
        "    <limit>integer</limit> <!-- Optional. Number of bid and ask levels. Default: 10. "
        "Range: 1 to 100. -->\n"
        "</get_order_book>\n"
        "```\n"
        "Success data payload:\n"
        "```xml\n"
        '<order_book_data symbol="string"><bids /><asks /></order_book_data>\n'
        "```"
    )


def _comment_of(block: str, param: ParamSpec) -> str:
    match = re.search(rf"<{param.name}>[^\n]*?<!-- (.*?) -->", block)
    assert match is not None, f"<{param.name}> has no comment"
    return match.group(1)


@pytest.mark.parametrize("spec", ALL_SPECS, ids=[s.name for s in ALL_SPECS])
def test_every_parameter_appears_with_its_rules(spec: ToolSpec) -> None:
    section = ToolRegistry([spec]).available_tools_section(ALL_PERMISSIONS)
    block = _block(section, spec.name)
    assert spec.description in section
    for param in spec.params:
        comment = _comment_of(block, param)
        # a parameter is required unless marked Optional (the prompt says so once)
        assert comment.startswith("Optional.") is (not param.required)
        assert param.description.rstrip(".") in comment
        if param.type is ParamType.ENUM:  # the choices are the placeholder, shown once
            assert f">{'|'.join(param.choices)}<" in block and "One of" not in comment
        if param.default not in (None, "") and not param.required:
            assert f"Default: {format_value(param.default)}." in comment
        numeric = param.type in (ParamType.INTEGER, ParamType.LONG, ParamType.DECIMAL)
        if numeric and param.minimum is not None and param.maximum is not None:
            low, high = format_value(param.minimum), format_value(param.maximum)
            assert f"Range: {low} to {high}." in comment
        if param.type is ParamType.LIST:
            assert re.search(rf"<{param.name}>.*?<{param.item_tag}>.*?</{param.name}>", block, re.S)
        # length limits are not spelt out (validation names them if ever exceeded)
        assert "characters." not in comment
    for rule in spec.extra_rules:
        assert f"- {rule}" in section


def _valid(param: ParamSpec) -> tuple[str | list[str] | dict[str, str], Any]:
    """Text to write for ``param`` and the value validation must produce from it."""
    kind = param.type
    if kind in (ParamType.INTEGER, ParamType.LONG, ParamType.DECIMAL):
        low = param.minimum if param.minimum is not None else 0
        high = param.maximum if param.maximum is not None else low + 1000
        middle = (Decimal(low) + Decimal(high)) / 2
        value: Any = (
            int(middle) if kind is not ParamType.DECIMAL else middle.quantize(Decimal("0.01"))
        )
        return format_value(value), value
    if kind is ParamType.BOOLEAN:
        return "true", True
    if kind is ParamType.ENUM:
        return param.choices[-1].lower(), param.choices[-1]
    if kind is ParamType.LIST:
        return ["BTC/USDT", "ETH/USDT"], ["BTC/USDT", "ETH/USDT"]
    if kind is ParamType.MAP:
        return {param.example or "name": "a & b"}, {param.example or "name": "a & b"}
    if kind is ParamType.JSON_OBJECT:
        return '{"symbols": ["BTC/USDT"], "risk": 0.5}', {"symbols": ["BTC/USDT"], "risk": 0.5}
    if kind is ParamType.BASE64:
        content = b"\x00binary <&> \xff"
        return base64.b64encode(content).decode(), content
    text = (param.example or "some text & <more>")[: param.max_length]
    return text, text


def _fill(block: str, spec: ToolSpec) -> tuple[str, dict[str, Any]]:
    """Replace every placeholder of the example with a valid value, keeping its layout."""
    root = etree.fromstring(block)  # the example must itself be well-formed XML
    expected: dict[str, Any] = {}
    for element in root:
        if not isinstance(element.tag, str):
            continue  # a comment
        param = spec.param(element.tag)
        assert param is not None, f"example shows <{element.tag}>, which the spec lacks"
        written, expected[param.name] = _valid(param)
        items = [child for child in element if isinstance(child.tag, str)]
        if isinstance(written, list):
            for item, value in zip(items, written, strict=True):
                item.text = value
        elif isinstance(written, dict):
            for item, (name, value) in zip(items, written.items(), strict=True):
                item.set("name", name)
                item.text = value
        else:
            element.text = written
    return etree.tostring(root, encoding="unicode"), expected


@pytest.mark.parametrize("spec", ALL_SPECS, ids=[s.name for s in ALL_SPECS])
def test_the_example_filled_with_valid_values_parses_back_to_the_same_call(spec: ToolSpec) -> None:
    registry = ToolRegistry([spec])
    block = _block(registry.available_tools_section(ALL_PERMISSIONS), spec.name)
    filled, expected = _fill(block, spec)
    parsed = parse_response(filled, registry.names())
    assert parsed.error is None, parsed.error
    assert parsed.call is not None and parsed.call.name == spec.name
    assert [node.tag for node in parsed.call.params] == [p.name for p in spec.params]
    assert validate(spec, parsed.call.params) == expected


@pytest.mark.parametrize("spec", ALL_SPECS, ids=[s.name for s in ALL_SPECS])
def test_the_example_as_shown_is_a_well_formed_call(spec: ToolSpec) -> None:
    registry = ToolRegistry([spec])
    block = _block(registry.available_tools_section(ALL_PERMISSIONS), spec.name)
    parsed = parse_response(block, registry.names())
    assert parsed.call is not None, parsed.error
    assert [node.tag for node in parsed.call.params] == [p.name for p in spec.params]


def _spec_with(params: Sequence[ParamSpec]) -> ToolSpec:
    async def handler(ctx: object, args: dict[str, Any]) -> Any:
        return ()

    return ToolSpec("odd_tool", "Odd", "An odd tool.", tuple(params), Permission.NOTIFY, handler)


def test_awkward_descriptions_and_examples_keep_the_example_well_formed() -> None:
    spec = _spec_with(
        [
            ParamSpec(
                "note",
                ParamType.STRING,
                "Ends with dashes --- and has a --> inside-",
                required=True,
                example="R&D <draft>",
            ),
            ParamSpec(
                "level",
                ParamType.DECIMAL,
                "A level",
                minimum=Decimal("0.00000001"),
                maximum=Decimal("1E+3"),
                default=Decimal("0.5"),
            ),
        ]
    )
    block = _block(ToolRegistry([spec]).available_tools_section(ALL_PERMISSIONS), "odd_tool")
    root = etree.fromstring(block)
    assert root.findtext("note") == "R&D <draft>"
    assert "Range: 0.00000001 to 1000." in block and "Default: 0.5." in block
    parsed = parse_response(block, {"odd_tool"})
    assert parsed.call is not None
    assert parsed.call.params[0].text == "R&D <draft>"
