"""The Orchestrator policy: turn the plain commands of ``commands.py`` into tool calls.

A setup (``watch …``) asks for what it lacks with ``ask_user_clarification`` (symbols, interval,
schedule, which analyst; each at most three times), then lists the agents: a setup that exists
already (the same analyst template, symbols and interval, with a Trader when one is asked for) is
reused, not repeated (``kestrel run --setup`` sends the same words on every start), with only a
missing job scheduled and a paused or stopped agent resumed. Otherwise it calls, in order:
``create_new_agent_instance`` for the Trader (unless none is wanted or an existing one is reused,
found with ``list_agent_instances``), ``create_new_agent_instance`` for the Analyst with
``trader_agent_id`` set, one ``schedule_background_job`` per symbol (RUN_ANALYSIS to the Analyst),
a first RUN_ANALYSIS per symbol dispatched at once (so the person need not wait for the schedule),
``send_notification`` (UI_ALERT) announcing it, and answers with a summary: names, job names and
next runs. ``status``, ``pause/resume/stop`` and ``add a trader`` are in ``agent_commands.py``.
What it says to the person names agents by their names; ids appear only in the tool calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.agents.rules.agent_commands import add_trader, control, status
from app.agents.rules.calls import Answer, call, final
from app.agents.rules.commands import (
    HELP_TEXT,
    INTERVALS,
    Analyst,
    Command,
    Kind,
    Schedule,
    TraderChoice,
    is_cancel,
    parse_command,
    parse_fragment,
)
from app.agents.rules.roster import (
    MAX_ASKS,
    TRADER_TEMPLATE,
    Listed,
    agents_of,
    announce,
    symbols_label,
)
from app.agents.rules.transcript import Result, Transcript
from app.domain.words import iso_in_words
from app.memory.roles import symbol_key

MODEL = "rules-orchestrator-v1"
ANALYST_TEMPLATES = {
    Analyst.TREND: ("AnalystAgent_Trend_v1", "Trend", "Trend Analyst"),
    Analyst.MEAN_REVERSION: (
        "AnalystAgent_MeanReversion_v1", "MeanReversion", "Mean-Reversion Analyst"),
}
_ASK_TAG = re.compile(r"^\[ask (\w+) (\d+)\]")


def _cannot_watch(result: Result | None, interval: str) -> str | None:
    """A creation refused because its symbol cannot trade here (the runtime's check names the
    symbol and what can be watched): the person's answer, with a setup that would work."""
    if result is None or result.ok or "tradeable" not in result.details:
        return None
    tradeable = [str(s) for s in result.details.get("tradeable") or []]
    answer = f"Nothing was set up. {result.message}"
    if tradeable:
        answer += (f" Try: watch {tradeable[0]} on {interval} every {interval} with a trend "
                   "analyst and a trader")
    return answer


def _same_setup(
    agents: list[Listed], template: str, symbols: tuple[str, ...], interval: str,
    trader: TraderChoice,
) -> Listed | None:
    """An analyst that already does what a setup asks: the same template, symbols and interval,
    and a Trader when one is asked for (none when none is)."""
    traders = {a.agent_id for a in agents if a.role == "trader"}
    for agent in agents:
        if agent.role != "analyst" or agent.template != template:
            continue
        if sorted(str(s) for s in agent.config.get("symbols") or []) != sorted(symbols):
            continue
        if agent.config.get("interval") != interval:
            continue
        linked = str(agent.config.get("trader_agent_id") or "") in traders
        if linked == (trader is not TraderChoice.NONE):
            return agent
    return None


_QUOTE = re.compile(r"^- Quote currency: ([A-Za-z0-9]{2,10}) ", re.MULTILINE)


def quote_currency(system: str) -> str:
    """The account's quote currency as the system prompt's Runtime Context names it (what a
    model reads): a coin named alone trades against it. USDT when the prompt names none."""
    found = _QUOTE.search(system)
    return found.group(1).upper() if found is not None else "USDT"


