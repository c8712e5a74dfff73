"""The agent step loop: one task, from its first message to a text answer, a question or a limit.

Each turn builds the request (static system prompt first, so provider prompt caches hit, then the
task's conversation), asks the provider, stores the answer *before* acting on it, parses it
(thinking plus one tool call, or text), runs the call through the executor and stores the result.
Because the conversation is rebuilt from the store on every turn, a task redelivered after a crash
resumes where it stopped: a stored tool call without its result is executed again under the same
call key, which the order and dispatch tools recognise, so nothing is done twice.

A text answer may end in blocks (``answer_blocks.py``): memory writes the runtime makes for the
agent before the task is done; if one is refused, the results go back to the model instead.

The loop stops at a text answer (the task is done; a reply goes back when one was expected), at
an answer its provider ends as a refusal (done, with the model's words or a note saying so), at
``ask_user_clarification`` or a call a tool holds for the person's approval (the task is parked
and the agent waits, durably, for the person; the approved call runs again marked approved), at
the step limit, when a budget is spent, or when the provider fails (the agent becomes FAULTED with
the reason). The loop knows nothing of orders: order entry decides what needs approval, and says
so with a refusal under ``APPROVAL_RULE`` that names its reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum
from typing import Any, Protocol
from xml.sax.saxutils import escape, quoteattr

from app.agents import answer_blocks
from app.agents.agent_store import AgentStore
from app.agents.approval_log import APPROVE_REPLY, REFUSE_REPLY, ApprovalLog, is_approval
from app.agents.context_budget import fit_context
from app.agents.context_window import (
    ContextWindowError,
    Window,
    fit_window,
    prompt_cut_notice,
    prompt_was_cut,
)
from app.agents.conversation_store import SENT_KINDS, ConversationStore, StoredMessage
from app.agents.llm.port import (
    REFUSAL,
    ChatMessage,
    LLMError,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    LLMUsage,
    ToolSchema,
    ToolsRefusedError,
)
from app.agents.llm.tokens import prompt_tokens
from app.agents.loop_share import LoopShare, NoShare
from app.agents.native_calls import (
    NATIVE_CALL,
    ToolTransport,
    TransportMode,
    chat_messages,
    read_native,
    tool_schemas,
    with_words,
)
from app.agents.task_data import gather, with_task_data
from app.agents.templates import DEFAULT_CONTEXT_TOKENS, AnswerBlock, TaskData
from app.domain.agents import AgentInfo, AgentState, QuestionKind, Task
from app.domain.clock import Clock, ms_to_iso
from app.domain.errors import APPROVAL_RULE, ErrorCode, ParseError, ToolError
from app.domain.trading import Mode
from app.events import AnswerStreamed, EventBus
from app.orchestration.questions import QuestionStore
from app.orchestration.queue import TaskQueue
from app.tools.executor import ToolExecutor
from app.tools.protocol.parser import ParsedResponse
from app.tools.protocol.render import ToolResult, render_rejected
from app.tools.spec import AgentContext

logger = logging.getLogger(__name__)

USER_MESSAGE = "USER_MESSAGE"
TASK_REPLY = "TASK_REPLY"
CLARIFY_TOOL = "ask_user_clarification"
COMMENTARY = "commentary"  # message kind: the prose a model wrote around its call
NORMALISED = "normalised"  # message kind: what the parser repaired to read an answer
CUT_ANSWER = "cut_answer"  # message kind: an answer the server cut at its token limit
ANSWER_BLOCKS = "answer_blocks"  # message kind: a final answer with blocks, not yet written
BLOCK_RESULTS = "block_results"  # message kind: what writing an answer's blocks returned
# the kinds of the model's answers: each is one step of a task
ANSWER_KINDS = frozenset({"assistant", "final", NATIVE_CALL, CUT_ANSWER, ANSWER_BLOCKS})
DECLINED = "The model declined this task: its provider ended the answer as a refusal."
BLOCKS_FIRST = (
    "Your answer has blocks but no text before them. A final answer starts with its text (see "
    "your role); its blocks come after it."
)


class TaskOutcome(StrEnum):
    DONE = "done"
    WAITING = "waiting"
    STEP_LIMIT = "step_limit"
    BUDGET = "budget"
    FAULTED = "faulted"
    INTERRUPTED = "interrupted"  # paused or stopped between steps; the task resumes later


class Pricer(Protocol):
    def cost(self, provider: LLMProvider, model: str, usage: LLMUsage) -> Decimal | None: ...


@dataclass
class LoopServices:
    """What every agent's loop shares: one per runtime."""

    clock: Clock
    executor: ToolExecutor
    agents: AgentStore
    conversations: ConversationStore
    queue: TaskQueue
    questions: QuestionStore
    approvals: ApprovalLog
    pricer: Pricer
    bus: EventBus | None
    mode: Mode
    run_id: str
    run_budget_usd: Decimal | None = None
    # the account's currency as the agents see it (the system prompt names it)
    quote_currency: str = "USDT"
    # blind mode: the real market's names in the static prompt (its examples) are disguised
    disguise: Callable[[str], str] | None = None
    # how many agents may take a step at the same moment (see ``AgentLoop.run_task``)
    turnstile: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(4))
    # how the steps share the event loop with a window, if there is one
    share: LoopShare | NoShare = field(default_factory=NoShare)


