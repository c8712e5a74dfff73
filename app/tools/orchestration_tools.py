"""Orchestration tools (Part C §5) and ``ask_user_clarification`` (Part D §6.1).

``OrchestrationTools`` is given the agent directory (the AgentManager, through a port), the
durable task queue, the job scheduler, the notification service and the question store. Anything a
tool makes is keyed on the call's ``call_key`` where the store allows it, so a task redelivered
after a crash repeats its calls without dispatching, notifying or asking twice.
"""

from __future__ import annotations

import json
import re
from typing import Any

from app.domain.agents import AgentInfo, AgentState, Channel, QuestionKind, Task, Urgency
from app.domain.clock import ms_to_iso
from app.domain.errors import InvalidParameterError, NotFoundError
from app.orchestration.notify import NotificationService
from app.orchestration.ports import AgentDirectory
from app.orchestration.questions import QuestionStore
from app.orchestration.queue import TaskQueue
from app.orchestration.scheduler import JobScheduler
from app.tools.group import ToolDef, ToolGroup
from app.tools.protocol.render import Element, el
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission

USER_GROUP = "User Interaction Tools"
# carried out at once by the AgentManager instead of being queued
CONTROL_TASK_TYPES = {"PAUSE_AGENT": "pause", "RESUME_AGENT": "resume", "STOP_AGENT": "stop"}
# also carried out at once: the payload's fields are merged into the agent's configuration
UPDATE_CONFIG = "UPDATE_AGENT_CONFIG"
# made only by the system: an agent sending them would speak as the person or as the broker
RESERVED_TASK_TYPES = frozenset({"USER_MESSAGE", "ORDER_FILLED"})
_TASK_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
CHANNEL_NAMES = ", ".join(c.value for c in Channel)


def _task_type(value: str, parameter: str) -> str:
    if not _TASK_TYPE.fullmatch(value):
        raise InvalidParameterError(
            f"<{parameter}> must be a name of letters, digits and underscores starting with a "
            f"letter (at most 64), e.g. NEW_MARKET_ANALYSIS_SIGNAL; got {value[:40]!r}.",
            details={"parameter": parameter},
        )
    if value.upper() in RESERVED_TASK_TYPES:
        raise InvalidParameterError(
            f"<{parameter}> {value} is reserved for the system; agents cannot send it. Use a "
            "task type of your own, e.g. NEW_MARKET_ANALYSIS_SIGNAL.",
            details={"parameter": parameter, "reserved": sorted(RESERVED_TASK_TYPES)},
        )
    return value


def _channels(names: list[str]) -> list[Channel]:
    chosen: list[Channel] = []
    for name in names:
        try:
            channel = Channel(name.strip().upper())
        except ValueError:
            raise InvalidParameterError(
                f"<channel> {name[:40]!r} is not a notification channel; use one of "
                f"{CHANNEL_NAMES}.",
                details={"parameter": "channels", "allowed": [c.value for c in Channel]},
            ) from None
        if channel not in chosen:
            chosen.append(channel)
    return chosen


def _uuid_param(name: str, description: str) -> ParamSpec:
    """A required agent id, shown to the model as ``string_uuid``."""
    return ParamSpec(name, ParamType.STRING, description, required=True,
                     example="string_uuid", max_length=100)


