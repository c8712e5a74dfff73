"""``kestrel eval`` runs its windows side by side and reports exactly what one after another does.

The model is ``PromptRuleModel`` behind the fake OpenAI-compatible server (real HTTP, the real
SDK), which answers each call only after a fixed latency, as a model that thinks, so calls of
windows running side by side overlap at the server. What is checked is behaviour the server sees,
never how long a run took (that is ``tests/benchmarks/bench_eval_concurrency.py``): how many calls
were under way at once; which calls arrived while a Retry-After given to one window lasted; and
that the reports of a run side by side and one after another are the same, figure for figure
(latency, a wall-clock figure, apart).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.config import LLMSettings
from app.runtime.eval_report import EvalReport
from app.runtime.evaluation import STANDARD_WINDOWS, EvalOptions, EvalStopped, run_eval
from tests.helpers.fake_llm_servers import FakeOpenAIServer, Reply, error
from tests.helpers.prompt_rule_model import PromptRuleModel

BARS = 3
WALL_TIME = {"latency_ms_mean", "latency_ms_p95"}
_AGENT_ID = re.compile(r"Your agent id: `([^`]+)`")


def _options(out: Path, server: FakeOpenAIServer, concurrency: int, retries: int = 0
             ) -> EvalOptions:
    subject = LLMSettings(provider="openai-compatible", base_url=server.base_url,
                          model="gpt-4o-mini", max_retries=retries)
    return EvalOptions(subject=subject, out_dir=out, concurrency=concurrency,
                       windows=[replace(w, bars=BARS) for w in STANDARD_WINDOWS])


def _figures(report: Any) -> Any:
    """A report's data without its wall-clock figures (latency per call)."""
    if isinstance(report, dict):
        return {k: _figures(v) for k, v in report.items() if k not in WALL_TIME}
    if isinstance(report, list):
        return [_figures(v) for v in report]
    return report


def _eval(out: Path, server: FakeOpenAIServer, concurrency: int, retries: int = 0
          ) -> tuple[EvalReport | None, dict[str, Any]]:
    try:
        report: EvalReport | None = asyncio.run(
            run_eval(_options(out, server, concurrency, retries)))
    except EvalStopped as stopped:
        report = stopped.report
    return report, json.loads((out / "eval.json").read_text(encoding="utf-8"))


def _agent(body: dict[str, Any]) -> str:
    found = _AGENT_ID.search(json.dumps(body["messages"][0]["content"]))
    assert found is not None, "no agent id in the system prompt"
    return found.group(1)


def _window(body: dict[str, Any]) -> str:
    """The window a call belongs to: the latest day its conversation mentions (each window's
    bars, and the candles its agents are shown, lie in days no other window's do)."""
    days = re.findall(r"2019-10-(\d\d)T", json.dumps(body["messages"][1:]))
    assert days, "a call that mentions no day"
    return {"04": "falling", "06": "rising", "12": "range"}[max(days)]


def _most_windows_at_once(server: FakeOpenAIServer) -> int:
    """The most windows that had a call under way at the server at the same moment (the agents
    of one window can have two: the analyst going on while the trader takes its signal)."""
    under_way: Counter[str] = Counter()
    most = 0
    bodies = server.bodies
    for event in server.events:
        window = _window(bodies[event.index])
        under_way[window] += 1 if event.kind == "arrived" else -1
        most = max(most, sum(1 for count in under_way.values() if count > 0))
    return most


def test_windows_side_by_side_overlap_their_calls_and_report_what_one_after_another_does(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer(default=PromptRuleModel(), latency_s=0.2) as server:
        _, one_after_another = _eval(tmp_path / "sequential", server, concurrency=1)
        windows_one_after_another = _most_windows_at_once(server)
        server.events.clear()
        _, side_by_side = _eval(tmp_path / "concurrent", server, concurrency=3)
        windows_side_by_side = _most_windows_at_once(server)
    assert windows_one_after_another == 1  # never two windows' calls under way at once
    assert windows_side_by_side >= 2  # the windows' calls were at the server at the same time
    assert [w["name"] for w in side_by_side["windows"]] == ["falling", "rising", "range"]
    assert side_by_side["total"]["figures"]["model_calls"] > 3 * BARS
    assert _figures(side_by_side) == _figures(one_after_another)


class ThrottleOnce:
    """Answers as ``model``, except one call, made once three agents have called: HTTP 429 with
    Retry-After ``retry_after_s``. Which agent made each call is read from its system prompt."""

    def __init__(self, model: PromptRuleModel, retry_after_s: float) -> None:
        self.model = model
        self.retry_after_s = retry_after_s
        self.seen: set[str] = set()
        self.throttled = ""
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | Reply:
        agent = _agent(body)
        with self._lock:
            self.seen.add(agent)
            if not self.throttled and len(self.seen) >= 3:
                self.throttled = agent
                return error(429, "Rate limit reached for requests.",
                             retry_after_s=self.retry_after_s)
        return self.model(body)


def test_a_retry_after_given_to_one_window_holds_every_windows_next_call(tmp_path: Path) -> None:
    hold_s = 3.0
    throttle = ThrottleOnce(PromptRuleModel(), retry_after_s=hold_s)
    with FakeOpenAIServer(default=throttle, latency_s=0.5) as server:
        _, report = _eval(tmp_path / "run", server, concurrency=3, retries=2)
        events, bodies = list(server.events), server.bodies
    assert report["stopped"] is None and throttle.throttled
    (refused,) = [e for e in events if e.kind == "answered" and e.status == 429]
    held_until = refused.at_s + hold_s
    arrivals = [(e.at_s, _agent(bodies[e.index])) for e in events if e.kind == "arrived"]
    during = Counter(agent for at, agent in arrivals if refused.at_s < at < held_until)
    # each agent calls one at a time, so while the hold lasted the server saw from each at most
    # the one call it had already sent when the 429 came back; the throttled one's retry waited
    assert all(count <= 1 for count in during.values()), during
    assert throttle.throttled not in during
    before = {agent for at, agent in arrivals if at < refused.at_s}
    after = {agent for at, agent in arrivals if at >= held_until}
    others = before - {throttle.throttled}
    assert len(others) >= 2 and others & after, "the other windows were calling, then resumed"
    assert throttle.throttled in after  # its retry came once the hold had passed


def test_a_fault_in_one_window_stops_the_eval_where_one_after_another_would(
    tmp_path: Path,
) -> None:
    model = PromptRuleModel()

    def refused_in_rising(body: dict[str, Any]) -> str | Reply:
        # only the second window's tasks mention its day; the others are answered all along
        if "2019-10-06" in json.dumps(body):
            return error(401, "The API key was revoked.")
        return model(body)

    with FakeOpenAIServer(default=refused_in_rising, latency_s=0.1) as server:
        _, one_after_another = _eval(tmp_path / "sequential", server, concurrency=1)
        _, side_by_side = _eval(tmp_path / "concurrent", server, concurrency=3)
    assert [w["name"] for w in side_by_side["windows"]] == ["falling"]
    assert "faulted in window 'rising'" in side_by_side["stopped"]
    assert _figures(side_by_side) == _figures(one_after_another)
    # the window after the fault, started side by side, left nothing: as if it never ran
    def left(run: str, folder: str) -> list[str]:
        return sorted(p.name for p in (tmp_path / run / folder).iterdir())

    assert left("concurrent", "windows") == left("sequential", "windows") == [
        "1-falling", "2-rising"]
    assert left("concurrent", "recordings") == left("sequential", "recordings")
    assert "window-3.jsonl" not in left("concurrent", "recordings")