@dataclass
class AgentProfile:
    """One agent as its loop needs it: identity, prompt, permissions, limits and provider."""

    info: AgentInfo
    system_prompt: str
    permissions: frozenset[str]
    provider: LLMProvider
    max_steps: int = 12
    max_output_tokens: int = 2048
    budget_usd: Decimal | None = None
    timeout_s: float = 120.0
    # the data the agent's tasks carry (the template's ``task_data``), and the tokens one request
    # to a language model may hold before older tool results are summarised
    task_data: TaskData | None = None
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    # the model server's context ([llm] context_tokens, with max_output_tokens kept for each
    # answer): every request is fitted into it or refused before it is sent; None: not known
    window: Window | None = None
    # how tools reach the model: in the system prompt only, also natively, or as it answers
    tool_transport: TransportMode = "xml"
    # the memory writes a final answer may carry after its text (the template's answer_blocks)
    answer_blocks: dict[str, AnswerBlock] = field(default_factory=dict)


def task_message(task: Task) -> str:
    """The first user message of a task (the format the prompts and the rule engine document)."""
    if task.task_type == USER_MESSAGE:
        return str(task.payload.get("text", ""))
    payload = json.dumps(task.payload, sort_keys=True, ensure_ascii=False)
    return (
        f"<task task_id={quoteattr(task.task_id)} task_type={quoteattr(task.task_type)} "
        f"source={quoteattr(task.source)} market_time={quoteattr(ms_to_iso(task.created_ms))} "
        f'reply_expected="{"true" if task.reply_expected else "false"}">'
        f"{escape(payload)}</task>"
    )


