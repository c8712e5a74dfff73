"""``kestrel eval``: a model measured as Analyst and Trader, recorded, and replayed exactly offline.

The model is a scripted one behind the fake OpenAI-compatible and Anthropic servers (real HTTP on
127.0.0.1 through the real SDKs) that reads only what it is sent and now and then answers with a
malformed call, so the report has refusals to count. Small windows keep each run to seconds.
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
from tests.helpers.fake_llm_servers import FakeAnthropicServer, FakeOpenAIServer, Reply
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
    assert "Refused answers by error code" in out.out
    assert model.calls > 0 and model.malformed > 0
    report = _report(run)
    total = report["total"]["figures"]
    assert total["model_calls"] == model.calls
    assert 0 < total["valid_call_rate_pct"] < 100.0
    assert sum(total["refusals_by_code"].values()) >= model.malformed
    assert total["tokens_in"] > 0 and total["calls_per_decision"] > 1
    assert total["prompts_cut"] == 0  # Kestrel and the server count the same prompts
    # the scripted model decides as the rule engine does: its decisions match bar by bar
    assert total["agreement_pct"] == 100.0
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
    model = PromptRuleModel(malformed_every=4, native=True)
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