class OrchestratorPolicy:
    def __init__(self, agent_id: str, config: Mapping[str, Any], quote: str = "USDT") -> None:
        self.agent_id = agent_id
        self.quote = quote
        self.default_interval = str(config.get("default_interval") or "1h")

    def turn(self, t: Transcript) -> Answer:
        task = t.task
        if task.task_type == "TASK_REPLY":
            sender = (task.payload.get("from_agent_name") or task.payload.get("from_agent_id")
                      or "an agent")
            return final(f"Reply from {sender}: {task.payload.get('text', '')}")
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
                return status(t)
            case Kind.CONTROL:
                return control(t, command, self.agent_id)
            case Kind.ADD_TRADER:
                return add_trader(t, command, self.quote)
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
            listed = markets.result.first() if markets.result and markets.result.ok else None
            offered = [bar.get("symbol", "") for bar in (listed if listed is not None else [])]
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
        label = symbols_label(c.symbols)
        choice = c.trader or TraderChoice.NONE
        agents = agents_of(t, "First: is this watch set up already? Then it is reused.")
        if isinstance(agents, Answer):
            return agents
        same = _same_setup(agents, template, c.symbols, interval, choice)
        if same is not None and t.tagged("create analyst") is None:
            return self._reuse(t, c, same, agents, job_word, schedule)
        notes: list[str] = []
        trader_id: str | None = None
        trader_name = ""
        if choice is TraderChoice.EXISTING:
            traders = [a for a in agents if a.role == "trader" and a.state != "stopped"]
            overlap = [a for a in traders if set(a.config.get("symbols") or c.symbols)
                       & set(c.symbols)]
            chosen = next(iter(overlap or traders), None)
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
                refused = _cannot_watch(created.result, c.interval or self.default_interval)
                if refused is not None:
                    return final(refused)
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
                + (f", sending its signals to {trader_name}." if trader_id else ", signals only."),
                agent_type_template=template, agent_name_label=f"{label} {interval} {title}",
                initial_config_json=config, start_immediately=True,
            )
        if analyst.result is None or not analyst.result.ok:
            refused = _cannot_watch(analyst.result, interval)
            if refused is not None and choice is not TraderChoice.NEW:
                return final(refused)
            problem = analyst.result.problem() if analyst.result else "no result"
            made = f" The Trader {trader_name} was created and waits idle." if (
                choice is TraderChoice.NEW) else ""
            return final(f"Could not create the Analyst: {problem}.{made}")
        analyst_id = analyst.result.attr("agent_id") or ""
        analyst_name = analyst.result.attr("agent_name_label") or title
        jobs = self._jobs(t, c, analyst_id, (), job_word, schedule, notes)
        if isinstance(jobs, Answer):
            return jobs
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
        trading = (f"its BUY/SELL signals go to {trader_name}, which orders through the "
                   "Risk Guard" if trader_id else
                   "no Trader: its signals are logged and notified, nothing is traded "
                   "(say 'add a trader' to trade them)")
        summary = (f"Set up {analyst_name} analysing {', '.join(jobs) or label} "
                   f"on {interval} candles, starting with an analysis now; {trading}.")
        if notes:
            summary += " " + " ".join(notes)
        announced = t.tagged("announce")
        if announced is None:
            return announce(summary)
        return final(summary)

    def _jobs(
        self, t: Transcript, c: Command, analyst_id: str, existing: tuple[Mapping[str, str], ...],
        job_word: str, schedule: Schedule, notes: list[str],
    ) -> list[str] | Answer:
        """The analysis job of each symbol: an existing one is kept, a missing one scheduled."""
        interval = c.interval or self.default_interval
        jobs: list[str] = []
        for symbol in c.symbols:
            name = f"{symbol_key(symbol)}_{interval}_{job_word}_{analyst_id[:8]}"
            found = next((j for j in existing if j.get("job_name") == name), None)
            if found is not None:
                kept = Schedule.listed_words(found.get("schedule", ""))
                next_run = found.get("next_run_time_utc_iso")
                jobs.append(f"{symbol} {kept} (job {name}, next run "
                            f"{iso_in_words(next_run) if next_run else 'none: it is disabled'})")
                if kept != schedule.words():
                    notes.append(f"You asked for {schedule.words()}; the existing schedule of "
                                 f"{symbol} ({kept}) is kept: stop this analyst and set the "
                                 "watch up again to change it.")
                continue
            job = t.tagged(f"job {symbol}")
            if job is None:
                return call(
                    "schedule_background_job", f"job {symbol}",
                    f"Scheduling the analysis of {symbol} {schedule.words()}.",
                    job_name=name, job_type_identifier="PERIODIC_AGENT_TRIGGER",
                    cron_expression=schedule.cron, interval_seconds=schedule.interval_s,
                    target_agent_id_on_trigger=analyst_id, task_type_on_trigger="RUN_ANALYSIS",
                    task_payload_on_trigger_json={"symbol": symbol, "interval": interval},
                    enabled_on_create=True,
                )
            if job.result is not None and job.result.ok:
                jobs.append(
                    f"{symbol} {schedule.words()} (job {job.result.attr('job_name')}, next run "
                    f"{iso_in_words(job.result.attr('next_run_time_utc_iso') or '')})"
                )
            else:
                problem = job.result.problem() if job.result else "no result"
                notes.append(f"The schedule for {symbol} failed: {problem}")
        return jobs

    def _reuse(
        self, t: Transcript, c: Command, analyst: Listed, agents: list[Listed], job_word: str,
        schedule: Schedule,
    ) -> Answer:
        """The watch exists (a setup sent again, e.g. by every ``kestrel run --setup``): keep
        its agents, schedule only a missing job and let a paused or stopped agent run again."""
        by_id = {a.agent_id: a for a in agents}
        trader = by_id.get(str(analyst.config.get("trader_agent_id") or ""))
        notes: list[str] = []
        for agent in (analyst, trader):
            if agent is None or agent.state in ("running", "waiting_for_user"):
                continue
            step = t.tagged(f"resume {agent.agent_id}")
            if step is None:
                return call(
                    "dispatch_task_to_agent", f"resume {agent.agent_id}",
                    f"{agent.name} exists but is {agent.state}: letting it run again.",
                    target_agent_id=agent.agent_id, task_type="RESUME_AGENT",
                    task_payload_json={}, reply_expected=False,
                )
            if step.result is not None and step.result.ok:
                notes.append(f"{agent.name} was {agent.state.replace('_', ' ')} and runs again.")
            else:
                problem = step.result.problem() if step.result else "no result"
                notes.append(f"{agent.name} is {agent.state} and could not resume: {problem}")
        jobs = self._jobs(t, c, analyst.agent_id, analyst.jobs, job_word, schedule, notes)
        if isinstance(jobs, Answer):
            return jobs
        trading = (f"its signals go to {trader.name}" if trader is not None
                   else "it has no Trader")
        watched = ", ".join(jobs) or symbols_label(c.symbols)
        summary = (f"This watch is already set up, so I reused it and created nothing new: "
                   f"{analyst.name} analyses {watched}; {trading}.")
        return final(" ".join([summary, *notes]))
