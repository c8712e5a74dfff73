"""Local model servers and their small contexts: every request fits the context Kestrel is told
(``[llm] context_tokens``, with ``max_output_tokens`` kept for the answer) with the system prompt
whole, one that cannot is refused before it is sent with the numbers, and a server that silently
keeps only the end of a prompt (Ollama past its context) is caught and named.

The agents are the Trend Analyst and the Trader in an agent backtest, answered through the real
``openai`` SDK by fake servers that behave as local servers do: one refuses a prompt and answer
past 8,192 tokens (vLLM ``--max-model-len 8192``, LM Studio and llama.cpp at that context), one
cuts a longer prompt to its end as Ollama does.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from app.agents.faults import what_to_do
from app.config import LLMSettings
from app.runtime.agent_backtest import AgentBacktestOptions, AgentBacktestResult, run_agent_backtest
from app.store.texts import install
from tests.helpers.cli import run_main
from tests.helpers.fake_llm_servers import FakeOllamaServer, FakeOpenAIServer, count_prompt
from tests.helpers.paths import BTC_USDT_1H, REPO
from tests.helpers.prompt_rule_model import PromptRuleModel

TEMPLATES = ["AnalystAgent_Trend_v1", "TraderAgent_Default_v1"]


def backtest(tmp_path: Path, base_url: str, bars: int = 4, **llm: Any) -> AgentBacktestResult:
    settings = LLMSettings(provider="openai-compatible", model="qwen2.5:7b", base_url=base_url,
                           max_retries=0, timeout_s=20, **llm)
    options = AgentBacktestOptions(templates=TEMPLATES, warmup_bars=60, bars=bars, llm=settings)
    return asyncio.run(run_agent_backtest([BTC_USDT_1H], options, tmp_path))


def stored(tmp_path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with install(sqlite3.connect(tmp_path / "workspace" / "kestrel.db")) as db:
        return db.execute(sql, args).fetchall()


def whole_system_prompt(body: dict[str, Any]) -> bool:
    """The request starts with an agent's whole system prompt: its first words, and its end
    (the agent's identity and configuration, which the runtime context closes it with)."""
    first = body["messages"][0]
    return (first["role"] == "system"
            and first["content"].startswith("You are a sophisticated AI assistant")
            and "Your agent id:" in first["content"])


class WithoutInstructions:
    """A model that answers as the rule engine when it gets its system prompt, and like a model
    without instructions when the server cut it away: a confident plain-text answer."""

    def __init__(self) -> None:
        self.model = PromptRuleModel()
        self.blind = 0

    def __call__(self, body: dict[str, Any]) -> str:
        if body["messages"] and whole_system_prompt(body):
            return str(self.model(body))
        self.blind += 1
        return "BTC/USDT: HOLD. The trend is unclear."


# -- a server with an 8k context ----------------------------------------------------------------


def test_on_an_8k_server_every_request_fits_with_the_system_prompt_whole(tmp_path: Path) -> None:
    with FakeOpenAIServer(context_tokens=8192, default=PromptRuleModel()) as server:
        outcome = backtest(tmp_path, server.base_url, context_tokens=8192,
                           max_output_tokens=1024)
        bodies = server.bodies
    assert outcome.faults == [], outcome.faults[0].reason if outcome.faults else ""
    assert len(bodies) >= 8 and outcome.llm_calls == len(bodies)  # no call was refused
    for body in bodies:
        assert count_prompt(body) + body["max_tokens"] <= 8192
        assert body["max_tokens"] == 1024
        assert whole_system_prompt(body)
    done = stored(tmp_path, "SELECT COUNT(*) FROM tasks WHERE status = 'DONE'")[0][0]
    assert done == 4  # the analyst finished its task on every bar


def test_the_analysts_task_data_gives_way_before_anything_else(tmp_path: Path) -> None:
    with FakeOpenAIServer(context_tokens=8192, default=PromptRuleModel()) as server:
        backtest(tmp_path, server.base_url, bars=1, context_tokens=8192,
                 max_output_tokens=1024)
        first = server.bodies[0]
    task = first["messages"][1]["content"]
    assert "<task_data" in task and "call the tool again" in task  # summarised, not dropped
    assert first["messages"][0]["content"].startswith("You are a sophisticated AI assistant")


def test_a_request_that_cannot_fit_is_refused_before_it_is_sent_with_the_numbers(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer(context_tokens=7000, default=PromptRuleModel()) as server:
        outcome = backtest(tmp_path, server.base_url, bars=2, context_tokens=7000)
        sent = len(server.bodies)
    assert sent == 0, "nothing was sent to the server"
    (fault,) = [f for f in outcome.faults if f.role == "analyst"]
    match = re.search(r"the system prompt alone is ([\d,]+) tokens; the server's context is "
                      r"7,000 tokens with 2,048 kept for the answer: raise context_tokens or "
                      r"lower max_output_tokens", fault.reason)
    assert match is not None, fault.reason
    assert int(match.group(1).replace(",", "")) > 7000 - 2048
    assert fault.reason.startswith("the request was not sent to the model")
    assert "Traceback" not in fault.reason
    assert what_to_do(fault.reason).startswith("set context_tokens in Settings > LLM")


# -- Ollama ---------------------------------------------------------------------------------------


def test_a_prompt_ollama_cut_to_its_context_is_named_once_in_the_conversation_and_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    model = WithoutInstructions()
    with FakeOllamaServer(context_length=4096, default=model) as server:
        outcome = backtest(tmp_path, server.base_url, bars=3)
        cut = server.cut
    assert cut > 0 and model.blind > 0  # the model answered without its instructions
    notices = stored(tmp_path, "SELECT agent_id, content FROM messages WHERE kind = 'notice' "
                               "AND content LIKE 'The model''s server cut the prompt%'")
    analyst = next(a.agent_id for a in outcome.agents if a.role.value == "analyst")
    assert [agent for agent, _ in notices] == [analyst], "once, in the agent's conversation"
    text = notices[0][1]
    assert re.search(r"reported 4,0\d\d prompt tokens for a request Kestrel counted at [\d,]+",
                     text), text
    assert "OLLAMA_CONTEXT_LENGTH" in text and "context_tokens" in text
    logged = [r for r in caplog.records if "cut the prompt" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelname == "WARNING"


def test_ollama_started_with_the_context_the_readme_names_gets_every_prompt_whole(
    tmp_path: Path,
) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    length = int(re.search(r"OLLAMA_CONTEXT_LENGTH=(\d+) ollama serve", readme).group(1))
    example = re.search(r"`(kestrel eval --provider openai-compatible --base-url "
                        r"http://127\.0\.0\.1:11434/v1[^`]*)`", readme)
    assert example is not None, "the README's Ollama example"
    args = shlex.split(example.group(1))[1:]
    model = WithoutInstructions()
    with FakeOllamaServer(context_length=length, default=model) as server:
        args[args.index("--base-url") + 1] = server.base_url
        args[args.index("--out") + 1] = str(tmp_path / "eval-qwen")
        code = run_main([*args, "--workspace", str(tmp_path / "ws"), "--windows", "1",
                         "--bars", "3", "--no-progress", "--max-retries", "0"])
        cut, bodies = server.cut, server.bodies
    assert code == 0
    assert cut == 0 and model.blind == 0, "no prompt was cut: every answer had its instructions"
    assert all(whole_system_prompt(b) for b in bodies)
    report = json.loads((tmp_path / "eval-qwen" / "eval.json").read_text(encoding="utf-8"))
    assert report["total"]["figures"]["prompts_cut"] == 0
    assert report["subject"]["context_tokens"] == length


def test_an_eval_against_ollama_at_its_default_context_warns_that_its_figures_are_not_valid(
    tmp_path: Path, capsys: Any,
) -> None:
    with FakeOllamaServer(default=WithoutInstructions()) as server:
        code = run_main(["eval", "--workspace", str(tmp_path / "ws"), "--out",
                         str(tmp_path / "run"), "--provider", "openai-compatible", "--base-url",
                         server.base_url, "--model", "qwen2.5:7b", "--windows", "1", "--bars",
                         "3", "--no-progress", "--max-retries", "0"])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads((tmp_path / "run" / "eval.json").read_text(encoding="utf-8"))
    assert report["total"]["figures"]["prompts_cut"] >= 1
    (warning,) = [w for w in report["warnings"] if "cut the prompt" in w]
    assert "OLLAMA_CONTEXT_LENGTH" in warning and warning in out
