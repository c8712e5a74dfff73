"""``kestrel eval``: a model measured as Analyst and Trader, recorded, and replayed exactly offline.

The model is a scripted one behind the fake OpenAI-compatible and Anthropic servers (real HTTP on
127.0.0.1 through the real SDKs) that reads only what it is sent and now and then answers with a
malformed call, so the report has refused answers to count. Models that fail the eval (declining
every task, looping until the step limit, answering without doing the task's work, or a server
that faults part-way) are scored as what they are, never as decisions. Small windows keep each
run to seconds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from app.config import LLMSettings
from app.runtime.evaluation import STANDARD_WINDOWS, EvalOptions, run_eval
from tests.helpers.cli import run_main
from tests.helpers.fake_llm_servers import (
    REFUSAL_TEXT,
    FakeAnthropicServer,
    FakeOpenAIServer,
    FaultFrom,
    Reply,
    error,
    looping,
    refusal,
)
from tests.helpers.prompt_rule_model import PromptRuleModel

SMALL = ["--windows", "1", "--bars", "4", "--no-progress", "--max-retries", "0"]


def _report(run: Path) -> dict:
    return json.loads((run / "eval.json").read_text(encoding="utf-8"))


def test_the_rule_engine_agrees_with_itself_on_every_bar(tmp_path: Path) -> None:
    window = STANDARD_WINDOWS[0]
    options = EvalOptions(
        subject=LLMSettings(provider="rule-engine"), out_dir=tmp_path / "run",
        windows=[type(window)(window.name, window.file, window.start, 8)],
    )
    report = asyncio.run(run_eval(options))
    total = report.data["total"]["figures"]
    assert total["agreement_pct"] == 100.0
    assert total["analyst_agreement_pct"] == total["trader_agreement_pct"] == 100.0
    assert total["valid_call_rate_pct"] == 100.0 and total["refusals_by_code"] == {}
    assert total["decisions"] >= 8 and total["model_calls"] > total["decisions"]
    assert total["decisions"] == total["tasks"] and total["decision_rate_pct"] == 100.0
    assert total["refusals"] == total["step_limit_stops"] == total["incomplete_tasks"] == 0
    assert report.data["warnings"] == []  # the rule engine remembers nothing
    for name in ("eval.json", "eval.md", "eval.png"):
        assert (tmp_path / "run" / name).stat().st_size > 0


def _recorded_run_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider_args: list[str],
    model: PromptRuleModel,
) -> dict:
    run, again = tmp_path / "run", tmp_path / "again"
    code = run_main(["eval", "--workspace", str(tmp_path / "ws"), "--out", str(run),
                 *provider_args, *SMALL])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Answers the toolset refused, by error code" in out.out
    assert model.calls > 0 and model.malformed > 0
    report = _report(run)
    total = report["total"]["figures"]
    assert total["model_calls"] == model.calls
    assert 0 < total["valid_call_rate_pct"] < 100.0
    assert sum(total["refusals_by_code"].values()) >= model.malformed
    assert total["tokens_in"] > 0 and total["calls_per_decision"] > 1
    assert total["prompts_cut"] == 0  # Kestrel and the server count the same prompts
    # the scripted model decides as the rule engine does: its decisions match bar by bar, and
    # every task it finished is a decision (its malformed answers are refused, then corrected)
    assert total["agreement_pct"] == 100.0
    assert total["decisions"] == total["tasks"] > 0 and total["decision_rate_pct"] == 100.0
    assert total["refusals"] == total["step_limit_stops"] == total["incomplete_tasks"] == 0
    assert report["stopped"] is None
    code = run_main(["eval", "--replay", str(run), "--out", str(again), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert (again / "eval.json").read_bytes() == (run / "eval.json").read_bytes()
    assert (again / "eval.md").read_bytes() == (run / "eval.md").read_bytes()
    return report


def test_a_recorded_openai_compatible_run_replays_to_the_identical_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = PromptRuleModel(malformed_every=4)
    with FakeOpenAIServer(default=model) as server:
        provider = ["--provider", "openai-compatible", "--base-url", server.base_url,
                    "--model", "llama3.1:8b"]
        report = _recorded_run_replays(tmp_path, capsys, provider, model)
    calls = model.calls
    assert report["subject"]["model"] == "llama3.1:8b"
    # October 2019 lies before Llama 3.1's training cutoff (December 2023)
    assert report["before_training_cutoff"] and "training cutoff" in report["warnings"][0]
    assert model.calls == calls  # the replay called no model


def test_a_recorded_anthropic_run_replays_to_the_identical_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KESTREL_EVAL_ANTHROPIC", "sk-ant-test-key")
    model = PromptRuleModel(malformed_every=3)
    with FakeAnthropicServer(api_key="sk-ant-test-key", default=model) as server:
        provider = ["--provider", "anthropic", "--base-url", server.root_url,
                    "--model", "house-model-7", "--api-key-name", "eval_anthropic"]
        report = _recorded_run_replays(tmp_path, capsys, provider, model)
    # a model of unknown cutoff is not flagged as before it, and the report says it is unknown
    assert not report["before_training_cutoff"]
    (note,) = report["warnings"]
    assert note.startswith("Kestrel does not know house-model-7's training cutoff")


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_a_model_calling_tools_natively_is_measured_per_transport_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    vendor: str,
) -> None:
    monkeypatch.setenv("KESTREL_EVAL_ANTHROPIC", "sk-ant-test-key")
    model = PromptRuleModel(malformed_every=1, native=True)
    fake = FakeOpenAIServer if vendor == "openai" else FakeAnthropicServer
    with fake(default=model) as server:
        provider = (["--provider", "openai-compatible", "--base-url", server.base_url]
                    if vendor == "openai" else
                    ["--provider", "anthropic", "--base-url", server.root_url,
                     "--api-key-name", "eval_anthropic"])
        report = _recorded_run_replays(
            tmp_path, capsys, [*provider, "--model", "house-model-7", "--tool-transport", "native"],
            model)
    assert model.native_calls > 0
    assert report["subject"]["tool_transport"] == "native"
    transports = report["total"]["figures"]["transports"]
    assert set(transports) == {"native"}, transports  # every call went natively
    assert transports["native"]["calls"] > 0
    assert 0 < transports["native"]["valid_call_rate_pct"] < 100.0  # the spoilt ones refused
    table = (tmp_path / "run" / "eval.md").read_text(encoding="utf-8")
    assert "Tool transport: native (native calls " in table


def test_answers_cut_at_the_token_limit_are_counted_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = PromptRuleModel()
    answered: list[int] = []

    def cut_every_third(body: dict) -> Any:
        answered.append(1)
        answer = model(body)
        if len(answered) % 3 == 0 and "Your answer was cut" not in json.dumps(body["messages"]):
            return Reply(text=str(answer)[:20], finish_reason="length")
        return answer

    with FakeOpenAIServer(default=cut_every_third) as server:
        code = run_main(["eval", "--workspace", str(tmp_path / "ws"), "--out",
                         str(tmp_path / "run"), "--provider", "openai-compatible", "--base-url",
                         server.base_url, "--model", "m", "--tool-transport", "xml", *SMALL])
    out = capsys.readouterr().out
    assert code == 0
    total = _report(tmp_path / "run")["total"]["figures"]
    assert total["cut_answers"] > 0
    assert total["refusals_by_code"]["ANSWER_CUT"] == total["cut_answers"]
    assert f"{total['cut_answers']} answer(s) cut at the token limit" in out
    (summary,) = (tmp_path / "run" / "windows").glob("*/model/summary.json")
    stats = json.loads(summary.read_text(encoding="utf-8"))["stats"]
    assert stats["cut_answers"] == total["cut_answers"]  # the backtest's usage says it too


def test_without_a_configured_model_eval_says_what_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_main(["eval", "--workspace", str(tmp_path / "ws"), "--out", str(tmp_path / "run"),
                 *SMALL])
    err = capsys.readouterr().err
    assert code == 2
    assert "no model to evaluate" in err and "--provider" in err and "Traceback" not in err


def test_an_unreachable_server_ends_eval_with_the_reason_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer() as server:
        url = server.base_url  # the port is free again once the server is closed
    code = run_main(["eval", "--workspace", str(tmp_path / "ws"), "--out", str(tmp_path / "run"),
                 "--provider", "openai-compatible", "--base-url", url, "--model", "m",
                 "--timeout", "5", *SMALL])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "could not be evaluated" in err and "What to do" in err
    assert "Traceback" not in err


def test_a_context_that_leaves_no_room_for_the_prompt_is_refused_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_main(["eval", "--workspace", str(tmp_path / "ws"), "--out", str(tmp_path / "run"),
                     "--provider", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1",
                     "--model", "m", "--context-tokens", "8192", "--max-output-tokens", "8000",
                     *SMALL])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip() == ("kestrel eval: --max-output-tokens: must leave at least 1,024 of the "
                           "8,192 context tokens for the prompt (at most 7,168)")


def test_replaying_a_folder_without_a_recorded_run_is_refused_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_main(["eval", "--replay", str(tmp_path / "nothing"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "holds no recorded eval run" in err


def test_a_missing_api_key_is_named_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KESTREL_NO_SUCH_KEY", raising=False)
    code = run_main(["eval", "--workspace", str(tmp_path / "ws"), "--out", str(tmp_path / "run"),
                 "--provider", "anthropic", "--model", "claude-3-5-sonnet-latest",
                 "--api-key-name", "no_such_key", *SMALL])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    # what to do, whichever way the keyring answers here: empty, or locked
    assert "no API key for Anthropic" in err or "KESTREL_NO_SUCH_KEY" in err


def _eval(tmp_path: Path, server_args: list[str], *extra: str) -> tuple[int, dict, str]:
    """Run ``kestrel eval`` in this process: its exit code, eval.json and eval.md."""
    run = tmp_path / "run"
    code = run_main(["eval", "--workspace", str(tmp_path / "ws"), "--out", str(run),
                     *server_args, *SMALL, *extra])
    return code, _report(run), (run / "eval.md").read_text(encoding="utf-8")


def test_a_model_that_declines_every_task_scores_no_decisions_not_full_marks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAIServer(default=refusal(REFUSAL_TEXT)) as server:
        code, report, markdown = _eval(tmp_path, [
            "--provider", "openai-compatible", "--base-url", server.base_url,
            "--model", "gpt-4o-mini"])
    out = capsys.readouterr().out
    assert code == 0
    total = report["total"]["figures"]
    assert total["tasks"] == 4 and total["refusals"] == 4  # one analysis per bar, each declined
    assert total["decisions"] == 0 and total["decision_rate_pct"] == 0.0
    assert total["valid_call_rate_pct"] == 0.0  # a refusal is no valid answer to a task
    assert total["calls_per_decision"] is None  # no decision to divide by
    # the rule engine holds on these bars; a refusal is not a HOLD that agrees with it
    assert total["bars"] == 4 and total["agreement_pct"] == 0.0
    assert total["analyst_agreement_pct"] == total["trader_agreement_pct"] == 0.0
    assert "4 refusals" in out and "4 refusals" in markdown
    assert report["windows"][0]["disagreements"][0]["model"][0] == "no decision: refusal"


def test_an_anthropic_refusal_stop_reason_ends_the_task_at_once_and_counts_as_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KESTREL_EVAL_ANTHROPIC", "sk-ant-test-key")
    declined = refusal("", stop_reason=True)  # such an answer often carries no text at all
    with FakeAnthropicServer(api_key="sk-ant-test-key", default=declined) as server:
        code, report, _ = _eval(tmp_path, [
            "--provider", "anthropic", "--base-url", server.root_url, "--model",
            "claude-sonnet-4-20250514", "--api-key-name", "eval_anthropic"])
        calls = len(server.bodies)
    assert code == 0
    total = report["total"]["figures"]
    assert total["refusals"] == total["refusals_by_provider"] == total["tasks"] == 4
    assert total["decisions"] == 0 and total["step_limit_stops"] == 0
    # each task asked once: a declined answer is not asked again until the step limit
    assert calls == total["model_calls"] == 4


def test_tasks_stopped_by_the_step_limit_are_counted_apart_from_decisions(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer(default=looping()) as server:
        code, report, markdown = _eval(tmp_path, [
            "--provider", "openai-compatible", "--base-url", server.base_url,
            "--model", "gpt-4o-mini"])
    assert code == 0
    total = report["total"]["figures"]
    assert total["step_limit_stops"] == total["tasks"] == 4
    assert total["decisions"] == total["refusals"] == 0
    assert total["model_calls"] == 4 * 20  # the Trend Analyst's step limit, per task
    assert total["valid_call_rate_pct"] == 0.0 and total["agreement_pct"] == 0.0
    assert "4 stopped at the step limit" in markdown


def test_an_analysis_that_never_writes_its_analysis_or_assessment_is_no_decision(
    tmp_path: Path,
) -> None:
    answer = "BTC/USDT 1h: HOLD (confidence 0.30), not dispatched."  # a decision, in words only
    with FakeOpenAIServer(default=answer) as server:
        code, report, markdown = _eval(tmp_path, [
            "--provider", "openai-compatible", "--base-url", server.base_url,
            "--model", "gpt-4o-mini"])
    assert code == 0
    total = report["total"]["figures"]
    assert total["incomplete_tasks"] == total["tasks"] == 4 and total["decisions"] == 0
    assert total["missing_actions"] == {
        "analysis in analysis_log.md": 4, "current_market_assessment.yaml rewritten": 4}
    assert total["agreement_pct"] == 0.0
    assert "4 without their required actions" in markdown


def test_a_fault_mid_eval_writes_stopped_with_the_reason_in_both_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the second window's tasks are the first to mention its day: the key is revoked there, for
    # every call after it (one window at a time: side by side, the first window's later calls
    # would be refused too, and it would be the one that faulted)
    model = FaultFrom(PromptRuleModel(), "2019-10-06", error(401, "The API key was revoked."))
    with FakeOpenAIServer(default=model) as server:
        code, report, markdown = _eval(tmp_path, [
            "--provider", "openai-compatible", "--base-url", server.base_url,
            "--model", "gpt-4o-mini"], "--windows", "2", "--concurrency", "1")
    printed = capsys.readouterr()
    assert code == 3 and model.faulted
    assert [w["name"] for w in report["windows"]] == ["falling"]  # the window before the fault
    stopped = report["stopped"]
    assert "faulted in window 'rising'" in stopped
    assert "The API key was revoked" in stopped and "What to do" in stopped
    assert markdown.splitlines()[2] == f"> **STOPPED: {stopped}**"
    assert f"STOPPED: {stopped}" in printed.out and "could not be evaluated" in printed.err
    # gpt-4o-mini's training data covers 2019: the run is flagged in both files all the same
    assert report["before_training_cutoff"] and "training cutoff" in report["warnings"][0]
    assert f"> WARNING: {report['warnings'][0]}" in markdown


def test_an_eval_that_faults_in_its_first_window_still_says_stopped_and_warns(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer(default=error(401, "Invalid API key.")) as server:
        code, report, markdown = _eval(tmp_path, [
            "--provider", "openai-compatible", "--base-url", server.base_url,
            "--model", "gpt-4o-mini"])
    assert code == 3
    assert report["windows"] == [] and "Invalid API key" in report["stopped"]
    assert report["before_training_cutoff"] and "2019-10-04" in report["warnings"][0]
    assert "STOPPED: " in markdown and "> WARNING: This period starts 2019-10-04" in markdown


def test_an_alias_the_server_answers_as_a_dated_model_is_checked_under_that_name(
    tmp_path: Path,
) -> None:
    model = PromptRuleModel()

    def dated(body: dict) -> Reply:  # a proxy's alias, served by a dated OpenAI model
        return Reply(text=model(body), model="gpt-4o-mini-2024-07-18")

    with FakeOpenAIServer(default=dated) as server:
        code, report, markdown = _eval(tmp_path, [
            "--provider", "openai-compatible", "--base-url", server.base_url,
            "--model", "house-default"])
    assert code == 0
    assert report["subject"]["model"] == "house-default"
    assert report["subject"]["answered_as"] == ["gpt-4o-mini-2024-07-18"]
    (warning,) = report["warnings"]
    assert report["before_training_cutoff"]
    assert "before gpt-4o-mini-2024-07-18's training cutoff (2023-10-31" in warning
    assert f"> WARNING: {warning}" in markdown


def test_a_rule_engine_baseline_that_faults_stops_the_eval_with_a_failing_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.agents.llm.port import PermanentLLMError
    from app.agents.rules.engine import NAME, RuleEngineProvider

    async def broken(_self: Any, _request: Any, _on_delta: Any = None) -> Any:
        raise PermanentLLMError(NAME, "the policy table is damaged")

    # the model answers from the fake server; only the rule engine it is compared with breaks
    monkeypatch.setattr(RuleEngineProvider, "complete", broken)
    with FakeOpenAIServer(default=PromptRuleModel()) as server:
        code, report, markdown = _eval(tmp_path, [
            "--provider", "openai-compatible", "--base-url", server.base_url,
            "--model", "gpt-4o-mini"])
    printed = capsys.readouterr()
    assert code == 3, printed.err
    stopped = report["stopped"]
    assert "rule-engine baseline" in stopped and "the policy table is damaged" in stopped
    assert report["windows"] == []  # no window has a baseline to compare with
    assert f"> **STOPPED: {stopped}**" in markdown
    assert "the rule engine the model is compared with could not run" in printed.err


def test_an_eval_that_cannot_read_the_bundled_price_table_fails_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.agents import costs

    missing = tmp_path / "resources" / "prices.yaml"  # as in a bundle built without it
    monkeypatch.setattr(costs, "resource_path", lambda *_parts: missing)
    code = run_main(["eval", "--provider", "rule-engine", "--out", str(tmp_path / "run"),
                     *SMALL])
    err = capsys.readouterr().err
    assert code != 0 and code == 2, err
    assert f"{missing}: cannot read the price file" in err and "Traceback" not in err
