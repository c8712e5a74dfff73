"""Tool groups: a class per group of tools, its dependencies given once, one method per tool.

Why a class and not a factory of closures: a closure cannot be imported, named or called on its
own, so a handler could only be tested through the whole registry and executor, and the factory
that declared every tool grew into one function of hundreds of lines. Here each group declares
its tools as data (``TOOLS``: a ``ToolDef`` per tool, in the order the prompt lists them) and
handles each in the method of the tool's own name; ``specs()`` binds the two into the
registry's ``ToolSpec`` of each tool. A ``ToolDef`` without its method fails when the class is
defined, not when a model first calls the tool.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.tools.spec import ParamSpec, Permission, ToolHandler, ToolSpec


@dataclass(frozen=True, slots=True)
class ToolDef:
    """What a tool is, without how it runs: a ``ToolSpec`` less its handler (and its group,
    which the declaring class names once unless the tool sits in another one)."""

    name: str
    description: str
    params: tuple[ParamSpec, ...]
    permission: Permission
    returns: str = ""
    extra_rules: tuple[str, ...] = field(default_factory=tuple)
    timeout_s: float | None = None
    group: str = ""  # empty: the declaring class's GROUP

    def bind(self, group: str, handler: ToolHandler, timeout_s: float | None) -> ToolSpec:
        """The full spec, run by ``handler``."""
        return ToolSpec(
            name=self.name, group=self.group or group, description=self.description,
            params=self.params, permission=self.permission, handler=handler,
            returns=self.returns, timeout_s=timeout_s, extra_rules=self.extra_rules,
        )


class ToolGroup:
    """Base of every core tool group.

    A subclass sets ``GROUP`` (the prompt's heading) and ``TOOLS``, takes its dependencies in
    ``__init__`` and defines, for each ``ToolDef``, an ``async`` method of the tool's name taking
    ``(ctx, args)``: the handler, callable directly in a test.
    """

    GROUP: ClassVar[str]
    TOOLS: ClassVar[tuple[ToolDef, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a group whose table names a tool twice or a tool it has no handler for."""
        super().__init_subclass__(**kwargs)
        seen: set[str] = set()
        for tool in cls.TOOLS:
            if tool.name in seen:
                raise TypeError(f"{cls.__name__} declares the tool {tool.name!r} twice")
            seen.add(tool.name)
            if not inspect.iscoroutinefunction(getattr(cls, tool.name, None)):
                raise TypeError(
                    f"{cls.__name__} declares the tool {tool.name!r} but has no async method "
                    "of that name to handle it"
                )

    def handler(self, name: str) -> ToolHandler:
        """The bound handler of the tool ``name``.

        Raises:
            KeyError: the group has no such tool.
        """
        if not any(tool.name == name for tool in self.TOOLS):
            raise KeyError(f"{type(self).__name__} has no tool {name!r}")
        handler: ToolHandler = getattr(self, name)
        return handler

    def timeout_s(self, tool: ToolDef) -> float | None:
        """A tool's time limit; a group whose limit depends on a dependency overrides this."""
        return tool.timeout_s

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool of the group, in declaration order, each run by this instance's method."""
        return tuple(
            tool.bind(self.GROUP, getattr(self, tool.name), self.timeout_s(tool))
            for tool in self.TOOLS
        )
