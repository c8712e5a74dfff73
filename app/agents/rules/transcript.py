"""Read a task's conversation back into facts: the task, and each call with its result or reply.

The rule engine keeps no state between turns. Every answer is a pure function of the request
(role, configuration and the conversation so far), exactly what an LLM gets, so a run repeats
bit for bit, a redelivered task picks up where it stopped, and a replayed recording matches.
Tool results are our own well-formed envelopes, parsed with the same hardened settings as model
output (no entities, no network, no DTD); anything unreadable becomes an error fact, never an
exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from lxml import etree

from app.agents import answer_blocks
from app.agents.llm.port import ChatMessage
from app.agents.task_data import data_results, split_task_data
from app.domain.clock import parse_time
from app.tools.protocol.call import ParamNode
from app.tools.protocol.parser import parse_response
from app.tools.protocol.result import (
    CACHED_MESSAGES,
    Result,
    parse_result,
    result_tool,
    xml_parser,
)

USER_MESSAGE = "USER_MESSAGE"
# Parsed first messages (the task and the results its data block carries), kept for the later
# turns of the tasks in progress: one per agent working is enough; more would keep every
# carried result's XML tree alive long after its task ended.
CACHED_TASKS = 16


@dataclass(frozen=True, slots=True)
class TaskFacts:
    """What started the work: a person's text, or a ``<task>`` with its JSON payload."""

    task_type: str
    payload: Mapping[str, Any]
    text: str = ""
    source: str = "user"
    task_id: str = ""
    market_time_ms: int | None = None
    reply_expected: bool = False
    # the results the task carried in its data block: (tool name, result), in order
    data: tuple[tuple[str, Result], ...] = ()

    @property
    def is_user_message(self) -> bool:
        return self.task_type == USER_MESSAGE


@dataclass(frozen=True, slots=True)
class Step:
    """One call the engine made, with what came back: a tool result or a person's reply."""

    name: str
    params: Mapping[str, Any]
    thinking: str
    result: Result | None = None
    reply: str | None = None


@dataclass(frozen=True, slots=True)
class Transcript:
    task: TaskFacts
    steps: tuple[Step, ...]

    def find(self, name: str, **match: str) -> Step | None:
        """The latest step calling ``name`` whose parameters equal ``match`` (as text)."""
        for step in reversed(self.steps):
            if step.name == name and all(
                str(step.params.get(key, "")) == value for key, value in match.items()
            ):
                return step
        return None

    def carried(self, tool: str, **attrs: str) -> Step | None:
        """The result of ``tool`` the task carried in its data block, as a step, when its first
        data element (or that element's first child, for a snapshot's bar) has ``attrs``; else
        None. How a policy uses the data a task brings instead of calling for it."""
        for name, result in self.task.data:
            if name != tool or result.first() is None:
                continue
            first = result.first()
            assert first is not None
            inner = first[0] if len(first) else first
            if all(first.get(k, inner.get(k)) == v for k, v in attrs.items()):
                return Step(tool, MappingProxyType({}), "[task data]", result)
        return None

    def tagged(self, tag: str) -> Step | None:
        """The latest step whose thinking starts with ``[tag]``: how the engine names its own
        plan steps, so a later turn finds what an earlier one got back."""
        prefix = f"[{tag}]"
        for step in reversed(self.steps):
            if step.thinking.startswith(prefix):
                return step
        return None

    def block(self, name: str) -> Step | None:
        """What writing the block ``name`` of the engine's final answer returned, when the
        answer carried one and a block was refused (so the task went on)."""
        return self.tagged(f"block {name}")

    @property
    def answered(self) -> bool:
        """Whether the engine already gave a final answer with blocks in this task (one of
        them was refused, so it answers again)."""
        return any(step.thinking.startswith(BLOCK_TAG) for step in self.steps)

    def count(self, name: str) -> int:
        return sum(1 for step in self.steps if step.name == name)

    @property
    def last(self) -> Step | None:
        return self.steps[-1] if self.steps else None


def params_of(nodes: Sequence[ParamNode]) -> dict[str, Any]:
    """A call's parameters as plain values: text, or a list of the children's texts."""
    values: dict[str, Any] = {}
    for node in nodes:
        if node.children:
            values[node.tag] = [child.text for child in node.children] if all(
                not child.children for child in node.children
            ) else {child.attrs.get("name", child.tag): child.text for child in node.children}
        else:
            values[node.tag] = node.text
    return values


