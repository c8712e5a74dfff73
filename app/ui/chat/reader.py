"""Read pages of an agent's conversation for the chat, building their cards off the loop.

The rows come from the conversation history's read API (``app.agents.history``, its own
read-only connection in a worker thread); a page of them is then parsed (XML, base64) into the
chat's entries in a worker thread too, so neither the reading nor the parsing stalls the window.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from app.agents.history import ConversationHistory, HistoryRows, MessageKey
from app.ui.chat.builder import ConversationBuilder
from app.ui.chat.entries import Message, ToolEntry


@dataclass(slots=True)
class HistoryPage:
    """Entries built from one page of messages, oldest first."""

    builder: ConversationBuilder
    oldest_id: int | None  # where the next "load earlier" continues; None: the page is empty
    more: bool  # older messages exist


class ChatReader:
    """The chat's reads of the workspace's conversations, each off the loop."""

    def __init__(self, history: ConversationHistory) -> None:
        self.history = history

    def close(self) -> None:
        self.history.close()

    async def page(self, agent_id: str, before: Message | None, limit: int) -> HistoryPage:
        """The ``limit`` messages before ``before`` (the newest ones when None), as entries.

        ``before`` may be a live message without a row id; its id is looked up first.
        """
        key = None if before is None else MessageKey(
            before.agent_id, before.task_id, before.step, before.kind, before.content,
            before.message_id,
        )
        rows = await self.history.page(agent_id, key, limit)
        return await asyncio.to_thread(_build, agent_id, rows)

    async def durations(self, agent_id: str, from_ms: int, to_ms: int) -> dict[str, float]:
        """Durations of the agent's calls whose results were stored between the two times,
        by result XML (the exact text the conversation holds)."""
        return await self.history.durations(agent_id, from_ms, to_ms)


def _build(agent_id: str, rows: HistoryRows) -> HistoryPage:
    builder = ConversationBuilder(agent_id, rows.questions.get)
    builder.feed_all(Message.stored(row) for row in rows.messages)
    for entry in builder.entries.values():
        if isinstance(entry, ToolEntry) and entry.result_xml and entry.market_ms is not None:
            entry.duration_ms = rows.durations.get(entry.result_xml)
    oldest = rows.messages[0].id if rows.messages else None
    return HistoryPage(builder, oldest, rows.more)
