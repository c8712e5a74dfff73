"""Which MCP tools a person approved, exactly as approved, and for which agents and templates.

An MCP server is someone else's code: it can change what a tool does and says at any moment. So a
person approves one *definition* of a tool (its name, description and schemas), and that
definition is pinned by the SHA-256 of its canonical JSON. The agent only ever sees and calls the
pinned definition; when the server later lists something else under that name, the approval is
marked changed and the tool is off until a person approves again. Every tool starts off: an
approval grants nothing until the person enables it for a template or an agent.

The approvals live in the workspace as ``mcp_approvals.json`` (written whole, atomically: a
temporary file, fsync, rename), not in ``kestrel.db``: they are a person's settings, edited from the
Settings dialog, and keeping them out of the schema spares a migration.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.domain.errors import OperationalError

logger = logging.getLogger(__name__)

FILE_NAME = "mcp_approvals.json"
FORMAT_VERSION = 1
PERMISSION_PREFIX = "mcp:"
TOOL_PREFIX = "mcp_"
_DEFINITION_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def canonical_definition(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a listed tool that say what it is and how it is called (no ``_meta``)."""
    return {key: tool[key] for key in _DEFINITION_KEYS if tool.get(key) is not None}


def definition_hash(definition: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces): equal definitions, equal hashes."""
    text = json.dumps(
        canonical_definition(definition), sort_keys=True, separators=(",", ":"),
        ensure_ascii=False, allow_nan=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tool_key(server: str, tool: str) -> str:
    """``<server>__<tool>``: the tool's name without the prefix, and its permission's suffix."""
    return f"{server}__{tool}"


def tool_name(server: str, tool: str) -> str:
    """The name the agents call: ``mcp_<server>__<tool>``."""
    return TOOL_PREFIX + tool_key(server, tool)


def permission_for(server: str, tool: str) -> str:
    """The permission that grants one MCP tool; never one of the core permission groups."""
    return PERMISSION_PREFIX + tool_key(server, tool)


def template_target(template_id: str) -> str:
    return f"template:{template_id}"


def agent_target(agent_id: str) -> str:
    return f"agent:{agent_id}"


@dataclass(frozen=True, slots=True)
class Approval:
    """One approved tool definition and who may use it.

    Attributes:
        definition: the canonical definition the person approved (what the agents are shown).
        enabled_for: ``template:<id>`` and ``agent:<id>`` targets it is enabled for.
        changed_sha256: the hash the server lists now when it differs from the approved one;
            while set, the tool is off everywhere.
    """

    server: str
    tool: str
    sha256: str
    definition: dict[str, Any]
    approved_ms: int
    enabled_for: tuple[str, ...] = ()
    changed_sha256: str | None = None
    changed_ms: int | None = None

    @property
    def key(self) -> str:
        return tool_key(self.server, self.tool)

    @property
    def usable(self) -> bool:
        return self.changed_sha256 is None

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server, "tool": self.tool, "sha256": self.sha256,
            "definition": self.definition, "approved_ms": self.approved_ms,
            "enabled_for": sorted(self.enabled_for), "changed_sha256": self.changed_sha256,
            "changed_ms": self.changed_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Approval:
        definition = dict(data["definition"])
        approval = cls(
            server=str(data["server"]), tool=str(data["tool"]), sha256=str(data["sha256"]),
            definition=definition, approved_ms=int(data["approved_ms"]),
            enabled_for=tuple(str(t) for t in data.get("enabled_for") or ()),
            changed_sha256=data.get("changed_sha256"), changed_ms=data.get("changed_ms"),
        )
        if definition_hash(definition) != approval.sha256:
            raise ValueError(f"the stored definition of {approval.key} does not match its hash")
        return approval


@dataclass
class McpApprovals:
    """The workspace's approvals; every change is written through at once.

    Args:
        path: the JSON file (``<workspace>/mcp_approvals.json``); missing means none approved.
    """

    path: Path
    _items: dict[str, Approval] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _listeners: list[Any] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._items = self._load()

    @classmethod
    def for_workspace(cls, root: Path) -> McpApprovals:
        return cls(root / FILE_NAME)

    def _load(self) -> dict[str, Approval]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise OperationalError(f"{self.path}: cannot read the MCP approvals ({exc})") from exc
        try:
            data = json.loads(text)
            if data.get("version") != FORMAT_VERSION:
                raise ValueError(f"unknown format version {data.get('version')!r}")
            items = [Approval.from_json(item) for item in data["tools"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise OperationalError(
                f"{self.path}: the MCP approvals are damaged ({exc}); move the file aside to "
                "start again with every MCP tool off"
            ) from None
        return {item.key: item for item in items}

    def _save(self) -> None:
        data = {"version": FORMAT_VERSION,
                "tools": [item.to_json() for item in sorted(self._items.values(),
                                                             key=lambda a: a.key)]}
        text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        temporary = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with temporary.open("w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            temporary.replace(self.path)
        except OSError as exc:
            raise OperationalError(f"{self.path}: cannot save the MCP approvals ({exc})") from exc

    def _changed(self) -> None:
        self._save()
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # one failing listener must not stop the others
                logger.exception("an MCP approvals listener failed")

    def subscribe(self, listener: Any) -> None:
        """Call ``listener()`` after every change (the agent manager refreshes its prompts)."""
        self._listeners.append(listener)

    # -- reading -------------------------------------------------------------------------------

    def get(self, server: str, tool: str) -> Approval | None:
        return self._items.get(tool_key(server, tool))

    def all(self) -> list[Approval]:
        return sorted(self._items.values(), key=lambda a: a.key)

    def usable(self) -> list[Approval]:
        return [item for item in self.all() if item.usable]

    def grants(self, agent_id: str, template_id: str) -> frozenset[str]:
        """The MCP permissions of one agent: approved, unchanged, and enabled for it or its
        template. Only ``mcp:`` permissions: an approval can never grant a core group."""
        targets = {agent_target(agent_id), template_target(template_id)}
        return frozenset(
            permission_for(item.server, item.tool)
            for item in self._items.values()
            if item.usable and targets.intersection(item.enabled_for)
        )

    # -- a person's decisions ------------------------------------------------------------------

    def approve(
        self, server: str, tool: str, definition: Mapping[str, Any], now_ms: int,
        enabled_for: Iterable[str] | None = None,
    ) -> Approval:
        """Approve (or re-approve) this exact definition. Re-approving keeps where the tool was
        enabled unless ``enabled_for`` says otherwise."""
        canonical = canonical_definition(definition)
        with self._lock:
            previous = self._items.get(tool_key(server, tool))
            targets = tuple(enabled_for) if enabled_for is not None else (
                previous.enabled_for if previous is not None else ()
            )
            approval = Approval(server, tool, definition_hash(canonical), canonical, now_ms,
                                tuple(sorted(set(targets))))
            self._items[approval.key] = approval
        self._changed()
        return approval

    def set_enabled(self, server: str, tool: str, target: str, enabled: bool) -> Approval:
        """Enable or disable an approved tool for ``template:<id>`` or ``agent:<id>``.

        Raises:
            OperationalError: the tool was never approved (approve it first).
        """
        if not target.startswith(("template:", "agent:")):
            raise ValueError(f"{target!r} is neither template:<id> nor agent:<id>")
        with self._lock:
            current = self._items.get(tool_key(server, tool))
            if current is None:
                raise OperationalError(f"the MCP tool {tool_name(server, tool)} is not approved")
            targets = set(current.enabled_for)
            (targets.add if enabled else targets.discard)(target)
            updated = replace(current, enabled_for=tuple(sorted(targets)))
            self._items[updated.key] = updated
        self._changed()
        return updated

    def revoke(self, server: str, tool: str) -> bool:
        with self._lock:
            removed = self._items.pop(tool_key(server, tool), None)
        if removed is not None:
            self._changed()
        return removed is not None

    def observe(self, server: str, tool: str, listed_sha256: str, now_ms: int) -> Approval | None:
        """Compare what the server lists now with the approval; a difference turns it off.

        Listing the approved definition again after a change does not turn it back on: a
        server that changed once has to be looked at again by a person.
        """
        with self._lock:
            current = self._items.get(tool_key(server, tool))
            if current is None or listed_sha256 == current.sha256 or (
                current.changed_sha256 is not None
            ):
                return current
            updated = replace(current, changed_sha256=listed_sha256, changed_ms=now_ms)
            self._items[updated.key] = updated
        logger.warning("MCP tool %s changed since it was approved; it is off until re-approved",
                       tool_name(server, tool))
        self._changed()
        return updated
