"""``kestrel eval``: how well a configured model works as Kestrel's Analyst and Trader.

The model runs the Trend Analyst and the Trader over a fixed set of market windows from the
bundled data, each window an agent backtest (the app's own agents, tools and paper broker); the
same window is run again on the rule engine, so the model's decisions are compared bar by bar
with the engine's, and its P&L with the engine's and with buy-and-hold. Every request and
response of the model is recorded (one JSON Lines recording per window), so a run replays exactly
offline: ``run_eval`` with ``replay_from`` answers from the recordings and writes the identical
report. What is measured is read from the run's own ledger and the recording (``eval_reading``)
and reported by ``eval_report``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from app.agents.faults import what_to_do
from app.agents.llm.factory import build_provider
from app.agents.llm.limits import default_concurrency
from app.agents.llm.port import LLMProvider
from app.agents.llm.replay import RecordingProvider, ReplayProvider
from app.agents.rule_engine.engine import RuleEngineProvider
from app.agents.templates import AgentTemplate
from app.config import LLMSettings
from app.domain.agents import AgentInfo
from app.domain.clock import parse_time
from app.domain.errors import OperationalError
from app.market.csv_loader import load_csv
from app.resources import resource_path
from app.runtime.agent_backtest import (
    RULE_ENGINE_BASELINE,
    AgentBacktestOptions,
    AgentBacktestResult,
    run_agent_backtest,
)
from app.runtime.eval_report import (
    REPORT_JSON,
    REPORT_MD,
    REPORT_PNG,
    EvalReport,
    WindowRun,
    build_report,
)
from app.runtime.output_folder import OutputFolderRefused, OutputKind, prepare_output_folder
from app.runtime.providers import RULE_ENGINE
from app.secrets import SecretStore

RUN_FILE = "run.json"
RECORDINGS = "recordings"
WINDOWS = "windows"
REPLAY = "replay"  # where ``--replay RUN`` writes by default: RUN/replay
# what a run writes into its output folder: only these are replaced when it is used again
OUTPUT = OutputKind("kestrel eval", (
    RUN_FILE, RECORDINGS, WINDOWS, REPLAY, REPORT_JSON, REPORT_MD, REPORT_PNG,
))
TEMPLATES = ("AnalystAgent_Trend_v1", "TraderAgent_Default_v1")
RUN_VERSION = 1


@dataclass(frozen=True, slots=True)
class EvalWindow:
    """A stretch of market the agents decide on: ``bars`` candles from ``start`` (ISO, UTC) of
    ``file`` (a bundled data file's name, or a path). The candles before it are the warm-up."""

    name: str
    file: str
    start: str
    bars: int

    def path(self) -> Path:
        bundled = resource_path("sample_data", self.file)
        return bundled if bundled.is_file() else Path(self.file)


BTC_USDT_1H = "BTC-USDT_1h_20190930-20191024_unknown.csv"
# a fall, a rise and a range of the bundled BTC/USDT hourly data, two days each
STANDARD_WINDOWS = (
    EvalWindow("falling", BTC_USDT_1H, "2019-10-04T19:00:00Z", 48),
    EvalWindow("rising", BTC_USDT_1H, "2019-10-06T19:00:00Z", 48),
    EvalWindow("range", BTC_USDT_1H, "2019-10-12T19:00:00Z", 48),
)


@dataclass
class EvalOptions:
    """What to evaluate and where.

    Attributes:
        subject: the model under evaluation (provider kind, model, server, key entry, timeout,
            retries, the server's context and the tokens kept per answer, the tool transport);
            ``provider="rule-engine"`` evaluates the rule engine itself.
        replay_from: a recorded run's folder: answer from its recordings instead of the model.
        progress: ``(done, total, label)`` as bars are run, for a progress bar.
        secrets: where the API key is read (tests give their own).
        concurrency: how many windows run at once; ``None``: the provider's default
            (``eval_concurrency``). The report is the same however many.
    """

    subject: LLMSettings
    out_dir: Path
    windows: Sequence[EvalWindow] = STANDARD_WINDOWS
    templates: Sequence[str] = TEMPLATES
    cash: Decimal = Decimal(10_000)
    replay_from: Path | None = None
    progress: Callable[[int, int, str], None] | None = None
    secrets: SecretStore | None = None
    blind: bool = False
    concurrency: int | None = None


class EvalStopped(OperationalError):
    """The model could not be evaluated (an agent faulted: unreachable server, refused key...;
    or, ``baseline``, one of the rule engine's agents the model is compared with faulted); the
    windows that ran are in ``report``."""

    def __init__(self, message: str, report: EvalReport | None, *,
                 baseline: bool = False) -> None:
        super().__init__(message)
        self.report = report
        self.baseline = baseline


@dataclass
class _Plan:
    """What a run was asked, as ``run.json`` keeps it for the replay."""

    subject: dict[str, Any]
    windows: list[dict[str, Any]]
    templates: list[str]
    cash: str
    blind: bool = False
    version: int = RUN_VERSION


def check_subject(subject: LLMSettings) -> None:
    """Refuse, in words, a subject that names no model to evaluate."""
    if subject.provider in ("", "template"):
        raise OperationalError(
            "no model to evaluate: give --provider (openai-compatible, anthropic or rule-engine) "
            "and --model, or set [llm] provider and model in the workspace's settings.toml")
    if subject.provider != RULE_ENGINE and not subject.model:
        raise OperationalError(f"no model named for the {subject.provider} provider: give "
                               "--model or set [llm] model in settings.toml")


def load_plan(run_dir: Path) -> EvalOptions:
    """The options of the recorded run in ``run_dir``, to replay it.

    Raises:
        OperationalError: the folder holds no readable recorded run.
    """
    path = run_dir / RUN_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        plan = _Plan(**raw)
        subject = LLMSettings(**plan.subject)
        windows = [EvalWindow(**w) for w in plan.windows]
    except OSError as exc:
        raise OperationalError(f"{run_dir} holds no recorded eval run ({RUN_FILE}: "
                               f"{exc.strerror or exc})") from exc
    except (ValueError, TypeError) as exc:
        raise OperationalError(f"{path} is not a recorded eval run: {exc}") from exc
    return EvalOptions(subject=subject, out_dir=run_dir / REPLAY, windows=windows,
                       templates=plan.templates, cash=Decimal(plan.cash), replay_from=run_dir,
                       blind=plan.blind)


def _write_plan(options: EvalOptions) -> None:
    subject = options.subject.model_dump(
        include={"provider", "model", "base_url", "api_key_name", "training_cutoff",
                 "context_tokens", "max_output_tokens", "tool_transport"})
    plan = _Plan(subject, [asdict(w) for w in options.windows], list(options.templates),
                 str(options.cash), options.blind)
    (options.out_dir / RUN_FILE).write_text(json.dumps(asdict(plan), indent=2) + "\n",
                                            encoding="utf-8")


def _start_index(window: EvalWindow) -> int:
    """The candle of the file where the window starts (the ones before are its warm-up)."""
    loaded = load_csv(window.path(), allow_gaps=False)
    times = loaded.series.timestamp_ms
    index = int(np.searchsorted(times, parse_time(window.start)))
    if index >= times.size or index + window.bars >= times.size:
        raise OperationalError(
            f"window {window.name!r}: {window.file} has no {window.bars} candles from "
            f"{window.start}")
    if index < 60:
        raise OperationalError(
            f"window {window.name!r} starts {index} candles into {window.file}; the agents "
            "need 60 before it to warm up")
    return index


def _subject_provider(options: EvalOptions, recording: Path) -> LLMProvider:
    """The model under evaluation, every answer recorded; or the recording, when replaying."""
    if options.replay_from is not None:
        return ReplayProvider(options.replay_from / RECORDINGS / recording.name)
    subject = options.subject
    if subject.provider == RULE_ENGINE:
        inner: LLMProvider = RuleEngineProvider()
    else:
        secrets = options.secrets or SecretStore()
        key = secrets.get(subject.api_key_name) if subject.api_key_name else None
        inner = build_provider(
            subject.provider, model=subject.model, base_url=subject.base_url or None,
            api_key=key, timeout_s=subject.timeout_s, max_retries=subject.max_retries,
            stream=False, share_limits=True,  # the windows side by side pace their calls as one
        )
    recording.unlink(missing_ok=True)
    return RecordingProvider(inner, recording)


async def run_eval(options: EvalOptions) -> EvalReport:
    """Run every window on the model and on the rule engine; write the report into ``out_dir``.

    ``out_dir`` is created, or reused only when empty or made by ``kestrel eval`` before
    (``app.runtime.output_folder``); only what a run writes is replaced there.

    Windows run side by side, up to ``eval_concurrency(options)`` at once (each its own
    workspace and recording, the model's calls paced together: ``build_provider``'s shared
    limits), and what comes out is what running them one after another gives: the report lists
    them in their order, and a window that faults or fails stops the eval where a run one after
    another would have stopped. The windows before it finish and are reported; the ones after it
    are stopped, and what they left is removed, as they would never have started.

    Raises:
        OperationalError: no model named, a window the data cannot hold, a replay folder
            without a recorded run.
        OutputFolderRefused: ``out_dir`` is a workspace, another command's output, holds other
            files, or would replace the recording being replayed; nothing was changed.
        EvalStopped: an agent faulted on the model (or on the rule engine, the baseline); the
            report of the windows before is written, saying STOPPED and why (and the
            training-cutoff warning, which concerns the whole period asked for).
        PermanentLLMError: the provider cannot be built (unknown kind, missing key).
    """
    check_subject(options.subject)
    starts = [_start_index(w) for w in options.windows]
    out = options.out_dir
    _refuse_replaying_into_itself(options)
    prepare_output_folder(out, OUTPUT)
    (out / RECORDINGS).mkdir(exist_ok=True)
    _write_plan(options)
    # the period the eval covers starts with its first window, whether or not that one is done
    period_start = min((w.start for w in options.windows), key=parse_time, default=None)
    windows = list(options.windows)
    progress = _Progress(options.progress, 2 * sum(w.bars for w in windows))
    outcomes: list[_Outcome | None] = [None] * len(windows)
    gate = asyncio.Semaphore(eval_concurrency(options))
    tasks: list[asyncio.Task[None]] = []

    def stopped_before(number: int) -> bool:
        return any(o is not None and o.stops for o in outcomes[:number])

    async def evaluate(number: int) -> None:
        async with gate:
            if stopped_before(number):  # run one after another, it would never have started
                return
            try:
                outcome = await _evaluate_window(
                    options, windows[number], starts[number], number, progress)
            except Exception as exc:  # noqa: BLE001 - raised below, in window order
                outcome = _Outcome(error=exc)
            outcomes[number] = outcome
            if outcome.stops:  # the windows after it would never have started: stop them
                for later in tasks[number + 1:]:
                    later.cancel()

    async with asyncio.TaskGroup() as group:
        tasks.extend(group.create_task(evaluate(n)) for n in range(len(windows)))
    runs: list[WindowRun] = []
    for number, outcome in enumerate(outcomes):
        if outcome is None or not outcome.stops:
            assert outcome is not None and outcome.run is not None
            runs.append(outcome.run)
            continue
        _forget_windows_after(options, windows, number)
        if outcome.error is not None:
            raise outcome.error
        report = build_report(options.subject, runs, blind=options.blind,
                              period_start=period_start, stopped=outcome.fault)
        report.write(out)
        raise EvalStopped(outcome.fault, report, baseline=outcome.baseline)
    report = build_report(options.subject, runs, blind=options.blind, period_start=period_start)
    report.write(out)
    return report


def eval_concurrency(options: EvalOptions) -> int:
    """How many windows run at once: ``options.concurrency``, else the provider's default (a
    local server 2, a hosted API 4, the rule engine and a replay every window), never more than
    there are windows."""
    windows = max(1, len(options.windows))
    wanted = options.concurrency
    if wanted is None:
        subject = options.subject
        kind = "replay" if options.replay_from is not None else subject.provider
        wanted = default_concurrency(kind, subject.base_url or None)
    return max(1, min(wanted or windows, windows))


@dataclass
class _Outcome:
    """How one window ended: its two runs; or the fault of the model's agents (the eval stops
    there, reported); or the error that stopped it (the eval stops there, raised)."""

    run: WindowRun | None = None
    fault: str = ""
    error: Exception | None = None
    baseline: bool = False  # the fault was the rule engine's: nothing to compare the model with

    @property
    def stops(self) -> bool:
        return bool(self.fault) or self.error is not None


class _Progress:
    """The bars run of every window, added up, for ``EvalOptions.progress``: windows running
    side by side each report their own bars."""

    def __init__(self, report: Callable[[int, int, str], None] | None, total: int) -> None:
        self.report = report
        self.total = total
        self.done: dict[tuple[int, bool], int] = {}

    def update(self, number: int, subject: bool, bars: int, label: str) -> None:
        self.done[number, subject] = bars
        if self.report is not None:
            self.report(sum(self.done.values()), self.total, label)


async def _evaluate_window(
    options: EvalOptions, window: EvalWindow, start: int, number: int, progress: _Progress,
) -> _Outcome:
    """One window: the model's run, then (unless its agents faulted) the rule engine's."""
    out = options.out_dir
    recording = out / RECORDINGS / _recording_name(number)
    label = f"window {number + 1}/{len(options.windows)} {window.name}"
    model_run = await _run_window(options, window, start, number, recording, progress,
                                  f"{label}: model", subject=True)
    if model_run.faults:
        fault = model_run.faults[0]
        return _Outcome(fault=(f"{fault.name} faulted in window {window.name!r}: {fault.reason}. "
                               f"What to do: {what_to_do(fault.reason)}"))
    baseline = await _run_window(options, window, start, number, recording, progress,
                                 f"{label}: rule engine", subject=False)
    if baseline.faults:  # nothing to compare the model with: the eval cannot go on
        fault = baseline.faults[0]
        return _Outcome(fault=(f"the rule-engine baseline's {fault.name} faulted in window "
                               f"{window.name!r}: {fault.reason}"), baseline=True)
    folder = _folder(options, window, number)
    return _Outcome(WindowRun(
        window.name, window.start, model_run, folder / "model", baseline,
        folder / "rule_engine",
        recording if options.replay_from is None
        else options.replay_from / RECORDINGS / recording.name,
    ))


def _recording_name(number: int) -> str:
    return f"window-{number + 1}.jsonl"


def _forget_windows_after(options: EvalOptions, windows: Sequence[EvalWindow], stop: int) -> None:
    """Remove what the windows after ``stop`` left (run, or stopped part-way, side by side with
    it): run one after another, the eval would never have started them."""
    for number in range(stop + 1, len(windows)):
        shutil.rmtree(_folder(options, windows[number], number), ignore_errors=True)
        if options.replay_from is None:
            (options.out_dir / RECORDINGS / _recording_name(number)).unlink(missing_ok=True)


def _refuse_replaying_into_itself(options: EvalOptions) -> None:
    """A replay writing into the run it replays would replace the recordings it reads."""
    given = options.replay_from
    if given is None:
        return
    out, source = options.out_dir.resolve(), given.resolve()
    if source == out or source.is_relative_to(out):
        raise OutputFolderRefused(
            f"the output folder {options.out_dir} holds the recorded run {given} "
            f"being replayed, which writing there would replace; nothing was changed. Leave out "
            f"--out (the replay goes to {given / REPLAY}) or give another folder")


def _folder(options: EvalOptions, window: EvalWindow, number: int) -> Path:
    return options.out_dir / WINDOWS / f"{number + 1}-{window.name}"


async def _run_window(
    options: EvalOptions, window: EvalWindow, start: int, number: int, recording: Path,
    bars_run: _Progress, label: str, *, subject: bool,
) -> AgentBacktestResult:
    provider = _subject_provider(options, recording) if subject else None

    def override(_info: AgentInfo, _template: AgentTemplate) -> LLMProvider | None:
        return provider

    def progress(bars: int, _of: int) -> None:
        bars_run.update(number, subject, bars, label)

    llm = RULE_ENGINE_BASELINE
    if subject and options.subject.provider != RULE_ENGINE:
        llm = options.subject.model_copy(update={"stream": False})
    folder = _folder(options, window, number)
    run_options = AgentBacktestOptions(
        templates=list(options.templates), cash=options.cash, warmup_bars=start,
        bars=window.bars, seed=f"kestrel-eval-{number + 1}",
        provider_override=override if subject else None, llm=llm, progress=progress,
        blind=options.blind and subject,
    )
    try:
        return await run_agent_backtest([window.path()], run_options,
                                        folder / ("model" if subject else "rule_engine"))
    finally:
        if provider is not None:
            await provider.aclose()

