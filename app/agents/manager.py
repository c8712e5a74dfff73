"""The AgentManager: creates agents from templates, runs one worker per agent, and routes the
person's messages and answers.

Every agent runs on the one event loop as its own asyncio task, taking one task at a time from its
durable inbox. The manager is also the ``AgentDirectory`` the orchestration tools use, so the
Orchestrator creates and controls agents through exactly the code the GUI and the CLI use. A worker
wakes on events (a task queued, a question answered, a state change); nothing polls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app import yamltext
from app.agents.context_window import Window
from app.agents.llm.port import LLMError, LLMProvider
from app.agents.loop import USER_MESSAGE, AgentLoop, AgentProfile, LoopServices, TaskOutcome
from app.agents.native_calls import TransportMode
from app.agents.prompt import build_system_prompt
from app.agents.templates import AgentTemplate, permissions_of, to_json_safe, validate_config
from app.config import LLMSettings
from app.domain.agents import USER_SOURCE, AgentInfo, AgentState, Question, Task, TaskStatus
from app.domain.errors import InvalidParameterError, NotFoundError
from app.events import TaskQueued
from app.memory.bank import MemoryBank
from app.orchestration.ids import keyed_id
from app.store.disk_full import DiskFullWatch
from app.tools.registry import ToolRegistry

logger = logging.getLogger(__name__)

ProviderFor = Callable[[AgentInfo, AgentTemplate], LLMProvider]
CONFIG_FILE = "config.yaml"


class AgentManager:
    def __init__(
        self,
        services: LoopServices,
        templates: Mapping[str, AgentTemplate],
        registry: ToolRegistry,
        memory: MemoryBank,
        provider_for: ProviderFor,
        new_id: Callable[[], str],
        scheduler: Any = None,
        *,
        provider_choice: Callable[[AgentTemplate], tuple[str, str]],
        extra_permissions: Callable[[AgentInfo], frozenset[str]] | None = None,
        disk: DiskFullWatch | None = None,
        llm_settings: Callable[[], LLMSettings] | None = None,
    ) -> None:
        """``provider_choice``: the provider kind and model a new agent of a template gets (the
        runtime's one rule, ``app.runtime.providers.choose_provider``, under the live settings).
        ``disk``: told when an agent's work fails because the disk is full (see ``_work``).
        ``llm_settings``: the live ``[llm]`` settings, read as each agent's profile is built: the
        server's context, the tokens kept for each answer, the tool transport."""
        self._disk = disk
        self.s = services
        self.templates = dict(templates)
        self._registry = registry
        self._memory = memory
        self._provider_for = provider_for
        self._new_id = new_id
        self._scheduler = scheduler
        self._provider_choice = provider_choice
        # permissions granted beyond the template's groups (the MCP tools a person enabled)
        self._extra_permissions = extra_permissions
        self._llm_settings = llm_settings
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._loops: dict[str, AgentLoop] = {}
        self._resume: dict[str, Task] = {}
        self._busy: set[str] = set()
        self._progress = asyncio.Event()
        self._started = False
        # the runtime's check that an agent's symbols can trade in this world now (the one
        # ``kestrel run --setup`` makes, ``app.runtime.start.refuse_untradeable``); None: none
        self.symbol_check: Callable[[Sequence[str], str | None], None] | None = None
        if services.bus is not None:
            services.bus.subscribe(TaskQueued, self._on_task_queued)

    # -- the directory the orchestration tools use ---------------------------------------------

    async def create_agent(
        self,
        template: str,
        name: str,
        config: Mapping[str, Any],
        *,
        start: bool = True,
        created_by: str = USER_SOURCE,
        key: str | None = None,
    ) -> AgentInfo:
        """Create an agent from a template; its validated config is also kept in its memory.

        ``key`` (a tool call's key) makes a repeated call return the agent the first one made.

        Raises:
            NotFoundError: no such template (the message lists the known ones).
            InvalidParameterError: the name is empty, the config does not fit the template, or
                it names a symbol this world cannot trade now (``symbol_check``).
        """
        agent_id = keyed_id(f"agent:{key}") if key else self._new_id()
        existing = self.s.agents.get(agent_id)
        if existing is not None:
            return existing
        tpl = self.templates.get(template)
        if tpl is None:
            raise NotFoundError(
                f"There is no agent template {template!r}. Known templates: "
                f"{', '.join(sorted(self.templates))}.",
                details={"parameter": "agent_type_template", "known": sorted(self.templates)},
            )
        label = name.strip()
        if not label:
            raise InvalidParameterError(
                "<agent_name_label> must not be empty.", details={"parameter": "agent_name_label"}
            )
        values = to_json_safe(validate_config(tpl, config))
        self._check_symbols(values)
        now = self.s.clock.now_ms()
        provider, model = self.engine_for(tpl)
        info = AgentInfo(
            agent_id=agent_id, name=label, template=tpl.template_id, role=tpl.role,
            state=AgentState.CREATED, config=values, provider=provider, model=model,
            created_ms=now, updated_ms=now,
        )
        self.s.agents.insert(info)
        document = {"template": tpl.template_id, "name": label, "created_by": created_by,
                    "config": values}
        await self._memory.awrite_file(
            info.agent_id, CONFIG_FILE,
            yamltext.dump(document).encode(),
        )
        if start:
            info = self.set_running(info.agent_id)
        return info

    def _check_symbols(self, config: Mapping[str, Any]) -> None:
        """An agent that would watch a symbol this world cannot trade is refused before it is
        made: it would fail on every task (no such market, no data yet, another currency)."""
        symbols = config.get("symbols")
        if self.symbol_check is None or not isinstance(symbols, list | tuple) or not symbols:
            return
        interval = config.get("interval")
        self.symbol_check([str(s) for s in symbols], str(interval) if interval else None)

    def get_agent(self, agent_id: str) -> AgentInfo | None:
        return self.s.agents.get(agent_id)

    def list_agents(self) -> list[AgentInfo]:
        return self.s.agents.all()

    async def control(self, agent_id: str, action: str) -> AgentInfo:
        """Pause, resume, start or stop an agent (the GUI's buttons and the control tasks)."""
        match action.lower():
            case "pause":
                return self.s.agents.set_state(agent_id, AgentState.PAUSED)
            case "resume" | "start":
                return self.set_running(agent_id)
            case "stop":
                return self.s.agents.set_state(agent_id, AgentState.STOPPED)
            case _:
                raise InvalidParameterError(
                    f"Unknown agent action {action!r}; use pause, resume, start or stop.",
                    details={"action": action},
                )

    async def update_config(self, agent_id: str, changes: Mapping[str, Any]) -> AgentInfo:
        """Merge ``changes`` into an agent's configuration (validated against its template).

        The agent's next task is built with the new configuration (its prompt is rebuilt), and
        ``config.yaml`` in its memory is rewritten so the memory shows what the agent runs with.

        Raises:
            NotFoundError: no such agent, or its template is not installed.
            InvalidParameterError: an unknown field or an invalid value, named in the message.
        """
        info = self.s.agents.require(agent_id)
        tpl = self.templates.get(info.template)
        if tpl is None:
            raise NotFoundError(
                f"agent {info.name} uses the template {info.template!r}, which is not installed",
                details={"template": info.template},
            )
        values = to_json_safe(validate_config(tpl, {**info.config, **changes}))
        if "symbols" in changes or "interval" in changes:
            self._check_symbols(values)
        info = self.s.agents.set_config(agent_id, values)
        self._loops.pop(agent_id, None)
        document: dict[str, Any] = {"template": tpl.template_id, "name": info.name}
        previous = await self._memory.aread_file(agent_id, CONFIG_FILE)
        try:
            earlier = yamltext.load(previous.data or b"") if previous.exists else None
        except yamltext.YAMLError:
            earlier = None  # a hand-broken file is replaced whole
        if isinstance(earlier, dict) and "created_by" in earlier:
            document["created_by"] = earlier["created_by"]
        document["config"] = values
        await self._memory.awrite_file(
            agent_id, CONFIG_FILE,
            yamltext.dump(document).encode(),
        )
        return info

    def set_running(self, agent_id: str) -> AgentInfo:
        """Run the agent, or let it wait for the person when one of its questions is open."""
        info = self.s.agents.set_state(agent_id, AgentState.RUNNING)
        if any(q.answer is None for q in self.s.questions.pending(agent_id)):
            info = self.s.agents.set_state(agent_id, AgentState.WAITING_FOR_USER)
        self._ensure_worker(agent_id)
        return info

    async def delete_agent(self, agent_id: str) -> None:
        """Stop the agent, drop its queued tasks and disable its jobs; its records stay."""
        self.s.agents.require(agent_id)
        worker = self._workers.pop(agent_id, None)
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        self.s.queue.cancel_pending(agent_id)
        if self._scheduler is not None:
            for job in self._scheduler.jobs(agent_id):
                self._scheduler.set_enabled(job.job_id, False)
        self.s.agents.delete(agent_id)
        self._loops.pop(agent_id, None)

    # -- the person ----------------------------------------------------------------------------

    def send_user_message(self, agent_id: str, text: str) -> Task | Question:
        """Chat: answer the agent's open clarification if it has one, else queue a new task."""
        if not text.strip():
            raise InvalidParameterError("The message is empty.", details={"parameter": "text"})
        self.s.agents.require(agent_id)
        for question in self.s.questions.pending(agent_id):
            if question.answer is None and question.kind.value == "clarification":
                return self.answer(question.question_id, text)
        return self.s.queue.enqueue(agent_id, USER_MESSAGE, {"text": text}, USER_SOURCE)

    def answer(self, question_id: str, text: str) -> Question:
        """Answer a question (clarification or approval); the waiting agent resumes its task."""
        question = self.s.questions.answer(question_id, text)
        self._resume_parked(question.task_id, question.agent_id)
        return question

    def _resume_parked(self, task_id: str, agent_id: str) -> None:
        task = self.s.queue.get(task_id)
        if task is None or task.status is not TaskStatus.WAITING:
            return
        self.s.queue.unpark(task_id)
        unparked = self.s.queue.get(task_id)
        if unparked is not None:
            self._resume[agent_id] = unparked
        info = self.s.agents.get(agent_id)
        if info is not None and info.state is AgentState.WAITING_FOR_USER:
            self.s.agents.set_state(agent_id, AgentState.RUNNING)
        self._wake_agent(agent_id)

    # -- workers -------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether agents work: until ``start`` (a live account's start-up reconciliation may
        wait for the person first) none does, whatever state each was saved in."""
        return self._started

    async def start(self) -> None:
        """Redeliver interrupted tasks, resume answered questions, start every live agent."""
        self._started = True
        self.s.queue.recover()
        for task in self.s.queue.tasks(statuses=[TaskStatus.WAITING]):
            question = self.s.questions.for_task(task.task_id)
            if question is not None and question.answer is not None:
                self._resume_parked(task.task_id, task.agent_id)
        for info in self.s.agents.all():
            if info.state in (AgentState.RUNNING, AgentState.WAITING_FOR_USER):
                self._ensure_worker(info.agent_id)

    async def aclose(self) -> None:
        workers = list(self._workers.values())
        self._workers.clear()
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    def _ensure_worker(self, agent_id: str) -> None:
        if not self._started:
            return
        worker = self._workers.get(agent_id)
        if worker is None or worker.done():
            self._workers[agent_id] = asyncio.get_running_loop().create_task(
                self._work(agent_id), name=f"agent-{agent_id}"
            )
        self._wake_agent(agent_id)

    def _on_task_queued(self, event: TaskQueued) -> None:
        self._wake_agent(event.agent_id)
        self._progress.set()

    def _wake_agent(self, agent_id: str) -> None:
        self._wake.setdefault(agent_id, asyncio.Event()).set()

    async def _work(self, agent_id: str) -> None:
        """The agent's worker. A full disk ends it without faulting the agent (the agent did
        nothing wrong, and its state could not be written anyway): ``disk`` is told, the run
        stops, and the task it was on stays taken, so the next start runs it again."""
        try:
            await self._work_on(agent_id)
        except Exception as exc:
            if self._disk is None or not self._disk.check(exc):
                raise

    async def _work_on(self, agent_id: str) -> None:
        wake = self._wake.setdefault(agent_id, asyncio.Event())
        while True:
            wake.clear()
            info = self.s.agents.get(agent_id)
            if info is None:
                return
            if info.state is AgentState.RUNNING:
                task = self._resume.pop(agent_id, None) or self.s.queue.take(agent_id)
                if task is not None:
                    await self._run_one(info, task)
                    continue
            await wake.wait()

    async def _run_one(self, info: AgentInfo, task: Task) -> None:
        self._busy.add(info.agent_id)
        self.s.agents.set_current_task(info.agent_id, task.task_id)
        try:
            outcome = await self.loop_for(info).run_task(task)
            if outcome is TaskOutcome.INTERRUPTED:
                self._resume[info.agent_id] = task
            logger.debug("agent %s task %s: %s", info.agent_id, task.task_id, outcome)
        except asyncio.CancelledError:
            raise
        except LLMError as exc:  # its provider could not be built (no key, unknown kind...)
            reason = f"the model provider could not be set up: {exc}"
            self.s.queue.fail(task.task_id, reason)
            self.s.agents.set_state(info.agent_id, AgentState.FAULTED, reason)
        except Exception as exc:
            if self._disk is not None and self._disk.check(exc):
                raise  # not the agent's fault: ``_work`` stops, the task stays taken
            logger.exception("agent %s failed on task %s", info.agent_id, task.task_id)
            reason = f"internal error while working on {task.task_type}: {exc!r}"
            self.s.queue.fail(task.task_id, reason)
            self.s.agents.set_state(info.agent_id, AgentState.FAULTED, reason)
        finally:
            self._busy.discard(info.agent_id)
            self._progress.set()
            if self._disk is None or not self._disk.full:  # else it could not be written
                self.s.agents.set_current_task(info.agent_id, None)

    def loop_for(self, info: AgentInfo) -> AgentLoop:
        loop = self._loops.get(info.agent_id)
        if loop is None:
            loop = AgentLoop(self.s, self.profile_for(info))
            self._loops[info.agent_id] = loop
        return loop

    def engine_for(self, template: AgentTemplate) -> tuple[str, str]:
        """The provider kind and model a new agent of ``template`` gets now (the runtime's rule,
        ``app.runtime.providers.choose_provider``, under the current ``[llm]`` settings)."""
        return self._provider_choice(template)

    def refresh_profiles(self) -> None:
        """Rebuild every agent's prompt and permissions at its next task (the tools it may use
        changed: an MCP tool was enabled, disabled or turned off by a change)."""
        self._loops.clear()

    def profile_for(self, info: AgentInfo) -> AgentProfile:
        tpl = self.templates.get(info.template)
        if tpl is None:
            raise NotFoundError(
                f"agent {info.name} uses the template {info.template!r}, which is not installed",
                details={"template": info.template},
            )
        config = validate_config(tpl, info.config)
        permissions = permissions_of(tpl)
        if self._extra_permissions is not None:
            permissions |= self._extra_permissions(info)
        prompt = build_system_prompt(
            tpl, config, agent_id=info.agent_id, agent_name=info.name, mode=self.s.mode,
            registry=self._registry, permissions=permissions, quote_currency=self.s.quote_currency,
        )
        if self.s.disguise is not None:
            prompt = self.s.disguise(prompt)
        max_output_tokens = tpl.limits.max_output_tokens
        window: Window | None = None
        transport: TransportMode = "xml"
        if self._llm_settings is not None:  # a template may ask for fewer tokens per answer
            llm = self._llm_settings()
            max_output_tokens = min(max_output_tokens, llm.max_output_tokens)
            window = Window(llm.context_tokens, max_output_tokens)
            transport = llm.tool_transport
        return AgentProfile(
            info=info, system_prompt=prompt, permissions=permissions,
            provider=self._provider_for(info, tpl), max_steps=tpl.limits.max_steps,
            max_output_tokens=max_output_tokens, budget_usd=tpl.limits.budget_usd,
            task_data=tpl.task_data, context_tokens=tpl.limits.context_tokens,
            window=window, tool_transport=transport, answer_blocks=dict(tpl.answer_blocks),
        )

    # -- idleness (the backtest advances the clock only when every inbox is idle) ---------------

    def idle(self) -> bool:
        """No agent is working and no running agent has anything ready to work on."""
        if self._busy:
            return False
        for agent_id in self.s.agents.ids_in_state(AgentState.RUNNING):
            if agent_id in self._resume or self.s.queue.busy(agent_id) > 0:
                return False
        return True

    async def wait_idle(self) -> None:
        while not self.idle():
            self._progress.clear()
            if self.idle():
                return
            await self._progress.wait()
