"""The Orchestrator policy: turn the plain commands of ``commands.py`` into tool calls.

A setup (``watch …``) asks for what it lacks with ``ask_user_clarification`` (symbols, interval,
schedule, which analyst; each at most three times), then calls, in order:
``create_new_agent_instance`` for the Trader (unless none is wanted or an existing one is reused,
found with ``list_agent_instances``), ``create_new_agent_instance`` for the Analyst with
``trader_agent_id`` set, one ``schedule_background_job`` per symbol (RUN_ANALYSIS to the Analyst),
a first RUN_ANALYSIS per symbol dispatched at once (so the person need not wait for the schedule),
``send_notification`` (UI_ALERT) announcing it, and answers with a summary: ids, job names and
next runs. ``status``, ``pause/resume/stop`` and ``add a trader`` read the agents with
``list_agent_instances`` and act with ``dispatch_task_to_agent``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.agents.rules.calls import Answer, call, final
from app.agents.rules.commands import (
    HELP_TEXT,
    INTERVALS,
    Analyst,
    Command,
    Kind,
    TraderChoice,
    is_cancel,
    parse_command,
    parse_fragment,
)
from app.agents.rules.transcript import Step, Transcript
from app.memory.roles import symbol_key

MODEL = "rules-orchestrator-v1"
TRADER_TEMPLATE = "TraderAgent_Default_v1"
ANALYST_TEMPLATES = {
    Analyst.TREND: ("AnalystAgent_Trend_v1", "Trend", "Trend Analyst"),
    Analyst.MEAN_REVERSION: (
        "AnalystAgent_MeanReversion_v1", "MeanReversion", "Mean-Reversion Analyst"),
}
MAX_ASKS = 3
_ASK_TAG = re.compile(r"^\[ask (\w+) (\d+)\]")
CONTROL_TASKS = {"pause": "PAUSE_AGENT", "resume": "RESUME_AGENT", "stop": "STOP_AGENT"}
_CAN = {
    "pause": {"running", "waiting_for_user"},
    "resume": {"paused", "stopped", "faulted", "created"},
    "stop": {"created", "running", "paused", "waiting_for_user", "faulted"},
}


@dataclass(frozen=True, slots=True)
class Listed:
    """One agent as ``list_agent_instances`` reported it."""

    agent_id: str
    name: str
    role: str
    state: str
    template: str
    config: Mapping[str, Any]
    last_action: str
    last_action_time: str
    fault_reason: str
    jobs: tuple[Mapping[str, str], ...]


def _listed(step: Step | None) -> list[Listed] | None:
    if step is None or step.result is None or not step.result.ok:
        return None
    root = step.result.first()
    agents = []
    for item in root if root is not None else ():
        try:
            config = json.loads(item.findtext("config_json") or "{}")
        except ValueError:
            config = {}
        agents.append(Listed(
            agent_id=item.get("agent_id", ""), name=item.get("name", ""),
            role=item.get("role", ""), state=item.get("state", ""),
            template=item.get("template", ""), config=config if isinstance(config, dict) else {},
            last_action=item.get("last_action", ""),
            last_action_time=item.get("last_action_time_iso", ""),
            fault_reason=item.get("fault_reason", ""),
            jobs=tuple(dict(job.attrib) for job in item.findall("job")),
        ))
    return agents


def _label(symbols: tuple[str, ...] | list[str]) -> str:
    if not symbols:
        return "All-symbol"
    return ", ".join(symbols) if len(symbols) <= 3 else f"{len(symbols)}-symbol"


class OrchestratorPolicy:
    def __init__(self, agent_id: str, config: Mapping[str, Any]) -> None:
        self.agent_id = agent_id
        self.quote = str(config.get("default_quote") or "USDT").upper()
        self.default_interval = str(config.get("default_interval") or "1h")

    def turn(self, t: Transcript) -> Answer:
        task = t.task
        if task.task_type == "TASK_REPLY":
            sender = task.payload.get("from_agent_id", "an agent")
            return final(f"Reply from agent {sender}: {task.payload.get('text', '')}")
        if not task.is_user_message:
            return final(
                f"The rule-engine Orchestrator acts on chat messages; a {task.task_type} task is "
                "not one of them. Nothing done."
            )
        command = parse_command(task.text, self.quote)
        match command.kind:
            case Kind.HELP:
                return final(HELP_TEXT)
            case Kind.WATCH:
                return self._watch(t, command)
            case Kind.STATUS:
                return self._status(t)
            case Kind.CONTROL:
                return self._control(t, command)
            case Kind.ADD_TRADER:
                return self._add_trader(t, command)
        return final(f"I did not understand {task.text[:200]!r}.\n{HELP_TEXT}")

    # -- setting up a watch --------------------------------------------------------------------

    def _watch(self, t: Transcript, command: Command) -> Answer:
        asked: dict[str, int] = {}
        for step in t.steps:
            match = _ASK_TAG.match(step.thinking)
            if step.name != "ask_user_clarification" or match is None:
                continue
            field = match.group(1)
            asked[field] = asked.get(field, 0) + 1
            if step.result is not None and not step.result.ok:
                return final(f"I could not ask you: {step.result.problem()}")
            reply = step.reply or ""
            if is_cancel(reply):
                return final("Cancelled: nothing was set up.")
            command = command.merged(parse_fragment(reply, self.quote, asked=field), field)
        missing = command.missing()
        if missing is None:
            return self._setup(t, command)
        if asked.get(missing, 0) >= MAX_ASKS:
            return final(
                f"I still could not read the {missing} from your answers, so nothing was set up. "
                "Try e.g. 'watch BTC/USDT on 1h every 1h with a trend analyst and a trader'."
            )
        return self._ask(t, command, missing, asked.get(missing, 0) + 1)

    def _ask(self, t: Transcript, c: Command, missing: str, n: int) -> Answer:
        symbols = ", ".join(c.symbols)
        if missing == "symbols":
            markets = t.tagged("markets")
            if markets is None:
                return call(
                    "get_market_snapshot", "markets",
                    "The request names no symbol; the symbols the market offers make good "
                    "suggestions.",
                )
            offered = [bar.get("symbol", "") for bar in (
                markets.result.first() if markets.result and markets.result.ok
                and markets.result.first() is not None else [])]
            question = "Which market should I watch? Name one or more symbols."
            replies = [s for s in offered if s][:5] or [f"BTC/{self.quote}"]
            hint = "TEXT"
        elif missing == "interval":
            bad = f" There is no {c.bad_interval} interval." if c.bad_interval else ""
            question = (f"Which candle interval should the analysis of {symbols} use?{bad} "
                        f"Choose one of {', '.join(INTERVALS)}.")
            replies = list(dict.fromkeys([self.default_interval, "1h", "4h", "15m", "1d"]))[:4]
            hint = "TEXT"
        elif missing == "schedule":
            interval = c.interval or self.default_interval
            question = (f"How often should {symbols} be analysed on {interval}? For example every "
                        f"{interval} (as each candle closes), or a cron expression in UTC.")
            others = [i for i in ("4h", "1h", "15m", "1d") if i != interval][:2]
            replies = [f"Every {interval}, as each candle closes",
                       *(f"Every {o}" for o in others)]
            hint = "TEXT"
        else:
            question = (f"Which analyst should watch {symbols}, and should a Trader act on its "
                        "signals? (The trend analyst follows MACD crosses with the trend; the "
                        "mean-reversion analyst buys stretched prices at the Bollinger bands.)")
            replies = ["A trend analyst and a trader", "A mean-reversion analyst and a trader",
                       "A trend analyst only (signals, no trading)"]
            hint = "TEXT"
        if n > 1:
            question = f"I could not read that. {question}"
        return call(
            "ask_user_clarification", f"ask {missing} {n}",
            f"The request lacks the {missing}; asking instead of guessing.",
            question_text=question, suggested_replies=("reply", replies),
            expected_response_format_hint=hint,
        )

    def _setup(self, t: Transcript, c: Command) -> Answer:
        schedule = c.resolved_schedule()
        interval = c.interval or self.default_interval
        assert schedule is not None and c.analyst is not None
        template, job_word, title = ANALYST_TEMPLATES[c.analyst]
        label = _label(c.symbols)
        choice = c.trader or TraderChoice.NONE
        notes: list[str] = []
        trader_id: str | None = None
        trader_name = ""
        if choice is TraderChoice.EXISTING:
            listed = t.tagged("agents")
            if listed is None:
                return call("list_agent_instances", "agents", "Finding the existing Trader.",
                            role="trader")
            traders = [a for a in _listed(listed) or [] if a.state not in ("stopped",)]
            overlap = [a for a in traders if set(a.config.get("symbols") or c.symbols)
                       & set(c.symbols)]
            chosen = (overlap or traders or [None])[0]
            if chosen is None:
                notes.append("No existing Trader was found, so a new one was created.")
                choice = TraderChoice.NEW
            else:
                trader_id, trader_name = chosen.agent_id, chosen.name
        if choice is TraderChoice.NEW:
            created = t.tagged("create trader")
            if created is None:
                return call(
                    "create_new_agent_instance", "create trader",
                    f"Setting up {label}: the Trader first, so the Analyst can be linked to it.",
                    agent_type_template=TRADER_TEMPLATE, agent_name_label=f"{label} Trader",
                    initial_config_json={"symbols": list(c.symbols)}, start_immediately=True,
                )
            if created.result is None or not created.result.ok:
                problem = created.result.problem() if created.result else "no result"
                return final(f"Could not create the Trader: {problem}. Nothing was set up.")
            trader_id = created.result.attr("agent_id")
            trader_name = created.result.attr("agent_name_label") or f"{label} Trader"
        config: dict[str, Any] = {"symbols": list(c.symbols), "interval": interval}
        if trader_id:
            config["trader_agent_id"] = trader_id
        analyst = t.tagged("create analyst")
        if analyst is None:
            return call(
                "create_new_agent_instance", "create analyst",
                f"Now the {title} for {label} on {interval}"
                + (f", sending its signals to {trader_id}." if trader_id else ", signals only."),
                agent_type_template=template, agent_name_label=f"{label} {interval} {title}",
                initial_config_json=config, start_immediately=True,
            )
        if analyst.result is None or not analyst.result.ok:
            problem = analyst.result.problem() if analyst.result else "no result"
            made = f" The Trader {trader_id} was created and waits idle." if (
                choice is TraderChoice.NEW) else ""
            return final(f"Could not create the Analyst: {problem}.{made}")
        analyst_id = analyst.result.attr("agent_id") or ""
        analyst_name = analyst.result.attr("agent_name_label") or title
        jobs: list[str] = []
        for symbol in c.symbols:
            job = t.tagged(f"job {symbol}")
            if job is None:
                return call(
                    "schedule_background_job", f"job {symbol}",
                    f"Scheduling the analysis of {symbol} {schedule.words()}.",
                    job_name=f"{symbol_key(symbol)}_{interval}_{job_word}_{analyst_id[:8]}",
                    job_type_identifier="PERIODIC_AGENT_TRIGGER",
                    cron_expression=schedule.cron, interval_seconds=schedule.interval_s,
                    target_agent_id_on_trigger=analyst_id, task_type_on_trigger="RUN_ANALYSIS",
                    task_payload_on_trigger_json={"symbol": symbol, "interval": interval},
                    enabled_on_create=True,
                )
            if job.result is not None and job.result.ok:
                jobs.append(
                    f"{symbol} {schedule.words()} (job {job.result.attr('job_name')}, next run "
                    f"{job.result.attr('next_run_time_utc_iso')})"
                )
            else:
                problem = job.result.problem() if job.result else "no result"
                notes.append(f"The schedule for {symbol} failed: {problem}")
        for symbol in c.symbols:
            first = t.tagged(f"first {symbol}")
            if first is None:
                return call(
                    "dispatch_task_to_agent", f"first {symbol}",
                    f"A first analysis of {symbol} now, so you need not wait for the schedule.",
                    target_agent_id=analyst_id, task_type="RUN_ANALYSIS",
                    task_payload_json={"symbol": symbol, "interval": interval},
                    reply_expected=False,
                )
        trading = (f"its BUY/SELL signals go to Trader {trader_name} ({trader_id}), which orders "
                   "through the Risk Guard" if trader_id else
                   "no Trader: its signals are logged and notified, nothing is traded "
                   "(say 'add a trader' to trade them)")
        summary = (f"Set up {analyst_name} ({analyst_id}) analysing {', '.join(jobs) or label} "
                   f"on {interval} candles, starting with an analysis now; {trading}.")
        if notes:
            summary += " " + " ".join(notes)
        announced = t.tagged("announce")
        if announced is None:
            return self._announce(summary)
        return final(summary)

    def _announce(self, summary: str) -> Answer:
        return call(
            "send_notification", "announce", "Announcing what was set up.",
            channels=("channel", ["UI_ALERT"]), message_text=summary,
            subject_text="Agents set up", urgency_level="LOW",
        )

    # -- status, control and adding a trader ---------------------------------------------------

    def _agents(self, t: Transcript, why: str) -> list[Listed] | Answer:
        listed = t.tagged("agents")
        if listed is None:
            return call("list_agent_instances", "agents", why)
        agents = _listed(listed)
        if agents is None:
            problem = listed.result.problem() if listed.result else "no result"
            return final(f"I could not list the agents: {problem}")
        return agents

    def _status(self, t: Transcript) -> Answer:
        agents = self._agents(t, "The person asked for the status of the agents.")
        if isinstance(agents, Answer):
            return agents
        agents = [a for a in agents if a.role != "orchestrator"]
        if not agents:
            return final("No agents yet besides me. Try: watch BTC/USDT on 1h every 1h with a "
                         "trend analyst and a trader.")
        lines = [f"{len(agents)} agent(s):"]
        for a in agents:
            state = a.state.replace("_", " ")
            if a.fault_reason:
                state += f" ({a.fault_reason})"
            line = f"- {a.name} [{a.role}, {a.agent_id}]: {state}"
            if a.last_action:
                line += f"; last: {a.last_action} at {a.last_action_time}"
            for job in a.jobs:
                next_run = job.get("next_run_time_utc_iso") or "disabled"
                line += f"; job {job.get('job_name')} {job.get('schedule')}, next {next_run}"
            lines.append(line)
        return final("\n".join(lines))

    def _targets(self, agents: list[Listed], target: str) -> list[Listed]:
        others = [a for a in agents if a.role != "orchestrator" and a.agent_id != self.agent_id]
        wanted = target.lower().removeprefix("the ").strip()
        if wanted in ("", "all", "everything", "all agents", "agents", "everyone"):
            return others
        for role in ("analyst", "trader"):
            if wanted in (role, f"{role}s", f"all {role}s", f"the {role}s"):
                return [a for a in others if a.role == role]
        exact = [a for a in others if wanted in (a.agent_id.lower(), a.name.lower())]
        return exact or [a for a in others if wanted in a.name.lower()]

    def _control(self, t: Transcript, c: Command) -> Answer:
        agents = self._agents(t, f"To {c.action} agents I need their ids and states.")
        if isinstance(agents, Answer):
            return agents
        targets = self._targets(agents, c.target)
        if not targets:
            names = ", ".join(f"{a.name} ({a.agent_id})" for a in agents
                              if a.role != "orchestrator") or "none"
            return final(f"No agent matches {c.target or 'that'!r}. Agents: {names}.")
        done, skipped = [], []
        for agent in targets:
            if agent.state not in _CAN[c.action]:
                skipped.append(f"{agent.name} is {agent.state.replace('_', ' ')}")
                continue
            step = t.tagged(f"control {agent.agent_id}")
            if step is None:
                return call(
                    "dispatch_task_to_agent", f"control {agent.agent_id}",
                    f"{c.action.capitalize()} {agent.name}.", target_agent_id=agent.agent_id,
                    task_type=CONTROL_TASKS[c.action], task_payload_json={}, reply_expected=False,
                )
            if step.result is not None and step.result.ok:
                done.append(agent.name)
            else:
                skipped.append(f"{agent.name}: {step.result.problem() if step.result else '?'}")
        verb = {"pause": "Paused", "resume": "Resumed", "stop": "Stopped"}[c.action]
        text = f"{verb}: {', '.join(done)}." if done else f"Nothing to {c.action}."
        if skipped:
            text += f" Not changed: {'; '.join(skipped)}."
        return final(text)

    def _add_trader(self, t: Transcript, c: Command) -> Answer:
        agents = self._agents(t, "Which analysts have no Trader yet?")
        if isinstance(agents, Answer):
            return agents
        lonely = [a for a in agents if a.role == "analyst" and a.state != "stopped"
                  and not a.config.get("trader_agent_id")]
        symbols = list(c.symbols) or sorted(
            {str(s) for a in lonely for s in a.config.get("symbols") or []})
        label = _label(symbols)
        created = t.tagged("create trader")
        if created is None:
            return call(
                "create_new_agent_instance", "create trader", f"Creating a Trader for {label}.",
                agent_type_template=TRADER_TEMPLATE, agent_name_label=f"{label} Trader",
                initial_config_json={"symbols": symbols}, start_immediately=True,
            )
        if created.result is None or not created.result.ok:
            problem = created.result.problem() if created.result else "no result"
            return final(f"Could not create the Trader: {problem}")
        trader_id = created.result.attr("agent_id") or ""
        linked, failed = [], []
        for analyst in lonely:
            step = t.tagged(f"link {analyst.agent_id}")
            if step is None:
                return call(
                    "dispatch_task_to_agent", f"link {analyst.agent_id}",
                    f"{analyst.name} has no Trader: linking it to the new one.",
                    target_agent_id=analyst.agent_id, task_type="UPDATE_AGENT_CONFIG",
                    task_payload_json={"trader_agent_id": trader_id}, reply_expected=False,
                )
            if step.result is not None and step.result.ok:
                linked.append(analyst.name)
            else:
                failed.append(f"{analyst.name}: {step.result.problem() if step.result else '?'}")
        summary = f"Created Trader {label} Trader ({trader_id})."
        summary += (f" Signals of {', '.join(linked)} now go to it." if linked else
                    " No analyst without a Trader was found; link one by setting up a watch "
                    "'and the existing trader'.")
        if failed:
            summary += f" Could not link: {'; '.join(failed)}."
        if t.tagged("announce") is None:
            return self._announce(summary)
        return final(summary)

