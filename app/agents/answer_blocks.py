"""Blocks after a final answer: the memory writes that close a task, made for the agent.

Why: an hourly analysis that finds nothing to do (a HOLD bar) used to end in three model calls,
two of them bookkeeping: append the entry to ``analysis_log.md``, then rewrite
``current_market_assessment.yaml``, each call resending the whole conversation. Now the final
answer carries those writes as blocks after its text, and the runtime makes them::

    BTC/USDT 1h: HOLD (confidence 0.2), nothing to dispatch.
    <analysis_log>
    ## 2024-01-02T03:00:00Z · BTC/USDT 1h · HOLD (confidence 0.2)
    ...
    </analysis_log>
    <assessment>
    schema_version: 1
    ...
    </assessment>

The blocks an agent may write are its template's ``answer_blocks``: each names the memory tool
it stands for (``append_to_agent_memory_file``, ``write_agent_memory_file`` or
``log_journal_entry``) and the file (``{symbol_key}`` is the task's symbol). Each block becomes
an ordinary call of that tool, made through the executor with the agent's own context (so its
permissions hold and the audit trail records it like any call), with the block's text as the
tool's plain-text ``content``. A block's text is read like a free-text parameter: raw '<' and
'&' are text where they cannot be markup, CDATA passes whole, and one newline right after the
opening tag is dropped.

The task ends only once every block is written. When one is refused (invalid YAML, a full log),
the results go back to the model, which answers again (with the failed blocks corrected, or with
a call first); what was written stays written.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.agents.task_data import task_symbol
from app.agents.templates import SYMBOL_KEY, AnswerBlock
from app.domain.agents import Task
from app.domain.errors import ErrorCode
from app.memory.roles import symbol_key
from app.tools.protocol.call import ParamNode, ToolCall
from app.tools.protocol.free_text import FreeText
from app.tools.protocol.parser import parse_response
from app.tools.protocol.render import ToolResult, render_error

WRAPPER = "answer_blocks"  # the element the blocks are read inside (never written by a model)
# the blocks of a stored answer, whatever the template (readers that only replay what was written)
ANY_NAME = r"[a-z][a-z0-9_]{0,31}"
_LEADING_THINKING = re.compile(r"\A\s*(?:<(think(?:ing)?)>.*?</\1>\s*)+", re.DOTALL)
_STATUS = re.compile(r"<status>([a-z]+)</status>")
NOT_WRITTEN_NOTE = (
    "Not every block of your answer was written (results below, in the blocks' order); the task "
    "is not done. Answer again: the corrected blocks that failed after your answer's text, or a "
    "tool call first if one is needed. Blocks that succeeded are written; do not repeat them."
)


@dataclass(frozen=True, slots=True)
class Found:
    """An answer split in two: its text (with any leading thinking) and its blocks."""

    head: str
    blocks: str

    @property
    def has_text(self) -> bool:
        """Whether the answer says something before its blocks (thinking alone does not)."""
        return bool(_LEADING_THINKING.sub("", self.head).strip())


@dataclass(frozen=True, slots=True)
class BlockWrite:
    """One block as the call that writes it, or the refusal saying why it cannot be written."""

    name: str
    call: ToolCall | None = None
    refusal: ToolResult | None = None


@lru_cache(maxsize=64)
def _opening(names: tuple[str, ...] | None) -> re.Pattern[str]:
    alternatives = ANY_NAME if names is None else "|".join(re.escape(n) for n in names)
    return re.compile(rf"^[ \t]*<({alternatives})\s*>", re.MULTILINE)


def split(text: str, names: Collection[str] | None) -> Found | None:
    """The answer's text and its blocks, or None when it carries none.

    The blocks start at the first line after the leading thinking that opens one of ``names``
    (any lower_snake_case name when None: for readers of answers already written) and run to
    the end of the answer.
    """
    if names is not None and not names:
        return None
    if "<" not in text:
        return None
    thinking = _LEADING_THINKING.match(text)  # a block named in the thinking opens nothing
    after = thinking.end() if thinking is not None else 0
    found = _opening(None if names is None else tuple(sorted(names))).search(text, after)
    if found is None:
        return None
    return Found(text[:found.start()].rstrip(), text[found.start():].strip())


def block_names(blocks: str) -> list[str]:
    """The names of the blocks of an answer's block text, in order (for readers that replay an
    answer already written; the engine escapes its blocks' text, so no line in one opens a tag)."""
    return _opening(None).findall(blocks)


def _refused(name: str, message: str, code: ErrorCode = ErrorCode.PARSE_ERROR,
             tool: str = WRAPPER) -> BlockWrite:
    """A block (or, named ``WRAPPER``, the whole set) that is not written, and why."""
    details = {} if name == WRAPPER else {"block": name}
    return BlockWrite(name, refusal=render_error(tool, code, message, details))