class OrchestrationTools(ToolGroup):
    """The five tools for managing agents, their tasks and jobs, and talking to the person, plus
    ``ask_user_clarification`` (its own group in the prompt)."""

    GROUP = "Orchestration Tools"
    TOOLS = (
        ToolDef(
            name="create_new_agent_instance",
            description=(
                "Creates (and by default starts) a new agent instance from a template, e.g. an "
                "Analyst or a Trader; its configuration is also stored in its memory."
            ),
            params=(
                ParamSpec(
                    "agent_type_template", ParamType.STRING,
                    "Identifier of the agent template to create from, e.g. "
                    "'AnalystAgent_Trend_v1' or 'TraderAgent_Default_v1'",
                    required=True, example="AnalystAgent_Trend_v1", max_length=100,
                ),
                ParamSpec(
                    "agent_name_label", ParamType.STRING,
                    "A human-readable name for this instance, e.g. 'My BTC Trend Analyst'",
                    required=True, example="My BTC Trend Analyst", max_length=100,
                ),
                ParamSpec(
                    "initial_config_json", ParamType.JSON_OBJECT,
                    "JSON object with the agent's initial settings (strategy parameters, target "
                    "symbols, risk settings, links to other agents)",
                    required=True,
                ),
                ParamSpec(
                    "start_immediately", ParamType.BOOLEAN,
                    "Whether to start the agent after creation", default=True,
                ),
            ),
            permission=Permission.AGENTS,
            returns=(
                '<agent_instance_created agent_id="string_uuid" agent_type_template="string" '
                'agent_name_label="string" status="INITIALIZED|RUNNING" />'
            ),
        ),
        ToolDef(
            name="dispatch_task_to_agent",
            description=(
                "Sends a task with a JSON payload to another agent's inbox, delivered durably "
                "(even across a restart)."
            ),
            params=(
                _uuid_param("target_agent_id", "The unique ID of the recipient agent instance"),
                ParamSpec(
                    "task_type", ParamType.STRING,
                    "What the task is, e.g. 'NEW_MARKET_ANALYSIS_SIGNAL', 'RUN_ANALYSIS', "
                    "'PAUSE_AGENT'",
                    required=True, example="NEW_MARKET_ANALYSIS_SIGNAL", max_length=64,
                ),
                ParamSpec(
                    "task_payload_json", ParamType.JSON_OBJECT,
                    "JSON object with the data and parameters of the task", required=True,
                    free_text=True,
                ),
                ParamSpec(
                    "reply_expected", ParamType.BOOLEAN,
                    "If true, the target's answer is sent back to you as a task", default=False,
                ),
            ),
            permission=Permission.TASKS,
            returns=(
                '<task_dispatched_to_agent target_agent_id="string_uuid" '
                'dispatched_task_id="string_uuid_internal_task_ref" '
                'status="QUEUED_FOR_DELIVERY|DELIVERY_ACKNOWLEDGED" />'
            ),
            extra_rules=(
                "PAUSE_AGENT, RESUME_AGENT, STOP_AGENT and UPDATE_AGENT_CONFIG (payload: fields "
                "merged into the target's configuration) happen at once (DELIVERY_ACKNOWLEDGED); "
                "other tasks wait in the inbox (QUEUED_FOR_DELIVERY).",
            ),
        ),
        ToolDef(
            name="list_agent_instances",
            description=(
                "Lists the agents with role, state, configuration, last action and jobs."
            ),
            params=(
                ParamSpec(
                    "role", ParamType.ENUM, "Only agents of this role",
                    choices=("orchestrator", "analyst", "trader"),
                ),
            ),
            permission=Permission.AGENTS,
            returns=(
                '<agent_instances count="integer">\n'
                '    <agent agent_id="string_uuid" name="string" template="string" '
                'role="orchestrator|analyst|trader" '
                'state="created|running|paused|waiting_for_user|stopped|faulted" '
                'provider="string" model="string" current_task_id="string" last_action="string" '
                'last_action_time_iso="string" fault_reason="string">\n'
                "        <config_json>string_json_object</config_json>\n"
                '        <job internal_job_id="string" job_name="string" enabled="boolean" '
                'schedule="string" task_type_on_trigger="string" '
                'next_run_time_utc_iso="string" />\n'
                "    </agent>\n"
                "</agent_instances>"
            ),
        ),
        ToolDef(
            name="schedule_background_job",
            description=(
                "Sets up a recurring job that sends a task to an agent each time it triggers "
                "(UTC, market clock)."
            ),
            params=(
                ParamSpec(
                    "job_name", ParamType.STRING,
                    "A unique, human-readable name for the job", required=True,
                    example="BTC_1h_TrendAnalysis", max_length=200,
                ),
                ParamSpec(
                    "job_type_identifier", ParamType.STRING,
                    "The kind of job, e.g. 'PERIODIC_AGENT_TRIGGER'", required=True,
                    example="PERIODIC_AGENT_TRIGGER", max_length=64,
                ),
                ParamSpec(
                    "cron_expression", ParamType.STRING,
                    "5-field cron schedule, e.g. '*/15 * * * *'",
                    example="0 */4 * * *", max_length=100,
                ),
                ParamSpec(
                    "interval_seconds", ParamType.INTEGER,
                    "Run every this many seconds, e.g. 3600",
                    minimum=1,
                ),
                _uuid_param("target_agent_id_on_trigger", "The agent to send the task to"),
                ParamSpec(
                    "task_type_on_trigger", ParamType.STRING,
                    "The task_type of the task sent, e.g. 'RUN_ANALYSIS'", required=True,
                    example="RUN_ANALYSIS", max_length=64,
                ),
                ParamSpec(
                    "task_payload_on_trigger_json", ParamType.JSON_OBJECT,
                    "JSON object sent as the task's payload (scheduled_time is added)",
                    required=True,
                ),
                ParamSpec(
                    "enabled_on_create", ParamType.BOOLEAN, "Whether the job starts enabled",
                    default=True,
                ),
            ),
            permission=Permission.JOBS,
            returns=(
                '<background_job_scheduled internal_job_id="string_uuid_system_job_id" '
                'job_name="string" status="SCHEDULED_AND_ACTIVE|SCHEDULED_BUT_DISABLED" '
                'next_run_time_utc_iso="string_datetime_iso" />'
            ),
            extra_rules=(
                "Give exactly one of cron_expression or interval_seconds. Intervals run at "
                "multiples since 1970 UTC (3600: on the hour, as the hourly candle closes); a run "
                "missed while the app was closed runs once.",
            ),
        ),
        ToolDef(
            name="send_notification",
            description=(
                "Notifies the person on one or more channels; reports each channel's delivery."
            ),
            params=(
                ParamSpec(
                    "channels", ParamType.LIST,
                    f"At least one channel, each one of {CHANNEL_NAMES}", required=True,
                    item_tag="channel", example="|".join(c.value for c in Channel),
                    maximum=len(Channel),
                ),
                ParamSpec(
                    "message_text", ParamType.STRING, "The message", required=True,
                    max_length=4000, free_text=True,
                ),
                ParamSpec(
                    "subject_text", ParamType.STRING, "A subject, for channels like EMAIL",
                    max_length=200, free_text=True,
                ),
                ParamSpec(
                    "urgency_level", ParamType.ENUM, "How urgent it is; affects presentation",
                    choices=tuple(u.value for u in Urgency), default=Urgency.MEDIUM.value,
                ),
            ),
            permission=Permission.NOTIFY,
            returns=(
                "<notification_sent_status>\n"
                '    <channel_status channel="TELEGRAM" delivery_status="SUCCESS|PENDING|FAILED" '
                'message_id_or_error="string" />\n'
                '    <channel_status channel="UI_ALERT" delivery_status="SUCCESS|PENDING|FAILED" '
                'message_id_or_error="string" />\n'
                "</notification_sent_status>"
            ),
        ),
        ToolDef(
            name="ask_user_clarification",
            group=USER_GROUP,
            description=(
                "Asks the person a question in the chat and waits (even across a restart) for "
                "the answer."
            ),
            params=(
                ParamSpec(
                    "question_text", ParamType.STRING, "The question to ask the person",
                    required=True, max_length=2000, free_text=True,
                ),
                ParamSpec(
                    "suggested_replies", ParamType.LIST,
                    "Quick replies the person can click, e.g. 'Yes, proceed.'",
                    item_tag="reply", maximum=10,
                ),
                ParamSpec(
                    "expected_response_format_hint", ParamType.STRING,
                    "The kind of answer expected, e.g. TEXT, YES_NO, NUMBER",
                    example="TEXT", max_length=40,
                ),
            ),
            permission=Permission.ASK_USER,
            returns=(
                '<clarification_requested question_id="string_uuid" status="WAITING_FOR_USER" />'
            ),
            extra_rules=(
                "Your next input is the person's reply as plain text, not a tool result.",
            ),
        ),
    )

    def __init__(
        self,
        directory: AgentDirectory,
        queue: TaskQueue,
        scheduler: JobScheduler,
        notifications: NotificationService,
        questions: QuestionStore,
    ) -> None:
        self._directory = directory
        self._queue = queue
        self._scheduler = scheduler
        self._notifications = notifications
        self._questions = questions

    def timeout_s(self, tool: ToolDef) -> float | None:
        """A notification may wait on every channel's own delivery limit, and a little more."""
        if tool.name == "send_notification":
            return self._notifications.timeout_s + 5
        return tool.timeout_s

    def _agent(self, agent_id: str, parameter: str) -> AgentInfo:
        """The agent a call names, or NOT_FOUND saying where valid ids come from."""
        info = self._directory.get_agent(agent_id.strip())
        if info is None:
            raise NotFoundError(
                f"There is no agent with id {agent_id[:80]!r} (it may have been deleted). Use "
                "the agent_id returned by create_new_agent_instance.",
                details={"parameter": parameter, "agent_id": agent_id[:80]},
            )
        return info

    async def create_new_agent_instance(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """A new agent, made once per call key (a redelivered task gets the same agent)."""
        info = await self._directory.create_agent(
            args["agent_type_template"], args["agent_name_label"], args["initial_config_json"],
            start=args["start_immediately"], created_by=ctx.agent_id, key=ctx.call_key or None,
        )
        return el(
            "agent_instance_created", agent_id=info.agent_id, agent_type_template=info.template,
            agent_name_label=info.name,
            status="RUNNING" if info.state is AgentState.RUNNING else "INITIALIZED",
        )

    async def dispatch_task_to_agent(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """A control or configuration change carried out at once, any other task queued."""
        target = self._agent(args["target_agent_id"], "target_agent_id")
        task_type = _task_type(args["task_type"], "task_type")
        dedupe = f"dispatch:{ctx.call_key}" if ctx.call_key else None
        if task_type.upper() in CONTROL_TASK_TYPES or task_type.upper() == UPDATE_CONFIG:
            task = await self._carry_out(ctx, target, task_type.upper(),
                                         args["task_payload_json"], dedupe)
            status = "DELIVERY_ACKNOWLEDGED"
        else:
            task = self._enqueue(ctx, target, task_type, args, dedupe)
            status = "QUEUED_FOR_DELIVERY"
        return el(
            "task_dispatched_to_agent", target_agent_id=target.agent_id,
            dispatched_task_id=task.task_id, status=status,
        )

    async def _carry_out(
        self, ctx: AgentContext, target: AgentInfo, task_type: str, payload: dict[str, Any],
        dedupe: str | None,
    ) -> Task:
        """Pause, resume, stop or reconfigure ``target`` now, recorded as a done task; a call
        repeated under the same key finds that task and changes nothing again."""
        task = self._queue.get_by_dedupe_key(dedupe) if dedupe else None
        if task is not None:
            return task
        action = CONTROL_TASK_TYPES.get(task_type)
        if action is None:
            await self._directory.update_config(target.agent_id, payload)
            outcome = f"configuration updated: {', '.join(sorted(payload)) or 'nothing'}"
        else:
            try:
                info = await self._directory.control(target.agent_id, action)
            except ValueError as exc:  # the lifecycle table refused the change
                raise InvalidParameterError(
                    f"Cannot {action} agent {target.agent_id} ({target.name}): {exc}.",
                    details={"parameter": "task_type", "state": target.state.value},
                ) from None
            outcome = f"agent is now {info.state.value}"
        return self._queue.record_done(
            target.agent_id, task_type, payload, f"agent:{ctx.agent_id}", outcome,
            dedupe_key=dedupe,
        )

    def _enqueue(
        self, ctx: AgentContext, target: AgentInfo, task_type: str, args: dict[str, Any],
        dedupe: str | None,
    ) -> Task:
        """Queue a task for ``target``, refused while it takes none (stopped or faulted)."""
        if target.state in (AgentState.STOPPED, AgentState.FAULTED):
            why = f" ({target.fault_reason})" if target.fault_reason else ""
            raise InvalidParameterError(
                f"Agent {target.agent_id} ({target.name}) is {target.state.value}{why} and "
                "takes no tasks. Resume it first: dispatch task_type RESUME_AGENT to it.",
                details={"parameter": "target_agent_id", "state": target.state.value},
            )
        reply = bool(args["reply_expected"])
        return self._queue.enqueue(
            target.agent_id, task_type, args["task_payload_json"], f"agent:{ctx.agent_id}",
            reply_to=ctx.agent_id if reply else None, reply_expected=reply,
            dedupe_key=dedupe,
        )

    async def list_agent_instances(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """Every agent (or one role's), with its configuration and jobs."""
        wanted = (args["role"] or "").strip().lower()
        items = [
            self._agent_element(info) for info in self._directory.list_agents()
            if not wanted or info.role.value == wanted
        ]
        return el("agent_instances", None, *items, count=len(items))

    def _agent_element(self, info: AgentInfo) -> Element:
        """One ``<agent>``: its state, configuration and each of its jobs."""
        jobs = [
            el(
                "job", internal_job_id=job.job_id, job_name=job.name, enabled=job.enabled,
                schedule=f"cron {job.cron}" if job.cron else f"every {job.interval_s} s",
                task_type_on_trigger=job.task_type,
                next_run_time_utc_iso=(
                    None if job.next_run_ms is None or not job.enabled
                    else ms_to_iso(job.next_run_ms)
                ),
            )
            for job in self._scheduler.jobs(info.agent_id)
        ]
        return el(
            "agent", None,
            el("config_json", json.dumps(info.config, sort_keys=True, ensure_ascii=False)),
            *jobs,
            agent_id=info.agent_id, name=info.name, template=info.template,
            role=info.role.value, state=info.state.value, provider=info.provider,
            model=info.model, current_task_id=info.current_task_id,
            last_action=info.last_action or None,
            last_action_time_iso=(
                None if info.last_action_ms is None else ms_to_iso(info.last_action_ms)
            ),
            fault_reason=info.fault_reason,
        )

    async def schedule_background_job(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """A job, unless the caller already made the same one under that name (a redelivered
        task repeats its calls, which is not an error)."""
        target = self._agent(args["target_agent_id_on_trigger"], "target_agent_id_on_trigger")
        task_type = _task_type(args["task_type_on_trigger"], "task_type_on_trigger")
        cron = args["cron_expression"] or None
        interval = args["interval_seconds"]
        name = args["job_name"].strip()
        job = self._scheduler.get_by_name(name)
        same = job is not None and (
            job.created_by, job.target_agent_id, job.task_type, job.payload, job.cron,
            job.interval_s, job.job_type,
        ) == (
            ctx.agent_id, target.agent_id, task_type, args["task_payload_on_trigger_json"],
            " ".join(cron.split()) if cron else None, interval, args["job_type_identifier"],
        )
        if job is None or not same:
            job = self._scheduler.add_job(
                name, args["job_type_identifier"], target.agent_id, task_type,
                args["task_payload_on_trigger_json"], cron=cron, interval_s=interval,
                enabled=args["enabled_on_create"], created_by=ctx.agent_id,
            )
        return el(
            "background_job_scheduled", internal_job_id=job.job_id, job_name=job.name,
            status="SCHEDULED_AND_ACTIVE" if job.enabled else "SCHEDULED_BUT_DISABLED",
            next_run_time_utc_iso=None if job.next_run_ms is None else ms_to_iso(job.next_run_ms),
        )

    async def send_notification(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """One message on each channel named, sent once per call key; each channel's outcome."""
        sent = await self._notifications.send(
            ctx.agent_id, _channels(args["channels"]), args["message_text"],
            args["subject_text"] or "", Urgency(args["urgency_level"]),
            key=ctx.call_key or None,
        )
        return el(
            "notification_sent_status",
            None,
            *(
                el(
                    "channel_status", channel=s.channel.value,
                    delivery_status=s.delivery_status.value,
                    message_id_or_error=s.message_id_or_error,
                )
                for s in sent.statuses
            ),
        )

    async def ask_user_clarification(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """A question parked for the person, asked once per call key."""
        question = self._questions.ask(
            ctx.agent_id, ctx.task_id, QuestionKind.CLARIFICATION, args["question_text"],
            args["suggested_replies"] or (), args["expected_response_format_hint"] or "TEXT",
            key=ctx.call_key or None,
        )
        return el(
            "clarification_requested", question_id=question.question_id, status="WAITING_FOR_USER"
        )