@lru_cache(maxsize=CACHED_MESSAGES)
def _call_of(content: str) -> tuple[str, Mapping[str, Any], str] | None:
    """An assistant message as (tool, params, thinking); cached, as every turn re-reads the
    whole conversation and all but the newest message were read before."""
    parsed = parse_response(content)
    if parsed.call is None:
        return None
    params = MappingProxyType(params_of(parsed.call.params))  # shared by the cache: read-only
    return parsed.call.name, params, parsed.thinking or ""


BLOCK_TAG = "[block"


@lru_cache(maxsize=CACHED_MESSAGES)
def blocks_of(content: str) -> tuple[str, ...] | None:
    """The block names of a final answer the engine wrote with blocks, in order, or None. Its
    answers with blocks start with text; its calls start with ``<thinking>``."""
    if content.lstrip().startswith("<"):
        return None
    found = answer_blocks.split(content, None)
    if found is None:
        return None
    return tuple(answer_blocks.block_names(found.blocks))


def _block_steps(names: tuple[str, ...], results: str | None) -> list[Step]:
    """One step per written block, tagged ``[block <name>]``, with what writing it returned
    (a refusal of the whole set stands for every block)."""
    found = [parse_result(envelope) for envelope in answer_blocks.envelopes(results or "")]
    steps = []
    for number, name in enumerate(names):
        result = found[number] if number < len(found) else (found[0] if found else None)
        steps.append(Step(f"block:{name}", MappingProxyType({}), f"{BLOCK_TAG} {name}]", result))
    return steps


@lru_cache(maxsize=CACHED_TASKS)
def parse_task(content: str) -> TaskFacts:
    """The first message: a ``<task>`` element, or the person's plain text; either may end in
    the task's data block (``app.agents.task_data``). Cached like the other messages: every
    turn of the task reads it again, and it carries the task's data (several results)."""
    message, block = split_task_data(content)
    data = tuple(
        (result_tool(envelope), parse_result(envelope)) for envelope in data_results(block)
    ) if block is not None else ()
    text = message.strip()
    if not text.startswith("<task "):
        return TaskFacts(USER_MESSAGE, {}, text=text, data=data)
    try:
        root = etree.fromstring(text.encode("utf-8"), xml_parser())
        payload = json.loads(root.text or "{}")
    except (etree.XMLSyntaxError, ValueError):
        return TaskFacts("UNREADABLE_TASK", {}, text=text)
    market_time = root.get("market_time")
    try:
        market_ms = parse_time(market_time) if market_time else None
    except ValueError:
        market_ms = None
    return TaskFacts(
        task_type=root.get("task_type", ""),
        # shared by the cache: read-only
        payload=MappingProxyType(payload if isinstance(payload, dict) else {"value": payload}),
        source=root.get("source", ""),
        task_id=root.get("task_id", ""),
        market_time_ms=market_ms,
        reply_expected=root.get("reply_expected") == "true",
        data=data,
    )


def read_transcript(messages: Sequence[ChatMessage]) -> Transcript:
    """Pair every call of the engine's with the message that answered it.

    Raises:
        ValueError: the conversation is not one the engine could have produced (no first user
            message, or an assistant message that is not a single call), which only happens when
            a recording or another provider's conversation is handed to the engine.
    """
    if not messages or messages[0].role != "user":
        raise ValueError("the conversation does not start with the task")
    task = parse_task(messages[0].content)
    steps: list[Step] = []
    index = 1
    while index < len(messages):
        message = messages[index]
        if message.role != "assistant":
            raise ValueError(f"message {index} should be the engine's call, got a user message")
        answer = messages[index + 1].content if index + 1 < len(messages) else None
        blocks = blocks_of(message.content)
        if blocks is not None:  # a final answer whose blocks went back because one failed
            steps.extend(_block_steps(blocks, answer))
            index += 2
            continue
        call = _call_of(message.content)
        if call is None:
            raise ValueError(f"message {index} is not a tool call the engine made")
        name, params, thinking = call
        result: Result | None = None
        reply: str | None = None
        if answer is not None:
            if answer.lstrip().startswith("<tool_result"):
                result = parse_result(answer)
            else:
                reply = answer
        steps.append(Step(name, params, thinking, result, reply))
        index += 2
    return Transcript(task, tuple(steps))
