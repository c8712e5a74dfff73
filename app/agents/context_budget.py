"""Keep each request to a language model within the agent's token budget.

Every step of a task resends the whole conversation, so a long task (an Orchestrator setting up
several agents, a Trader reading file after file) costs more with every step, and a local model
with an 8k context simply fails. Past the budget (the template's ``limits.context_tokens``), the
oldest tool results are replaced by a short summary of what they held (the tool, the kind and
number of items, their identifying attributes) and a note that the tool can be called again. What
is never touched: the static system prompt, which comes first so provider prompt caches hit; the
task message with its data block; the model's own answers; the newest ``KEEP_RECENT`` results.

The fitting is a pure function of the messages, so a replayed run sends byte-identical requests,
and a summarised result stays summarised at every later step (the cut only moves forward), which
keeps the prefix of later requests stable for the provider's cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from lxml import etree

from app.agents.llm.port import ChatMessage
from app.agents.prompt import estimate_tokens
from app.domain.errors import ErrorCode
from app.tools.protocol.render import el, render_error, render_rejected, render_success

KEEP_RECENT = 2
_ATTRS_SHOWN = 4
_MESSAGE_CHARS = 300
_RESULT = "<tool_result"


@dataclass(frozen=True, slots=True)
class Fitted:
    messages: list[ChatMessage]
    tokens: int  # estimated, system prompt included
    summarised: int  # tool results replaced by their summary


@lru_cache(maxsize=4096)
def _tokens(text: str) -> int:
    return estimate_tokens(text)


def fit_context(system: str, messages: Sequence[ChatMessage], budget: int) -> Fitted:
    """``messages`` with their oldest tool results summarised until system prompt and messages
    fit ``budget`` tokens (by ``estimate_tokens``, which never undercounts cl100k), or until
    nothing more may be summarised."""
    sizes = [_tokens(m.content) for m in messages]
    total = _tokens(system) + sum(sizes)
    fitted = list(messages)
    if total <= budget:
        return Fitted(fitted, total, 0)
    results = [i for i, m in enumerate(messages) if i > 0 and m.role == "user"
               and m.content.lstrip().startswith(_RESULT)]
    summarised = 0
    for index in results[:-KEEP_RECENT] if KEEP_RECENT else results:
        if total <= budget:
            break
        short = summarise(messages[index].content, sizes[index])
        saved = sizes[index] - _tokens(short)
        if saved <= 0:
            continue
        fitted[index] = replace(messages[index], content=short)  # still answers its call
        total -= saved
        summarised += 1
    return Fitted(fitted, total, summarised)


@lru_cache(maxsize=1024)
def summarise(result_xml: str, tokens: int) -> str:
    """A short envelope standing for an older result: its status, and for data what it held."""
    try:
        root = etree.fromstring(result_xml.strip().encode("utf-8"), _PARSER)
    except etree.XMLSyntaxError:
        root = None
    if root is None or root.tag != "tool_result":
        return render_success("unknown", el("summarised", _NOTE, original_tokens=tokens)).xml
    tool = root.get("tool_name") or "unknown"
    status = (root.findtext("status") or "").strip()
    if status == "error":
        code = (root.findtext("error_details/error_code") or "").strip()
        message = (root.findtext("error_details/message") or "").strip()
        try:
            error_code = ErrorCode(code)
        except ValueError:
            error_code = ErrorCode.INTERNAL_ERROR
        return render_error(tool, error_code, _cut(message)).xml
    if status == "rejected":
        return render_rejected(tool, (root.findtext("rule") or "").strip(),
                               _cut((root.findtext("reason") or "").strip())).xml
    data = root.find("data")
    held = "; ".join(_describe(item) for item in data) if data is not None else "nothing"
    return render_success(
        tool, el("summarised", f"{_NOTE} It held: {held or 'nothing'}.", original_tokens=tokens)
    ).xml


_NOTE = (
    "An older result, summarised to keep this conversation within its token budget; call the "
    "tool again if you need it whole."
)
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                          huge_tree=False, remove_comments=True, remove_pis=True)


def _describe(item: etree._Element) -> str:
    """``klines_data (symbol=BTC/USDT, interval=1h): 30 kline``."""
    if not isinstance(item.tag, str):
        return ""
    attrs = [f"{k}={v}" for k, v in list(item.attrib.items())[:_ATTRS_SHOWN]]
    children: dict[str, int] = {}
    for child in item:
        if isinstance(child.tag, str):
            children[child.tag] = children.get(child.tag, 0) + 1
    text = f"{item.tag}" + (f" ({', '.join(attrs)})" if attrs else "")
    if children:
        text += ": " + ", ".join(f"{count} {tag}" for tag, count in children.items())
    return text


def _cut(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + "…"
