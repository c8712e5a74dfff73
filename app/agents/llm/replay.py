"""Record every model exchange of a run, and play a recording back so the run repeats exactly.

Why: a backtest with a language model is slow, costs money and is not reproducible; replayed, it
runs offline, at no cost, with identical decisions, and a test can drive agents with real model
answers. Exchanges are keyed by (agent, n-th call of that agent) and checked by a hash of what was
asked, so a replay whose conversation drifted is reported — which agent, which call, which message
and how it differs — never papered over with a stale answer.

File format (JSON Lines, append-only, so a crash loses at most the line being written):

* ``{"type": "text", "sha": ..., "text": ...}`` — each distinct system prompt or message, once;
* ``{"type": "exchange", "agent_id", "index", "task_id", "request_hash", "model", "system": sha,
  "messages": [[role, sha], ...], "is_llm", "response": {text, usage, model, provider,
  finish_reason, latency_ms[, tool_calls, usage_estimated]}}`` — one per call, referring to the
  texts by hash, so a long conversation is not stored again at every step. ``tool_calls`` (the
  answer's native calls: ``[{id, name, arguments}]``) and ``usage_estimated`` are written only
  when there are calls, or Kestrel counted the tokens itself; older recordings read as before.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.agents.llm.port import (
    ChatMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    LLMUsage,
    NativeCall,
    PermanentLLMError,
    ReplayMismatchError,
    StreamCallback,
)

NAME = "replay"
_EXCERPT = 40


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_hash(model: str, system: str, messages: list[ChatMessage]) -> str:
    """sha256 of the canonical JSON of model, system prompt and messages (a message's native
    call and the call it answers only when it has them, so older recordings keep their hash)."""
    payload = {"model": model, "system": system,
               "messages": [_message_data(m) for m in messages]}
    return _sha(_canonical(payload))


def _message_data(message: ChatMessage) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.call is not None:
        data["call"] = _call_data(message.call)
    if message.call_id:
        data["call_id"] = message.call_id
    if message.said:
        data["said"] = message.said
    return data


def _call_data(call: NativeCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _response_data(response: LLMResponse) -> dict[str, Any]:
    data: dict[str, Any] = {
        "text": response.text, "usage": _usage_dict(response.usage), "model": response.model,
        "provider": response.provider, "finish_reason": response.finish_reason,
        "latency_ms": round(response.latency_ms, 3),
    }
    if response.tool_calls:
        data["tool_calls"] = [_call_data(c) for c in response.tool_calls]
    if response.usage_estimated:
        data["usage_estimated"] = True
    return data


def _usage_dict(usage: LLMUsage) -> dict[str, int]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cached_input_tokens": usage.cached_input_tokens}


class RecordingProvider:
    """Wraps any provider and appends each successful exchange to ``path``.

    It answers exactly as ``inner`` does (same name, same ``is_llm``). Recording into an existing
    file continues it: call numbers go on from the calls already recorded for each agent, so an
    app restarted mid-run keeps one consistent recording. Record a new run into a new file.
    """

    def __init__(self, inner: LLMProvider, path: Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.name = inner.name
        self.is_llm = inner.is_llm
        self._counts: dict[str, int] = defaultdict(int)
        self._known: set[str] = set()
        self._lock = threading.Lock()
        if self.path.is_file():
            recording = Recording.load(self.path)
            self._known = set(recording.texts)
            for agent_id, index in recording.exchanges:
                self._counts[agent_id] = max(self._counts[agent_id], index + 1)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse:
        response = await self.inner.complete(request, on_delta)
        self._append(request, response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _append(self, request: LLMRequest, response: LLMResponse) -> None:
        with self._lock:
            index = self._counts[request.agent_id]
            self._counts[request.agent_id] = index + 1
            lines: list[str] = []
            refs: list[str] = []
            for text in (request.system, *(m.content for m in request.messages)):
                sha = _sha(text)
                refs.append(sha)
                if sha not in self._known:
                    self._known.add(sha)
                    lines.append(_canonical({"type": "text", "sha": sha, "text": text}))
            exchange = {
                "type": "exchange", "agent_id": request.agent_id, "index": index,
                "task_id": request.task_id,
                "request_hash": request_hash(request.model, request.system, request.messages),
                "model": request.model, "system": refs[0],
                "messages": [[m.role, sha] for m, sha in zip(request.messages, refs[1:],
                                                             strict=True)],
                "is_llm": self.is_llm,
                "response": _response_data(response),
            }
            lines.append(_canonical(exchange))
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
                handle.flush()


@dataclass(frozen=True, slots=True)
class Recording:
    """A parsed recording: texts by hash, exchanges by (agent_id, index)."""

    texts: dict[str, str]
    exchanges: dict[tuple[str, int], dict[str, Any]]

    @classmethod
    def load(cls, path: Path) -> Recording:
        """Read a recording; a truncated last line (a crash while writing) is ignored.

        Raises:
            PermanentLLMError: the file is missing or a line other than the last is corrupt.
        """
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise PermanentLLMError(NAME, f"cannot read the recording {path}: {exc}") from exc
        texts: dict[str, str] = {}
        exchanges: dict[tuple[str, int], dict[str, Any]] = {}
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                if number == len(lines):
                    break
                raise PermanentLLMError(
                    NAME, f"{path} line {number} is not valid JSON: {exc}") from exc
            if entry.get("type") == "text":
                texts[entry["sha"]] = entry["text"]
            elif entry.get("type") == "exchange":
                exchanges[(entry["agent_id"], int(entry["index"]))] = entry
        return cls(texts, exchanges)


class ReplayProvider:
    """Answers the n-th call of each agent with the n-th recorded answer of that agent.

    Usage and latency in the answer are the recorded ones, so a report can show what the
    original run used and how long it waited; the run itself spends nothing new, and the
    caller must price provider "replay" at 0 (the lead's pricer does). ``response.provider``
    is "replay"; ``recorded_provider`` and ``is_llm`` tell what answered originally. A changed
    request raises ``ReplayMismatchError`` naming the agent, the call and the first differing
    message with an excerpt of both versions.
    """

    name = NAME

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise PermanentLLMError(NAME, f"there is no recording at {self.path}")
        self._recording = Recording.load(self.path)
        self._counts: dict[str, int] = defaultdict(int)
        first = min(self._recording.exchanges.items(), key=lambda item: item[0][1], default=None)
        self.is_llm = bool(first[1].get("is_llm", True)) if first is not None else True
        self.recorded_provider = (
            str(first[1]["response"].get("provider", "")) if first is not None else ""
        )

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse:
        index = self._counts[request.agent_id]
        self._counts[request.agent_id] = index + 1
        exchange = self._recording.exchanges.get((request.agent_id, index))
        where = f"agent {request.agent_id} call #{index}"
        if exchange is None:
            recorded = sum(1 for agent, _ in self._recording.exchanges if agent == request.agent_id)
            raise ReplayMismatchError(
                NAME, f"{where}: the recording {self.path.name} has no such call (it holds "
                f"{recorded} call{'s' if recorded != 1 else ''} of this agent)")
        if request_hash(request.model, request.system, request.messages) != exchange[
            "request_hash"
        ]:
            raise ReplayMismatchError(NAME, f"{where}: {self._difference(request, exchange)}")
        answer = exchange["response"]
        if on_delta is not None and answer["text"]:
            on_delta(answer["text"])
        return LLMResponse(
            text=answer["text"], usage=LLMUsage(**answer["usage"]), model=answer["model"],
            provider=NAME, latency_ms=float(answer.get("latency_ms", 0.0)),
            finish_reason=answer.get("finish_reason", "stop"),
            tool_calls=tuple(NativeCall(str(c["id"]), str(c["name"]), c["arguments"])
                             for c in answer.get("tool_calls", ())),
            usage_estimated=bool(answer.get("usage_estimated", False)),
        )

    async def aclose(self) -> None:
        return None

    def _difference(self, request: LLMRequest, exchange: dict[str, Any]) -> str:
        """Say in words what differs first between the request and the recorded one."""
        texts = self._recording.texts
        if request.model != exchange["model"]:
            return f"the model is {request.model!r}, the recording asked {exchange['model']!r}"
        recorded_system = texts.get(exchange["system"], "")
        if request.system != recorded_system:
            return "the system prompt differs: " + _excerpts(recorded_system, request.system)
        recorded = [(role, texts.get(sha, "")) for role, sha in exchange["messages"]]
        for position, (message, (role, text)) in enumerate(
            zip(request.messages, recorded, strict=False)
        ):
            if message.role != role:
                return (f"message {position} is from {message.role!r}, the recording's from "
                        f"{role!r}")
            if message.content != text:
                return (f"message {position} ({role}) differs: "
                        + _excerpts(text, message.content))
            if message.call is not None or message.call_id:
                return (f"message {position} ({role}) is the same text, but its native tool "
                        "call (or the call it answers) differs from the recording's")
        return (f"the request has {len(request.messages)} messages, the recording "
                f"{len(recorded)}")


def _excerpts(recorded: str, now: str) -> str:
    """Short excerpts of both texts around the first character where they differ."""
    first = next((i for i, (a, b) in enumerate(zip(recorded, now, strict=False)) if a != b),
                 min(len(recorded), len(now)))
    start = max(0, first - _EXCERPT // 2)

    def cut(text: str) -> str:
        piece = text[start:start + _EXCERPT]
        return ("…" if start else "") + piece + ("…" if start + _EXCERPT < len(text) else "")

    return f"recorded {cut(recorded)!r}, now {cut(now)!r} (first difference at character {first})"
