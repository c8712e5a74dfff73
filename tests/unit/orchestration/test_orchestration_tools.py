"""The five orchestration tools through the real executor, queue, scheduler, notification
service and question store, with payloads exactly as Part C §5 and Part D §6.1 show them."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lxml import etree

from app.domain.agents import AgentState, Channel, QuestionKind, TaskStatus
from app.domain.clock import ReplayClock
from app.events import EventBus, NotificationRaised
from app.orchestration.ids import SeededIds
from app.orchestration.notify import BusNotifier, NotificationService, UnconfiguredNotifier
from app.orchestration.questions import QuestionStore
from app.orchestration.queue import TaskQueue
from app.orchestration.scheduler import JobScheduler
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.orchestration_tools import OrchestrationTools
from app.tools.protocol.parser import parse_response
from app.tools.protocol.render import Element, ToolResult
from app.tools.registry import ToolRegistry
from app.tools.spec import (
    ALL_PERMISSIONS,
    AgentContext,
    ParamType,
    Permission,
    ToolSpec,
    validate,
)
from tests.unit.orchestration.conftest import START
from tests.unit.orchestration.fakes import FakeDirectory

HOUR = 3_600_000


@dataclass
class Rig:
    clock: ReplayClock
    bus: EventBus
    directory: FakeDirectory
    queue: TaskQueue
    scheduler: JobScheduler
    questions: QuestionStore
    notifications: NotificationService
    specs: tuple[ToolSpec, ...]
    executor: ToolExecutor
    soa: str

    def ctx(self, agent: str | None = None, task: str = "task-1", step: int = 1,
            permissions: frozenset[str] = ALL_PERMISSIONS) -> AgentContext:
        return AgentContext(agent_id=agent or self.soa, permissions=permissions,
                            role="orchestrator", task_id=task, call_key=f"{task}:{step}")

    def call(self, xml: str, ctx: AgentContext | None = None) -> ToolResult:
        result = asyncio.run(self.executor.execute_text(ctx or self.ctx(), xml))
        assert result is not None
        return result

    def data(self, xml: str, ctx: AgentContext | None = None) -> Element:
        result = self.call(xml, ctx)
        assert result.status == "success", result.xml
        return result.data[0]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    db = tmp_path / "kestrel.db"
    clock, bus, ids = ReplayClock(START), EventBus(), SeededIds("rig")
    directory = FakeDirectory(clock, SeededIds("agents"))
    soa = directory.add("Orchestrator", "SystemOrchestrator_v1").agent_id
    queue = TaskQueue(db, clock, ids, bus)
    scheduler = JobScheduler(db, clock, queue, ids)
    questions = QuestionStore(db, clock, ids, bus)
    notifications = NotificationService(
        db, clock, ids,
        {
            Channel.UI_ALERT: BusNotifier(Channel.UI_ALERT, bus),
            Channel.TRAY: BusNotifier(Channel.TRAY, bus),
            Channel.TELEGRAM: UnconfiguredNotifier(Channel.TELEGRAM, "set it in Settings"),
        },
    )
    specs = OrchestrationTools(directory, queue, scheduler, notifications, questions).specs()
    executor = ToolExecutor(ToolRegistry(specs), MemoryRecorder(), clock)
    yield Rig(clock, bus, directory, queue, scheduler, questions, notifications, specs, executor,
              soa)
    for store in (queue, scheduler, questions, notifications):
        store.close()


def attrs(element: Element) -> dict[str, str]:
    return dict(element.attrs)


def create(template: str = "AnalystAgent_Trend_v1", start: str = "", config: str = "{}") -> str:
    extra = f"<start_immediately>{start}</start_immediately>" if start else ""
    return (
        f"<create_new_agent_instance><agent_type_template>{template}</agent_type_template>"
        f"<agent_name_label>My BTC Trend Analyst</agent_name_label>"
        f"<initial_config_json>{config}</initial_config_json>{extra}</create_new_agent_instance>"
    )


def dispatch(target: str, task_type: str = "NEW_MARKET_ANALYSIS_SIGNAL",
             payload: str = '{"symbol": "BTC/USDT", "signal": "BUY", "confidence": 0.8}',
             reply: str = "") -> str:
    extra = f"<reply_expected>{reply}</reply_expected>" if reply else ""
    return (
        f"<dispatch_task_to_agent><target_agent_id>{target}</target_agent_id>"
        f"<task_type>{task_type}</task_type><task_payload_json>{payload}</task_payload_json>"
        f"{extra}</dispatch_task_to_agent>"
    )


def schedule(target: str, timing: str = "<interval_seconds>3600</interval_seconds>",
             name: str = "BTC_1h_TrendAnalysis", enabled: str = "") -> str:
    extra = f"<enabled_on_create>{enabled}</enabled_on_create>" if enabled else ""
    return (
        f"<schedule_background_job><job_name>{name}</job_name>"
        "<job_type_identifier>PERIODIC_AGENT_TRIGGER</job_type_identifier>"
        f"{timing}<target_agent_id_on_trigger>{target}</target_agent_id_on_trigger>"
        "<task_type_on_trigger>RUN_ANALYSIS</task_type_on_trigger>"
        '<task_payload_on_trigger_json>{"symbol": "BTC/USDT", "interval": "1h"}'
        f"</task_payload_on_trigger_json>{extra}</schedule_background_job>"
    )


# --- create_new_agent_instance -------------------------------------------------------------

def test_creating_an_agent_returns_its_id_and_running_status(rig: Rig) -> None:
    data = rig.data(create(config='{"symbols": ["BTC/USDT"], "interval": "1h"}'))
    assert data.tag == "agent_instance_created"
    got = attrs(data)
    agent = rig.directory.get_agent(got["agent_id"])
    assert agent is not None and agent.config == {"symbols": ["BTC/USDT"], "interval": "1h"}
    assert got == {
        "agent_id": agent.agent_id, "agent_type_template": "AnalystAgent_Trend_v1",
        "agent_name_label": "My BTC Trend Analyst", "status": "RUNNING",
    }
    assert rig.directory.created_by[agent.agent_id] == rig.soa


def test_an_agent_not_started_is_initialized(rig: Rig) -> None:
    assert attrs(rig.data(create(start="false")))["status"] == "INITIALIZED"


def test_an_unknown_template_is_not_found_and_lists_the_known_ones(rig: Rig) -> None:
    result = rig.call(create("AnalystAgent_LTECS_v1"))
    assert result.error_code is not None and result.error_code.value == "NOT_FOUND"
    assert "Known templates: AnalystAgent_Trend_v1, SystemOrchestrator_v1" in result.message


def test_a_config_that_is_not_a_json_object_is_refused_before_creating(rig: Rig) -> None:
    result = rig.call(create(config="[1, 2]"))
    assert result.error_code is not None and result.error_code.value == "INVALID_PARAMETER"
    assert "must be a JSON object" in result.message
    invalid = rig.call(create(config='{"symbols": "BTC"}'))
    assert "field 'symbols' must be a list" in invalid.message
    assert len(rig.directory.agents) == 1  # only the orchestrator


def test_only_an_agent_with_the_agents_permission_can_create_agents(rig: Rig) -> None:
    analyst = rig.ctx(permissions=frozenset({Permission.MARKET, Permission.TASKS}))
    result = rig.call(create(), analyst)
    assert result.error_code is not None and result.error_code.value == "PERMISSION_DENIED"


# --- dispatch_task_to_agent ----------------------------------------------------------------

def test_a_dispatched_task_waits_in_the_targets_inbox(rig: Rig) -> None:
    trader = rig.directory.add("Trader", "TraderAgent_Default_v1").agent_id
    data = rig.data(dispatch(trader, reply="true"))
    got = attrs(data)
    assert data.tag == "task_dispatched_to_agent"
    assert (got["target_agent_id"], got["status"]) == (trader, "QUEUED_FOR_DELIVERY")
    task = rig.queue.take(trader)
    assert task is not None and task.task_id == got["dispatched_task_id"]
    assert (task.task_type, task.source, task.reply_to, task.reply_expected) == (
        "NEW_MARKET_ANALYSIS_SIGNAL", f"agent:{rig.soa}", rig.soa, True,
    )
    assert task.payload == {"symbol": "BTC/USDT", "signal": "BUY", "confidence": 0.8}


def test_without_reply_expected_no_answer_is_routed_back(rig: Rig) -> None:
    trader = rig.directory.add("Trader").agent_id
    rig.data(dispatch(trader))
    task = rig.queue.take(trader)
    assert task is not None and (task.reply_to, task.reply_expected) == (None, False)


def test_a_redelivered_task_repeating_its_dispatch_sends_it_once(rig: Rig) -> None:
    trader = rig.directory.add("Trader").agent_id
    first = rig.data(dispatch(trader), rig.ctx(task="t-9", step=4))
    again = rig.data(dispatch(trader), rig.ctx(task="t-9", step=4))
    other_step = rig.data(dispatch(trader), rig.ctx(task="t-9", step=5))
    assert attrs(again)["dispatched_task_id"] == attrs(first)["dispatched_task_id"]
    assert attrs(other_step)["dispatched_task_id"] != attrs(first)["dispatched_task_id"]
    assert rig.queue.busy(trader) == 2


def test_dispatching_to_an_unknown_or_deleted_agent_is_not_found(rig: Rig) -> None:
    result = rig.call(dispatch("no-such-agent"))
    assert result.error_code is not None and result.error_code.value == "NOT_FOUND"
    assert "There is no agent with id 'no-such-agent'" in result.message
    gone = rig.directory.add("Old").agent_id
    rig.directory.deleted.add(gone)
    assert rig.call(dispatch(gone)).error_code.value == "NOT_FOUND"  # type: ignore[union-attr]
    assert rig.queue.busy() == 0


def test_dispatching_to_a_stopped_agent_says_to_resume_it_first(rig: Rig) -> None:
    stopped = rig.directory.add("Sleeper", state=AgentState.STOPPED)
    result = rig.call(dispatch(stopped.agent_id))
    assert result.error_code is not None and result.error_code.value == "INVALID_PARAMETER"
    assert result.message == (
        f"Agent {stopped.agent_id} (Sleeper) is stopped and takes no tasks. Resume it first: "
        "dispatch task_type RESUME_AGENT to it."
    )
    assert rig.queue.busy() == 0


@pytest.mark.parametrize(
    ("task_type", "action", "state"),
    [("PAUSE_AGENT", "pause", "paused"), ("stop_agent", "stop", "stopped")],
)
def test_control_tasks_are_carried_out_at_once(
    rig: Rig, task_type: str, action: str, state: str
) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    got = attrs(rig.data(dispatch(analyst, task_type, "{}")))
    assert got["status"] == "DELIVERY_ACKNOWLEDGED"
    assert rig.directory.controls == [(analyst, action)]
    assert rig.directory.get_agent(analyst).state.value == state  # type: ignore[union-attr]
    record = rig.queue.get(got["dispatched_task_id"])
    assert record is not None and record.status is TaskStatus.DONE
    assert record.result == f"agent is now {state}"
    assert rig.queue.take(analyst) is None


def test_a_stopped_agent_can_be_resumed_by_dispatch(rig: Rig) -> None:
    stopped = rig.directory.add("Sleeper", state=AgentState.STOPPED).agent_id
    assert attrs(rig.data(dispatch(stopped, "RESUME_AGENT", "{}")))["status"] == (
        "DELIVERY_ACKNOWLEDGED"
    )
    assert rig.directory.get_agent(stopped).state is AgentState.RUNNING  # type: ignore[union-attr]


def test_a_repeated_control_call_is_carried_out_once(rig: Rig) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    first = rig.data(dispatch(analyst, "STOP_AGENT", "{}"), rig.ctx(task="t", step=2))
    again = rig.data(dispatch(analyst, "STOP_AGENT", "{}"), rig.ctx(task="t", step=2))
    assert attrs(first) == attrs(again)
    assert rig.directory.controls == [(analyst, "stop")]


def test_a_config_update_is_carried_out_at_once_and_only_once(rig: Rig) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    xml = dispatch(analyst, "UPDATE_AGENT_CONFIG", '{"trader_agent_id": "trader-7"}')
    first = attrs(rig.data(xml, rig.ctx(task="t", step=3)))
    again = attrs(rig.data(xml, rig.ctx(task="t", step=3)))
    assert first == again and first["status"] == "DELIVERY_ACKNOWLEDGED"
    assert rig.directory.get_agent(analyst).config == {"trader_agent_id": "trader-7"}  # type: ignore[union-attr]
    record = rig.queue.get(first["dispatched_task_id"])
    assert record is not None and record.result == "configuration updated: trader_agent_id"
    assert rig.queue.take(analyst) is None


def test_a_config_update_with_an_unknown_field_is_refused_naming_it(rig: Rig) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    result = rig.call(dispatch(analyst, "UPDATE_AGENT_CONFIG", '{"leverage": 100}'))
    assert result.status == "error" and "'leverage'" in result.message
    assert rig.directory.get_agent(analyst).config == {}  # type: ignore[union-attr]


def test_the_agent_list_shows_states_configs_and_jobs_with_next_runs(rig: Rig) -> None:
    analyst = rig.directory.add("BTC Analyst").agent_id
    rig.directory.agents[analyst].config = {"symbols": ["BTC/USDT"], "interval": "1h"}
    rig.directory.add("Trader", "TraderAgent_Default_v1", AgentState.PAUSED)
    rig.data(schedule(analyst))
    listed = rig.data("<list_agent_instances/>")
    assert listed.attr("count") == "3"
    by_name = {a.attr("name"): a for a in listed.children}
    btc = by_name["BTC Analyst"]
    assert (btc.attr("role"), btc.attr("state")) == ("analyst", "running")
    config, job = btc.children
    assert config.text == '{"interval": "1h", "symbols": ["BTC/USDT"]}'
    assert job.attr("job_name") == "BTC_1h_TrendAnalysis" and job.attr("schedule") == "every 3600 s"
    assert job.attr("next_run_time_utc_iso") == "2024-01-02T04:00:00Z"  # START + 1h
    assert by_name["Trader"].attr("state") == "paused"
    traders = rig.data("<list_agent_instances><role>Trader</role></list_agent_instances>")
    assert [a.attr("name") for a in traders.children] == ["Trader"]


def test_a_control_the_lifecycle_forbids_is_refused_with_the_reason(rig: Rig) -> None:
    stopped = rig.directory.add("Sleeper", state=AgentState.STOPPED).agent_id
    result = rig.call(dispatch(stopped, "PAUSE_AGENT", "{}"))
    assert result.error_code is not None and result.error_code.value == "INVALID_PARAMETER"
    assert "Cannot pause agent" in result.message
    assert "an agent that is stopped cannot become paused" in result.message


@pytest.mark.parametrize(
    ("task_type", "words"),
    [("USER_MESSAGE", "reserved for the system"), ("ORDER_FILLED", "reserved for the system"),
     ("run analysis!", "letters, digits and underscores")],
)
def test_system_and_malformed_task_types_are_refused(rig: Rig, task_type: str, words: str) -> None:
    trader = rig.directory.add("Trader").agent_id
    result = rig.call(dispatch(trader, task_type))
    assert result.error_code is not None and result.error_code.value == "INVALID_PARAMETER"
    assert words in result.message
    assert rig.queue.busy() == 0


# --- schedule_background_job ---------------------------------------------------------------

def test_scheduling_a_job_reports_its_next_run(rig: Rig) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    rig.clock.advance_to(START + 20 * 60_000)
    data = rig.data(schedule(analyst))
    got = attrs(data)
    assert data.tag == "background_job_scheduled"
    job = rig.scheduler.get(got["internal_job_id"])
    assert job is not None and job.created_by == rig.soa
    assert got == {
        "internal_job_id": job.job_id, "job_name": "BTC_1h_TrendAnalysis",
        "status": "SCHEDULED_AND_ACTIVE", "next_run_time_utc_iso": "2024-01-02T04:00:00Z",
    }
    rig.clock.advance_to(START + HOUR)
    (task,) = rig.scheduler.fire_due(rig.clock.now_ms())
    assert (task.agent_id, task.task_type, task.source) == (
        analyst, "RUN_ANALYSIS", f"job:{job.job_id}",
    )


def test_a_cron_job_created_disabled_says_so(rig: Rig) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    got = attrs(rig.data(schedule(analyst, "<cron_expression>0 */4 * * *</cron_expression>",
                                  enabled="false")))
    assert (got["status"], got["next_run_time_utc_iso"]) == (
        "SCHEDULED_BUT_DISABLED", "2024-01-02T04:00:00Z",
    )


@pytest.mark.parametrize(
    ("timing", "code", "words"),
    [
        ("", "MISSING_PARAMETER", "Give <cron_expression>"),
        ("<cron_expression></cron_expression>", "MISSING_PARAMETER", "<interval_seconds>"),
        ("<cron_expression>0 * * * *</cron_expression><interval_seconds>60</interval_seconds>",
         "INVALID_PARAMETER", "not both"),
        ("<cron_expression>every hour</cron_expression>", "INVALID_PARAMETER", "5 fields"),
        ("<interval_seconds>0</interval_seconds>", "INVALID_PARAMETER", "at least 1"),
    ],
)
def test_a_bad_schedule_is_refused(rig: Rig, timing: str, code: str, words: str) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    result = rig.call(schedule(analyst, timing))
    assert result.error_code is not None and result.error_code.value == code, result.xml
    assert words in result.message
    assert rig.scheduler.jobs() == []


def test_scheduling_for_an_unknown_agent_is_not_found(rig: Rig) -> None:
    result = rig.call(schedule("ghost"))
    assert result.error_code is not None and result.error_code.value == "NOT_FOUND"
    assert result.details["parameter"] == "target_agent_id_on_trigger"


def test_a_repeated_schedule_call_returns_the_same_job(rig: Rig) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    first = attrs(rig.data(schedule(analyst)))
    again = attrs(rig.data(schedule(analyst)))
    assert again == first and len(rig.scheduler.jobs()) == 1


def test_a_different_job_under_a_taken_name_is_refused(rig: Rig) -> None:
    analyst = rig.directory.add("Analyst").agent_id
    rig.data(schedule(analyst))
    result = rig.call(schedule(analyst, "<interval_seconds>900</interval_seconds>"))
    assert result.error_code is not None and result.error_code.value == "INVALID_PARAMETER"
    assert "A job named 'BTC_1h_TrendAnalysis' already exists" in result.message


# --- send_notification ---------------------------------------------------------------------

def notify(*channels: str, extra: str = "") -> str:
    items = "".join(f"<channel>{c}</channel>" for c in channels)
    return (f"<send_notification><channels>{items}</channels>"
            f"<message_text>BTC broke 45000</message_text>{extra}</send_notification>")


def test_each_channel_reports_its_own_status(rig: Rig) -> None:
    raised: list[NotificationRaised] = []
    rig.bus.subscribe(NotificationRaised, raised.append)
    result = rig.call(notify("TELEGRAM", "ui_alert"))
    assert result.status == "success"
    data = result.data[0]
    assert data.tag == "notification_sent_status"
    nid = raised[0].notification_id
    assert [attrs(c) for c in data.children] == [
        {"channel": "TELEGRAM", "delivery_status": "FAILED",
         "message_id_or_error": "TELEGRAM is not configured: set it in Settings"},
        {"channel": "UI_ALERT", "delivery_status": "SUCCESS", "message_id_or_error": nid},
    ]
    assert '<channel_status channel="UI_ALERT" delivery_status="SUCCESS"' in result.xml
    assert raised[0].urgency == "MEDIUM" and raised[0].agent_id == rig.soa


def test_subject_and_urgency_reach_the_channels(rig: Rig) -> None:
    raised: list[NotificationRaised] = []
    rig.bus.subscribe(NotificationRaised, raised.append)
    rig.data(notify("TRAY", extra="<subject_text>Alert</subject_text>"
                                  "<urgency_level>critical</urgency_level>"))
    assert (raised[0].subject, raised[0].urgency, raised[0].channel) == ("Alert", "CRITICAL",
                                                                         "TRAY")


def test_an_unknown_channel_is_refused_listing_the_valid_ones(rig: Rig) -> None:
    result = rig.call(notify("UI_ALERT", "SMS"))
    assert result.error_code is not None and result.error_code.value == "INVALID_PARAMETER"
    assert result.message == (
        "<channel> 'SMS' is not a notification channel; use one of UI_ALERT, TRAY, TELEGRAM, "
        "EMAIL."
    )
    assert rig.notifications.recent() == []


def test_no_channel_at_all_is_refused(rig: Rig) -> None:
    result = rig.call(notify())
    assert result.error_code is not None and result.error_code.value == "INVALID_PARAMETER"
    assert "needs at least one <channel>" in result.message


# --- ask_user_clarification ----------------------------------------------------------------

def test_a_clarification_is_stored_for_the_task_and_the_agent_waits(rig: Rig) -> None:
    xml = (
        "<ask_user_clarification><question_text>Which timeframe should the analyst use?"
        "</question_text><suggested_replies><reply>1h</reply><reply>4h</reply>"
        "</suggested_replies><expected_response_format_hint>TEXT</expected_response_format_hint>"
        "</ask_user_clarification>"
    )
    data = rig.data(xml, rig.ctx(task="task-42", step=3))
    got = attrs(data)
    assert data.tag == "clarification_requested" and got["status"] == "WAITING_FOR_USER"
    question = rig.questions.get(got["question_id"])
    assert question is not None
    assert (question.agent_id, question.task_id, question.kind) == (
        rig.soa, "task-42", QuestionKind.CLARIFICATION,
    )
    assert question.suggested_replies == ("1h", "4h") and question.format_hint == "TEXT"
    assert rig.questions.for_task("task-42") == question
    again = rig.data(xml, rig.ctx(task="task-42", step=3))
    assert attrs(again) == got and len(rig.questions.pending()) == 1


def test_a_bare_question_gets_no_replies_and_a_text_hint(rig: Rig) -> None:
    data = rig.data("<ask_user_clarification><question_text>Proceed?</question_text>"
                    "</ask_user_clarification>")
    question = rig.questions.get(attrs(data)["question_id"])
    assert question is not None and (question.suggested_replies, question.format_hint) == (
        (), "TEXT",
    )


# --- the specs as the prompt shows them ----------------------------------------------------

def test_the_tools_are_the_seeds_five_and_the_agent_list_with_their_permissions(
    rig: Rig,
) -> None:
    assert {s.name: s.permission for s in rig.specs} == {
        "create_new_agent_instance": Permission.AGENTS,
        "list_agent_instances": Permission.AGENTS,
        "dispatch_task_to_agent": Permission.TASKS,
        "schedule_background_job": Permission.JOBS,
        "send_notification": Permission.NOTIFY,
        "ask_user_clarification": Permission.ASK_USER,
    }
    order = {s.name: [p.name for p in s.params] for s in rig.specs}
    assert order["schedule_background_job"] == [
        "job_name", "job_type_identifier", "cron_expression", "interval_seconds",
        "target_agent_id_on_trigger", "task_type_on_trigger", "task_payload_on_trigger_json",
        "enabled_on_create",
    ]
    assert order["send_notification"] == [
        "channels", "message_text", "subject_text", "urgency_level",
    ]


FILLED = {  # a valid value for every placeholder of the five examples, and what it validates to
    ParamType.STRING: ("BTC & <ETH>", "BTC & <ETH>"),
    ParamType.INTEGER: ("3600", 3600),
    ParamType.BOOLEAN: ("false", False),
    ParamType.JSON_OBJECT: ('{"symbol": "BTC/USDT"}', {"symbol": "BTC/USDT"}),
    ParamType.LIST: (["TRAY", "EMAIL"], ["TRAY", "EMAIL"]),
}


def test_every_example_in_the_prompt_is_a_valid_call(rig: Rig) -> None:
    registry = ToolRegistry(rig.specs)
    section = registry.available_tools_section(ALL_PERMISSIONS)
    for spec in rig.specs:
        match = re.search(rf"Invocation Format:\n```xml\n(<{spec.name}>.*?</{spec.name}>)\n```",
                          section, re.S)
        assert match is not None, spec.name
        assert parse_response(match.group(1), registry.names()).call is not None
        root = etree.fromstring(match.group(1))  # the example as shown is well-formed XML
        expected: dict[str, object] = {}
        for element in root:
            if not isinstance(element.tag, str):
                continue  # a comment
            param = spec.param(element.tag)
            assert param is not None, f"{spec.name} shows <{element.tag}>, which it lacks"
            if param.type is ParamType.ENUM:  # any of its choices, written in lower case
                written, expected[param.name] = param.choices[-1].lower(), param.choices[-1]
            else:
                written, expected[param.name] = FILLED[param.type]
            if isinstance(written, list):
                items = [child for child in element if isinstance(child.tag, str)]
                for item, value in zip(items, written, strict=True):
                    item.text = value
            else:
                element.text = written
        parsed = parse_response(etree.tostring(root, encoding="unicode"), registry.names())
        assert parsed.call is not None and parsed.call.name == spec.name, parsed.error
        assert validate(spec, parsed.call.params) == expected
