"""Who an actor id is, in words: one resolver every panel of the window shares.

Agents are known by ids (UUIDs) everywhere below the window: orders, fills, tool calls, memory
folders, the text agents write ("a signal from agent:7e176694-…"). A person knows them by name.
So every panel asks this one resolver: "you" for the person, an agent's name (a deleted agent's
too, once seen), else the id shortened; the full id goes into a tooltip, where it is at hand
without taking a column's width. ``label_ids`` rewrites the ids found in free text (a journal
line, a tool call's parameters) to names, for reading; what is stored is never changed.

The window makes one resolver and hands it to its panels; ``current()`` is the same resolver for
code that is handed none (the chart's trade markers).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from app.domain.agents import PERSON_ID

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_IDS = re.compile(rf"(?:agent:)?({_UUID})")
_MARKDOWN_SPECIAL = re.compile(r"[\\`*_\[\]<>]")
PERSON_NAME = "you"
SENDER_NAME = "Kestrel"  # notifications Kestrel sends itself (app.orchestration.notify.SENDER)

Lookup = Callable[[str], str | None]


def short_id(agent_id: str) -> str:
    """An unknown agent's id, short enough for a cell (a UUID's first block)."""
    return agent_id if len(agent_id) <= 12 else f"{agent_id[:8]}…"


class AgentNames:
    """Names by actor id, looked up once and kept (a deleted agent keeps the name it had).

    Args:
        lookup: an agent's name from its id, None when no such agent (the agent store).
    """

    def __init__(self, lookup: Lookup | None = None) -> None:
        self._lookup = lookup
        self._names: dict[str, str] = {}
        self._unknown: set[str] = set()  # ids looked up in vain (a task's, an order's)

    def lookup(self, actor: str) -> str | None:
        """The agent's (or the person's) name, None when it is not known."""
        if actor == PERSON_ID:
            return PERSON_NAME
        if actor == "kestrel":
            return SENDER_NAME
        found = self._names.get(actor)
        if found is None and self._lookup is not None and actor and actor not in self._unknown:
            found = self._lookup(actor)
            if found is None:
                self._unknown.add(actor)
            else:
                self._names[actor] = found
        return found

    def __call__(self, actor: str) -> str | None:
        """The resolver is itself an ``agent_name`` lookup, for views that take one."""
        return self.lookup(actor)

    def name(self, actor: str) -> str:
        """What a cell shows for ``actor``: its name, else its id shortened."""
        return self.lookup(actor) or short_id(actor)

    def tooltip(self, actor: str) -> str:
        """The name and the whole id, for a tooltip."""
        name = self.lookup(actor)
        if name is None:
            return f"id {actor}" if actor else ""
        return name if actor in (PERSON_ID, "kestrel") else f"{name}\nid {actor}"

    def changed(self, actor: str) -> None:
        """An agent was created or changed: read its name again when next asked (a deleted
        agent's is kept: its orders and trades still name it)."""
        self._names.pop(actor, None)
        self._unknown.discard(actor)

    def label_ids(self, text: str) -> str:
        """``text`` with each known agent's id (``agent:<id>`` or the bare id) as its name."""
        if "-" not in text:
            return text

        def named(match: re.Match[str]) -> str:
            found = self.lookup(match.group(1))
            return found if found is not None else match.group(0)

        return _IDS.sub(named, text)

    def link_ids(self, markdown: str) -> str:
        """Markdown with each known agent's id as a link showing its name; hovering it shows the
        id, and its target is ``agent:<id>`` (a viewer may open that agent's folder)."""
        if "-" not in markdown:
            return markdown

        def linked(match: re.Match[str]) -> str:
            agent_id = match.group(1)
            found = self.lookup(agent_id)
            if found is None:
                return match.group(0)
            name = _MARKDOWN_SPECIAL.sub(lambda m: "\\" + m.group(0), found)
            return f'[{name}](agent:{agent_id} "id {agent_id}")'

        return _IDS.sub(linked, markdown)

    def ids_in(self, text: str) -> list[tuple[str, str]]:
        """The known agents whose ids ``text`` holds: (id, name), in order, once each."""
        seen: dict[str, str] = {}
        for match in _IDS.finditer(text):
            name = self.lookup(match.group(1))
            if name is not None:
                seen.setdefault(match.group(1), name)
        return list(seen.items())


_current = [AgentNames()]


def current() -> AgentNames:
    """The window's resolver (before a window installs one: ids shortened, the person "you")."""
    return _current[0]


def install(names: AgentNames) -> None:
    """Make ``names`` the resolver ``current()`` returns (the window, once it is open)."""
    _current[0] = names