class AgentLoop:
    """Runs the tasks of one agent, one at a time."""

    def __init__(self, services: LoopServices, profile: AgentProfile) -> None:
        self.s = services
        self.profile = profile
        self._unpriced_noted = False
        self._prompt_cut_noted = False
        self._window = profile.window
        self._transport = ToolTransport(profile.tool_transport)
        self._tools: tuple[ToolSchema, ...] | None = None

    @property
    def agent_id(self) -> str:
        return self.profile.info.agent_id

    def _context(self, task: Task) -> AgentContext:
        config = self.profile.info.config
        symbols = config.get("symbols") or ()
        return AgentContext(
            agent_id=self.agent_id,
            permissions=self.profile.permissions,
            role=self.profile.info.role.value,
            watched_symbols=tuple(str(s) for s in symbols),
            interval=str(config.get("interval", "1h")),
            task_id=task.task_id,
        )

    async def run_task(self, task: Task) -> TaskOutcome:
        conv = self.s.conversations
        messages = conv.messages(task.task_id)
        if not messages:
            block = None
            if self.profile.task_data is not None:
                block = await gather(
                    self.profile.task_data, task, self.profile.info.config, self.s.executor,
                    self._context(task), self.s.clock,
                )
            messages.append(conv.add(
                self.agent_id, task.task_id, 0, "user", "task",
                with_task_data(task_message(task), block),
            ))
            self.s.agents.record_action(self.agent_id, task.task_id, f"started {task.task_type}")
        while True:
            # One step per turn of the event loop, and only a few agents stepping at once: many
            # agents share the loop with the window, and one whose provider answers without
            # waiting (the rule engine) must not hold it (``LoopShare``). The turnstile is let
            # go while a language model thinks, so waiting on the network never holds other
            # agents back.
            await self.s.share.turn()
            async with self.s.turnstile:
                outcome = await self._step(task, messages)
            if outcome is not None:
                return outcome

    async def _step(self, task: Task, messages: list[StoredMessage]) -> TaskOutcome | None:
        """One step: act on a stored call or answered question, or ask the model for the next."""
        conv = self.s.conversations
        last = messages[-1]
        if last.kind in ("assistant", NATIVE_CALL):  # a call stored but not yet answered
            return await self._act(task, last, messages)
        if last.kind == CUT_ANSWER:  # resumed between a cut answer and telling the model
            return await self._tell_cut(task, last, messages)
        if last.kind == "question":
            return await self._after_question(task, last, messages)
        if last.kind == ANSWER_BLOCKS:  # an answer whose blocks are not written yet (resumed)
            return await self._write_blocks(task, last, messages)
        if last.kind == BLOCK_RESULTS and answer_blocks.all_written(last.content):
            return self._answered(task, messages[-2], messages)  # written, then interrupted
        state = self.s.agents.state(self.agent_id)
        if state is None or state in (AgentState.PAUSED, AgentState.STOPPED):
            return TaskOutcome.INTERRUPTED
        step = 1 + sum(1 for m in messages if m.kind in ANSWER_KINDS)
        stop = self._limit_reached(task, step, messages)
        if stop is not None:
            return stop
        try:
            response = await self._ask_model(task, step, messages)
        except ContextWindowError as exc:
            return self._fault(task, f"the request was not sent to the model: {exc}", messages)
        except LLMError as exc:
            return self._fault(task, f"the model provider failed: {exc}", messages)
        if response.finish_reason == REFUSAL:
            return self._declined(task, step, response, messages)
        if response.cut:  # never acted on, never a final answer: the model is told
            return await self._answer_cut(task, step, response, messages)
        if response.tool_calls:
            return await self._answered_natively(task, step, response, messages)
        parsed, found = self._read(response.text)
        self._record_reading(task, step, parsed, messages)
        if parsed.is_text and found is not None:
            messages.append(conv.add(
                self.agent_id, task.task_id, step, "assistant", ANSWER_BLOCKS, response.text
            ))
            return await self._write_blocks(task, messages[-1], messages)
        if parsed.is_text:
            messages.append(conv.add(
                self.agent_id, task.task_id, step, "assistant", "final", response.text
            ))
            self._finish(task, parsed.text or response.text)
            return TaskOutcome.DONE
        messages.append(conv.add(
            self.agent_id, task.task_id, step, "assistant", "assistant", response.text
        ))
        return None

    def _declined(
        self, task: Task, step: int, response: LLMResponse, messages: list[StoredMessage]
    ) -> TaskOutcome:
        """The provider says the model declined (``REFUSAL``): the task ends with the model's
        words, or ``DECLINED`` when it gave none. Asking again would be declined again, at a
        price, up to the step limit; and a call cut off by the refusal is not acted on."""
        parsed = self.s.executor.parse(response.text)
        text = response.text.strip() if parsed.is_text else ""
        messages.append(self.s.conversations.add(
            self.agent_id, task.task_id, step, "assistant", "final", text or DECLINED
        ))
        self._finish(task, text or DECLINED)
        return TaskOutcome.DONE

    def _read(self, text: str) -> tuple[ParsedResponse, answer_blocks.Found | None]:
        """An answer as the parser reads it, with its blocks apart when it is a final answer
        that carries some (the blocks are not part of the text, so they never read as a call).

        An answer whose text before its blocks holds a call is read whole, as before, and gets
        the parser's words for that; one with blocks and no text at all is refused.
        """
        found = answer_blocks.split(text, self.profile.answer_blocks)
        if found is None:
            return self.s.executor.parse(text), None
        if not found.has_text:
            head = self.s.executor.parse(found.head) if found.head else None
            thinking = head.thinking if head is not None else None
            return ParsedResponse(thinking=thinking, error=ParseError(BLOCKS_FIRST)), None
        parsed = self.s.executor.parse(found.head)
        if parsed.is_text:
            return parsed, found
        return self.s.executor.parse(text), None

    def _record_reading(
        self, task: Task, step: int, parsed: ParsedResponse, messages: list[StoredMessage]
    ) -> None:
        """Store the prose around a call as the agent's commentary, and what the parser had to
        normalise to read the answer, before the answer itself (whose kind drives the loop).
        Neither is sent to the model again: the answer it wrote already holds both."""
        conv = self.s.conversations
        if parsed.commentary:
            messages.append(conv.add(
                self.agent_id, task.task_id, step, "assistant", COMMENTARY, parsed.commentary
            ))
        if parsed.notes:
            messages.append(conv.add(
                self.agent_id, task.task_id, step, "system", NORMALISED,
                "accepted: " + "; ".join(parsed.notes),
            ))

    # -- answers that are not read as XML -------------------------------------------------------

    async def _answer_cut(
        self, task: Task, step: int, response: LLMResponse, messages: list[StoredMessage]
    ) -> TaskOutcome | None:
        """Store an answer the server cut at its token limit, and tell the model."""
        text = response.text or "\n".join(
            f"(a tool call of {c.name}, cut)" for c in response.tool_calls) or "(empty)"
        cut = self.s.conversations.add(
            self.agent_id, task.task_id, step, "assistant", CUT_ANSWER, text)
        messages.append(cut)
        return await self._tell_cut(task, cut, messages)

    async def _tell_cut(
        self, task: Task, cut: StoredMessage, messages: list[StoredMessage]
    ) -> TaskOutcome | None:
        limit = self.profile.max_output_tokens
        parsed = ParsedResponse(error=ToolError(
            f"Your answer was cut at {limit:,} tokens, the most one answer may take, before it "
            "ended: nothing in it was run or taken as your final answer. Answer again, shorter: "
            "fewer words of thinking, then one tool call or a short final answer.",
            code=ErrorCode.ANSWER_CUT, details={"cut_at_tokens": limit},
        ))
        ctx = replace(self._context(task), call_key=f"{task.task_id}:{cut.step}")
        result = await self.s.executor.execute_parsed(ctx, parsed)
        self._store_result(task, cut.step, parsed, result, messages)
        return None

    async def _answered_natively(
        self, task: Task, step: int, response: LLMResponse, messages: list[StoredMessage]
    ) -> TaskOutcome | None:
        """Store a native tool call as the XML call it stands for (``_act`` runs it next); a
        call that cannot be read is answered at once with what to fix."""
        conv = self.s.conversations
        reading = read_native(response.tool_calls, self.s.executor.registry)
        content = with_words(reading, response.text, self.s.executor.parse)
        if response.text.strip() and content == reading.content:  # words not kept with the call
            messages.append(conv.add(self.agent_id, task.task_id, step, "assistant", COMMENTARY,
                                     response.text.strip()))
        messages.append(conv.add(self.agent_id, task.task_id, step, "assistant", NATIVE_CALL,
                                 content))
        if reading.error is not None:
            parsed = reading.parsed()
            ctx = replace(self._context(task), call_key=f"{task.task_id}:{step}")
            result = await self.s.executor.execute_parsed(ctx, parsed)
            self._store_result(task, step, parsed, result, messages)
        return None

    # -- one turn ------------------------------------------------------------------------------

    async def _ask_model(
        self, task: Task, step: int, messages: list[StoredMessage]
    ) -> LLMResponse:
        profile = self.profile
        sent = chat_messages(
            [(m.role, m.kind, m.content, m.step) for m in messages if m.kind in SENT_KINDS],
            self.s.executor.parse, self.s.executor.registry,
        )
        tools: tuple[ToolSchema, ...] = ()
        if profile.provider.is_llm:  # the rule engine costs nothing and reads every result
            sent = fit_context(profile.system_prompt, sent, profile.context_tokens).messages
            tools = self._offered_tools(sent)
            if self._window is not None:  # may raise ContextWindowError: nothing is sent
                sent = fit_window(profile.system_prompt, sent, self._window,
                                  profile.provider.name, tools).messages
        request = LLMRequest(
            agent_id=self.agent_id,
            task_id=task.task_id,
            model=profile.info.model,
            system=profile.system_prompt,
            messages=sent,
            max_output_tokens=profile.max_output_tokens,
            role=profile.info.role.value,
            agent_config=dict(profile.info.config),
            timeout_s=profile.timeout_s,
            tools=tools,
        )
        bus = self.s.bus

        def on_delta(delta: str) -> None:
            if bus is not None:
                bus.publish_nowait(AnswerStreamed(self.agent_id, task.task_id, step, delta))

        started = time.perf_counter()
        try:
            response = await self._complete(request, on_delta)
        except ToolsRefusedError:
            if not tools or not self._transport.fall_back():
                raise
            logger.warning("agent %s: the server refused native tools; XML from now on",
                           self.agent_id)
            return await self._ask_model(task, step, messages)
        latency_ms = response.latency_ms or (time.perf_counter() - started) * 1000
        self._record_usage(task, response, latency_ms)
        if profile.provider.is_llm:
            self._transport.answered(response)
            self._compare_prompt(task, request, response)
        return response

    async def _complete(self, request: LLMRequest, on_delta: Any) -> LLMResponse:
        provider = self.profile.provider
        if not provider.is_llm:
            return await provider.complete(request, on_delta)
        self.s.turnstile.release()  # network time: let other agents step meanwhile
        try:
            return await provider.complete(request, on_delta)
        finally:
            await self.s.turnstile.acquire()

    def _offered_tools(self, sent: list[ChatMessage]) -> tuple[ToolSchema, ...]:
        """The tools offered natively with this request: none in XML; in auto, only while they
        fit the server's context with nothing giving way for them."""
        if not self._transport.offers():
            return ()
        if self._tools is None:
            self._tools = tool_schemas(self.s.executor.registry, self.profile.permissions)
        window = self._window
        if self._transport.mode == "auto" and window is not None and window.scale * prompt_tokens(
                self.profile.system_prompt, sent, self._tools) > window.prompt_limit:
            self._transport.fall_back()
            return ()
        return self._tools

    def _compare_prompt(self, task: Task, request: LLMRequest, response: LLMResponse) -> None:
        """Compare the prompt tokens the server reported with Kestrel's count: far fewer means
        the server cut the prompt (said once, in the conversation and the log); otherwise the
        ratio teaches the window how the server counts."""
        if self._window is None or response.usage_estimated:
            return
        counted = prompt_tokens(request.system, request.messages, request.tools)
        reported = response.usage.input_tokens
        if not prompt_was_cut(reported, counted):
            self._window = self._window.learned(reported, counted)
            return
        if self._prompt_cut_noted:
            return
        self._prompt_cut_noted = True
        base_url = getattr(self.profile.provider, "base_url", None)
        where = f"the server at {base_url}" if base_url else f"the {self.profile.provider.name}"
        notice = prompt_cut_notice(where, reported, counted, self._window.context_tokens)
        logger.warning("agent %s: %s", self.agent_id, notice)
        self.s.conversations.add(self.agent_id, task.task_id, 0, "system", "notice", notice)

    def _record_usage(self, task: Task, response: LLMResponse, latency_ms: float) -> None:
        provider = self.profile.provider
        cost = self.s.pricer.cost(provider, response.model, response.usage)
        if cost is None:
            cost = Decimal(0)
            if not self._unpriced_noted:
                self._unpriced_noted = True
                self.s.conversations.add(
                    self.agent_id, task.task_id, 0, "system", "notice",
                    f"The model {response.model!r} has no price in prices.yaml, so its spend is "
                    "not counted against budgets. Add it in Settings to track its cost.",
                )
        self.s.conversations.record_usage(
            agent_id=self.agent_id, task_id=task.task_id, run_id=self.s.run_id,
            provider=provider.name, model=response.model,
            input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens,
            cached_tokens=response.usage.cached_input_tokens, cost=cost, latency_ms=latency_ms,
            estimated=response.usage_estimated, cut=response.cut,
        )

    async def _act(
        self, task: Task, call_message: StoredMessage, messages: list[StoredMessage]
    ) -> TaskOutcome | None:
        """Carry out the tool call of a stored assistant message."""
        parsed, _found = self._read(call_message.content)
        ctx = replace(self._context(task), call_key=f"{task.task_id}:{call_message.step}")
        call = parsed.call
        if call is None and parsed.error is None:
            if call_message.kind != NATIVE_CALL:  # cannot happen: text is stored as "final"
                raise RuntimeError("an assistant message without a call was stored as a call")
            # a native call that could not be read, resumed before it was answered
            parsed = ParsedResponse(error=ToolError(
                "This tool call could not be read. Make the call again.",
                code=ErrorCode.PARSE_ERROR))
        result = await self.s.executor.execute_parsed(ctx, parsed)
        if call is not None and call.name == CLARIFY_TOOL and result.status == "success":
            return self._park(task, call_message.step, result.xml, messages)
        if result.status == "rejected" and result.rule == APPROVAL_RULE:
            reason = str(result.details.get("policy_reason") or result.message)
            return self._ask_approval(task, call_message, call.name if call else "", reason,
                                      messages)
        self._store_result(task, call_message.step, parsed, result, messages)
        return None

    def _store_result(
        self,
        task: Task,
        step: int,
        parsed: ParsedResponse,
        result: ToolResult,
        messages: list[StoredMessage],
    ) -> None:
        messages.append(self.s.conversations.add(
            self.agent_id, task.task_id, step, "user", "tool_result", result.xml
        ))
        name = parsed.call.name if parsed.call is not None else (parsed.tool_name or "response")
        self.s.agents.record_action(self.agent_id, task.task_id, f"{name}: {result.status}")

    # -- a final answer's blocks ---------------------------------------------------------------

    async def _write_blocks(
        self, task: Task, answer: StoredMessage, messages: list[StoredMessage]
    ) -> TaskOutcome | None:
        """Write the blocks of a stored answer, each through its memory tool under the key
        ``<task>:<step>:<block>``, store what they returned, and end the task when all were
        written; otherwise the model reads the results and answers again."""
        _parsed, found = self._read(answer.content)
        if found is None:  # cannot happen: only answers with blocks are stored so
            raise RuntimeError("an answer without blocks was stored as one with blocks")
        results = []
        for block in answer_blocks.writes(
            found, self.profile.answer_blocks, task, self.profile.info.config
        ):
            if block.call is None:
                assert block.refusal is not None
                results.append(block.refusal)
                continue
            ctx = replace(self._context(task),
                          call_key=f"{task.task_id}:{answer.step}:{block.name}")
            results.append(await self.s.executor.execute(ctx, block.call))
        text = answer_blocks.results_message(results)
        messages.append(self.s.conversations.add(
            self.agent_id, task.task_id, answer.step, "user", BLOCK_RESULTS, text
        ))
        self.s.agents.record_action(self.agent_id, task.task_id, answer_blocks.summary(text))
        if answer_blocks.all_written(text):
            return self._answered(task, answer, messages)
        return None

    def _answered(
        self, task: Task, answer: StoredMessage, messages: list[StoredMessage]
    ) -> TaskOutcome:
        """End the task with the text of an answer whose blocks are all written: what people
        read (the chat, a reply) is the text, without the blocks."""
        parsed, found = self._read(answer.content)
        head = found.head if found is not None else answer.content
        messages.append(self.s.conversations.add(
            self.agent_id, task.task_id, answer.step, "assistant", "final", head
        ))
        self._finish(task, parsed.text or head)
        return TaskOutcome.DONE

    # -- waiting for the person ----------------------------------------------------------------

    def _park(
        self, task: Task, step: int, result_xml: str, messages: list[StoredMessage]
    ) -> TaskOutcome:
        messages.append(self.s.conversations.add(
            self.agent_id, task.task_id, step, "system", "question", result_xml
        ))
        self.s.queue.park(task.task_id)
        self.s.agents.set_state(self.agent_id, AgentState.WAITING_FOR_USER)
        self.s.agents.record_action(self.agent_id, task.task_id, "waiting for your answer")
        return TaskOutcome.WAITING

    def _ask_approval(
        self, task: Task, call_message: StoredMessage, tool: str, reason: str,
        messages: list[StoredMessage],
    ) -> TaskOutcome:
        call_key = f"{task.task_id}:{call_message.step}"
        question = self.s.questions.ask(
            self.agent_id, task.task_id, QuestionKind.APPROVAL,
            f"{self.profile.info.name} wants to place an order and {reason}. Approve it?",
            (APPROVE_REPLY, REFUSE_REPLY), "YES_NO",
            {"call_key": call_key, "call_xml": call_message.content, "reason": reason},
            key=f"approval:{call_key}",
        )
        self.s.approvals.requested(question, tool, call_message.content, reason)
        return self._park(
            task, call_message.step,
            f'<approval_requested question_id="{question.question_id}" reason={quoteattr(reason)}'
            ' status="WAITING_FOR_USER" />',
            messages,
        )

    async def _after_question(
        self, task: Task, question_message: StoredMessage, messages: list[StoredMessage]
    ) -> TaskOutcome | None:
        question = self.s.questions.for_task(task.task_id)
        if question is None or question.answer is None:
            return TaskOutcome.WAITING
        conv = self.s.conversations
        if question.kind is QuestionKind.CLARIFICATION:
            messages.append(conv.add(
                self.agent_id, task.task_id, question_message.step, "user", "user_reply",
                question.answer,
            ))
            return None
        call_xml = str(question.details.get("call_xml", ""))
        parsed = self.s.executor.parse(call_xml)
        ctx = replace(self._context(task), call_key=f"{task.task_id}:{question_message.step}",
                      approved=True)
        if is_approval(question.answer):
            result = await self.s.executor.execute_parsed(ctx, parsed)
            order_id = _attr(result, "order_id")
            self.s.approvals.decided(question, "approved", order_id)
        else:
            result = render_rejected(
                parsed.call.name if parsed.call else "create_order", "human_approval",
                f"The person refused this order (answer: {question.answer!r}). Do not place it "
                "again unless asked.",
                {"question_id": question.question_id},
            )
            self.s.approvals.decided(question, "refused", None)
        self._store_result(task, question_message.step, parsed, result, messages)
        return None

    # -- endings -------------------------------------------------------------------------------

    def _limit_reached(
        self, task: Task, step: int, messages: list[StoredMessage]
    ) -> TaskOutcome | None:
        if step > self.profile.max_steps:
            text = (
                f"Stopped after {self.profile.max_steps} steps (the template's step limit) "
                "without a final answer."
            )
            messages.append(self.s.conversations.add(
                self.agent_id, task.task_id, step, "system", "notice", text
            ))
            self._finish(task, text)
            return TaskOutcome.STEP_LIMIT
        spent_reason = self._budget_spent()
        if spent_reason is not None:
            messages.append(self.s.conversations.add(
                self.agent_id, task.task_id, step, "system", "notice", spent_reason
            ))
            self.s.queue.fail(task.task_id, spent_reason)
            self.s.agents.set_state(self.agent_id, AgentState.STOPPED, spent_reason)
            self.s.agents.record_action(self.agent_id, task.task_id, spent_reason)
            return TaskOutcome.BUDGET
        return None

    def _budget_spent(self) -> str | None:
        budget = self.profile.budget_usd
        if budget is not None:
            spent = self.s.conversations.spent(agent_id=self.agent_id)
            if spent >= budget:
                return f"Budget spent: ${spent:.4f} of ${budget} for this agent; it has stopped."
        run_budget = self.s.run_budget_usd
        if run_budget is not None:
            spent = self.s.conversations.spent(run_id=self.s.run_id)
            if spent >= run_budget:
                return f"Run budget spent: ${spent:.4f} of ${run_budget}; the agent has stopped."
        return None

    def _fault(self, task: Task, reason: str, messages: list[StoredMessage]) -> TaskOutcome:
        messages.append(self.s.conversations.add(
            self.agent_id, task.task_id, 0, "system", "notice", reason
        ))
        self.s.queue.fail(task.task_id, reason)
        self.s.agents.set_state(self.agent_id, AgentState.FAULTED, reason)
        self.s.agents.record_action(self.agent_id, task.task_id, "faulted")
        return TaskOutcome.FAULTED

    def _finish(self, task: Task, text: str) -> None:
        self.s.queue.complete(task.task_id, text)
        self.s.agents.record_action(self.agent_id, task.task_id, f"finished {task.task_type}")
        if task.reply_expected and task.reply_to:
            self.s.queue.enqueue(
                task.reply_to, TASK_REPLY,
                {"task_id": task.task_id, "from_agent_id": self.agent_id,
                 "from_agent_name": self.profile.info.name, "text": text},
                f"agent:{self.agent_id}", dedupe_key=f"reply:{task.task_id}",
            )


def _attr(result: ToolResult, name: str) -> str | None:
    for element in result.data:
        value = element.attr(name)
        if value is not None:
            return value
    return None


async def cancel_quietly(task: asyncio.Task[Any]) -> None:
    """Cancel a worker and wait for it, without hiding a cancellation of the caller itself."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
