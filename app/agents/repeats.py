"""Refuse an order call that repeats, word for word, an order the same task already placed.

Real models write prose around their calls, and the parser keeps one call in prose as the agent's
commentary. A model that ends a task by quoting the order it placed ("Done: <create_order>...")
would otherwise place it a second time: each step has its own call key, so the broker's
idempotency cannot see that the two calls are one intention. An agent that really wants a second,
identical order in one task says so by giving it its own ``<client_order_id>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from app.agents.conversation_store import StoredMessage
from app.tools.protocol.call import ParamNode, ToolCall
from app.tools.protocol.parser import ParsedResponse
from app.trading.approval import ORDER_TOOLS

_ORDER_ID = re.compile(r'order_id="([^"]*)"')
_SUCCESS = "<status>success</status>"


def _shape(node: ParamNode) -> tuple[object, ...]:
    return (node.tag, node.text.strip(), tuple(_shape(child) for child in node.children))


def call_signature(call: ToolCall) -> tuple[object, ...]:
    """What makes two calls the same intention: the tool and its parameters, in order."""
    return (call.name, tuple(_shape(p) for p in call.params))


def repeated_order(
    call: ToolCall,
    earlier: Sequence[StoredMessage],
    parse: Callable[[str], ParsedResponse],
) -> str | None:
    """The id of the order an identical, successful call of this task placed, else None.

    ``earlier`` is the task's conversation so far (calls and their results, in order).
    """
    if call.name not in ORDER_TOOLS:
        return None
    if any(p.tag == "client_order_id" and p.text.strip() for p in call.params):
        return None  # an explicit id: the broker decides whether it is the same order
    wanted = call_signature(call)
    for index, message in enumerate(earlier):
        if message.kind != "assistant" or wanted[0] not in message.content:
            continue
        parsed = parse(message.content)
        if parsed.call is None or call_signature(parsed.call) != wanted:
            continue
        result = next((m for m in earlier[index + 1:] if m.kind == "tool_result"), None)
        if result is not None and _SUCCESS in result.content:
            found = _ORDER_ID.search(result.content)
            return found.group(1) if found else "(unknown id)"
    return None
