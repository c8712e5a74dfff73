"""The registry of ToolSpecs and the "Available Tools" prompt section generated from it.

The section is built from the same specs the executor validates against, in the seeds' XML
invocation format, so the text a model reads can never drift from what the code accepts.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator

from app.tools.protocol.free_text import FreeText
from app.tools.protocol.render import escape_attr, escape_text, format_value
from app.tools.spec import ParamSpec, ParamType, ToolSpec

_DASHES = re.compile(r"-{2,}")  # "--" may not appear inside an XML comment


class ToolRegistry:
    """Holds every tool by name; built once per runtime and passed in, never global."""

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: ToolSpec) -> None:
        """Add a tool.

        Raises:
            ValueError: if a tool of that name is already registered.
        """
        if spec.name in self._specs:
            raise ValueError(f"tool {spec.name!r} is registered twice")
        self._specs[spec.name] = spec

    def upsert(self, spec: ToolSpec) -> None:
        """Add a tool or replace the one of that name (an MCP tool re-approved with a new
        definition); the caller decides what may be replaced."""
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def names(self) -> frozenset[str]:
        return frozenset(self._specs)

    def free_text(self) -> FreeText:
        """Which parameters of which tool hold free text (``ParamSpec.free_text``)."""
        return FreeText({
            spec.name: frozenset(p.name for p in spec.params if p.free_text)
            for spec in self._specs.values()
            if any(p.free_text for p in spec.params)
        })

    def closest(
        self, name: str, permissions: frozenset[str] | None = None, n: int = 3
    ) -> list[str]:
        """Names of the tools closest to a misspelt one, for UNKNOWN_TOOL messages."""
        pool = [
            spec.name
            for spec in self._specs.values()
            if permissions is None or spec.permission in permissions
        ]
        close = difflib.get_close_matches(name, pool, n=n, cutoff=0.5)
        if close:
            return close
        lowered = name.lower()
        parts = [p for p in lowered.replace("-", "_").split("_") if len(p) > 2]
        return [tool for tool in pool if any(part in tool for part in parts)][:n]

    def permitted(self, permissions: frozenset[str]) -> list[ToolSpec]:
        return [spec for spec in self._specs.values() if spec.permission in permissions]

    def available_tools_section(self, permissions: frozenset[str]) -> str:
        """Render the "Available Tools" section for an agent granted ``permissions``."""
        groups: dict[str, list[ToolSpec]] = {}
        for spec in self.permitted(permissions):
            groups.setdefault(spec.group, []).append(spec)
        blocks: list[str] = []
        for group, specs in groups.items():
            blocks.append(f"### {group}")
            blocks.extend(render_tool(spec) for spec in specs)
        return "\n\n".join(blocks)


def _comment(param: ParamSpec) -> str:
    """What a model needs to fill the parameter, said once: the enum's choices are already in
    the placeholder and length limits are explained by the error if ever exceeded, so neither is
    repeated here, and a parameter is required unless marked Optional (every token of this
    section is paid on every call of every agent)."""
    parts = [] if param.required else ["Optional."]
    parts.append(param.description.rstrip(".") + ".")
    if param.default not in (None, "") and not param.required:
        parts.append(f"Default: {format_value(param.default)}.")
    if param.type in (ParamType.INTEGER, ParamType.LONG, ParamType.DECIMAL):
        low = None if param.minimum is None else format_value(param.minimum)
        high = None if param.maximum is None else format_value(param.maximum)
        if low is not None and high is not None:
            parts.append(f"Range: {low} to {high}.")
        elif low is not None:
            parts.append(f"Minimum: {low}.")
        elif high is not None:
            parts.append(f"Max: {high}.")
    if param.type is ParamType.LIST and param.minimum is not None:
        parts.append(f"At least {param.minimum} items.")
    comment = _DASHES.sub("-", " ".join(parts)).rstrip("-")
    return f"<!-- {comment} -->"


def _param_lines(param: ParamSpec) -> list[str]:
    pad = " " * 4
    if param.type is ParamType.LIST:
        item = param.item_tag
        value = escape_text(param.example or "string")
        return [
            f"{pad}<{param.name}> {_comment(param)}",
            f"{pad * 2}<{item}>{value}</{item}>",
            f"{pad * 2}<{item}>{value}</{item}>",
            f"{pad}</{param.name}>",
        ]
    if param.type is ParamType.MAP:
        item = param.item_tag
        return [
            f"{pad}<{param.name}> {_comment(param)}",
            f'{pad * 2}<{item} name="{escape_attr(param.example or "name")}">value</{item}>',
            f"{pad}</{param.name}>",
        ]
    placeholder = escape_text(param.placeholder())
    return [f"{pad}<{param.name}>{placeholder}</{param.name}> {_comment(param)}"]


def render_tool(spec: ToolSpec) -> str:
    """Render one tool: description, invocation format, rules and what a success returns."""
    lines = [f"#### `{spec.name}`", spec.description, "Invocation Format:", "```xml"]
    lines.append(f"<{spec.name}>")
    for param in spec.params:
        lines.extend(_param_lines(param))
    lines += [f"</{spec.name}>", "```"]
    for rule in spec.extra_rules:
        lines.append(f"- {rule}")
    if spec.returns:
        lines += ["Success data payload:", "```xml", spec.returns.strip(), "```"]
    return "\n".join(lines)