def _nodes(found: Found, names: Sequence[str]) -> list[ParamNode] | BlockWrite:
    """The blocks as elements, or the refusal of the whole set (nothing is written then)."""
    wrapped = f"<{WRAPPER}>{found.blocks}</{WRAPPER}>"
    parsed = parse_response(wrapped, (WRAPPER,), FreeText({WRAPPER: frozenset(names)}))
    if parsed.call is None:
        message = parsed.error.message if parsed.error is not None else "unreadable blocks"
        return _refused(WRAPPER, f"The blocks after your answer could not be read: {message} "
                        "Nothing was written.")
    call = parsed.call
    allowed = ", ".join(f"<{n}>" for n in names)
    if call.stray_text:
        return _refused(WRAPPER, f"Text stands between or after the blocks "
                        f"({call.stray_text[:40]!r}); after the answer's text come only blocks "
                        f"({allowed}). Nothing was written.")
    seen: set[str] = set()
    for node in call.params:
        if node.tag not in names:
            return _refused(node.tag, f"<{node.tag}> is not a block of yours; yours are "
                            f"{allowed}. Nothing was written.")
        if node.tag in seen:
            return _refused(node.tag, f"<{node.tag}> appears twice; give each block once. "
                            "Nothing was written.")
        if node.children or node.attrs:
            inner = node.children[0].tag if node.children else "an attribute"
            return _refused(node.tag, f"<{node.tag}> holds {inner}; a block holds text only "
                            "(wrap it in <![CDATA[ ... ]]>). Nothing was written.")
        seen.add(node.tag)
    return list(call.params)


def writes(
    found: Found, spec: Mapping[str, AnswerBlock], task: Task, config: Mapping[str, Any]
) -> list[BlockWrite]:
    """The calls that write ``found``'s blocks, in the order the answer gives them."""
    nodes = _nodes(found, sorted(spec))
    if isinstance(nodes, BlockWrite):
        return [nodes]
    symbol = task_symbol(task, config)
    out: list[BlockWrite] = []
    for node in nodes:
        block = spec[node.tag]
        params: list[ParamNode] = []
        if block.file_path is not None:
            path = block.file_path
            if SYMBOL_KEY in path:
                key = _key(symbol)
                if key is None:
                    out.append(_refused(
                        node.tag, f"<{node.tag}> writes the file of the task's symbol, and this "
                        "task names no single symbol you work on. Write the file with "
                        f"{block.tool} instead.", ErrorCode.INVALID_PARAMETER, block.tool))
                    continue
                path = path.replace(SYMBOL_KEY, key)
            params.append(ParamNode("file_path", path))
        params.append(ParamNode("content", node.text))
        if block.file_type_hint is not None:
            params.append(ParamNode("file_type_hint", block.file_type_hint))
        out.append(BlockWrite(node.tag, ToolCall(block.tool, tuple(params))))
    return out


def _key(symbol: str | None) -> str | None:
    if symbol is None:
        return None
    try:
        return symbol_key(symbol)
    except ValueError:
        return None


def results_message(results: Sequence[ToolResult]) -> str:
    """What the runtime stores after writing the blocks: their results, in order, led by what
    to do when one failed (the message the model then reads)."""
    envelopes = "\n".join(result.xml for result in results)
    if all(result.status == "success" for result in results):
        return envelopes
    return f"{NOT_WRITTEN_NOTE}\n{envelopes}"


def envelopes(message: str) -> list[str]:
    """The ``<tool_result>`` envelopes of a results message, as text, in order (a result's own
    text is escaped, so nothing inside one can look like the start of another)."""
    return ["<tool_result " + part.strip() for part in message.split("<tool_result ")[1:]]


@dataclass(frozen=True, slots=True)
class Written:
    """One block of an answer already handled, as the call it was: for readers of a run
    (``kestrel eval``'s task endings), which know no template."""

    tool: str
    file_path: str
    content: str
    ok: bool


_TOOL_NAME = re.compile(r'tool_name="([^"]*)"')
_PATH_ATTR = re.compile(r'file_path(?:_written|_appended)?="([^"]*)"')


def written(answer: str, results: str) -> list[Written]:
    """The blocks of a stored answer paired with the results their writes got, in order."""
    found = split(answer, None)
    if found is None:
        return []
    names = block_names(found.blocks)
    nodes = _nodes(found, names)
    if isinstance(nodes, BlockWrite):
        return []
    out = []
    for node, envelope in zip(nodes, envelopes(results), strict=False):
        tool = _TOOL_NAME.search(envelope)
        path = _PATH_ATTR.search(envelope)
        status = _STATUS.search(envelope[:400])
        out.append(Written(tool.group(1) if tool else "", path.group(1) if path else "",
                           node.text, status is not None and status.group(1) == "success"))
    return out


def all_written(message: str) -> bool:
    """Whether every block of a results message was written."""
    found = envelopes(message)
    return bool(found) and all(
        (status := _STATUS.search(envelope[:400])) is not None and status.group(1) == "success"
        for envelope in found
    )


def summary(message: str) -> str:
    """A results message in a line, for people: each block's tool and outcome."""
    parts = []
    for envelope in envelopes(message):
        tool = re.search(r'tool_name="([^"]*)"', envelope[:200])
        status = _STATUS.search(envelope[:400])
        parts.append(f"{tool.group(1) if tool else 'block'}: "
                     f"{status.group(1) if status else 'unknown'}")
    return "Written after the answer: " + "; ".join(parts) + "."
