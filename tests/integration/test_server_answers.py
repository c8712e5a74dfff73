"""What servers send back, read as it is meant: an answer cut at its token limit, native tool
calls instead of XML, an answer without usage.

A Trader agent works on a person's message through the real ``openai`` and ``anthropic`` SDKs
against the fake servers, which check native tool turns as the real APIs do (a ``tool`` message or
``tool_result`` block must answer a call of the turn before it, and every call be answered).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.agents.faults import what_to_do
from app.agents.llm.anthropic_provider import AnthropicProvider
from app.agents.llm.openai_compat import OpenAICompatibleProvider
from app.agents.llm.port import LLMProvider
from app.domain.agents import AgentState, TaskStatus
from app.runtime.world import World
from app.store.db import MIGRATIONS, migrate
from tests.helpers.agents import agent_world, settle
from tests.helpers.fake_llm_servers import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    Reply,
    call,
    error,
    text,
)

TRADER = "TraderAgent_Default_v1"
TICKER = ("<get_current_ticker_info><symbols><symbol>BTC/USDT</symbol></symbols>"
          "</get_current_ticker_info>")
NATIVE_TICKER = call("get_current_ticker_info", {"symbols": ["BTC/USDT"]})


@dataclass
class Desk:
    """One vendor's fake server and the provider the agent gets for it."""

    vendor: str
    server: FakeOpenAIServer | FakeAnthropicServer
    model: str

    def provider(self, stream: bool = False) -> LLMProvider:
        if self.vendor == "openai":
            return OpenAICompatibleProvider(self.server.base_url, "sk-test",
                                            default_model=self.model, timeout_s=10,
                                            max_retries=0, stream=stream)
        return AnthropicProvider("sk-ant-test", base_url=self.server.base_url,
                                 default_model=self.model, timeout_s=10, max_retries=0,
                                 stream=stream)

    def requests(self) -> list[dict[str, Any]]:
        return self.server.bodies


@pytest.fixture(params=["openai", "anthropic"])
def desk(request: pytest.FixtureRequest) -> Iterator[Desk]:
    if request.param == "openai":
        with FakeOpenAIServer() as server:
            yield Desk("openai", server, "gpt-4o-mini")
    else:
        with FakeAnthropicServer() as server:
            yield Desk("anthropic", server, "claude-3-5-haiku")


def run(tmp_path: Path, provider: LLMProvider, body: Callable[[World, str], Awaitable[None]],
        settings: str = "") -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "settings.toml").write_text(settings, encoding="utf-8")

    async def scenario() -> None:
        world = agent_world(folder, provider_override=lambda _info, _tpl: provider)
        try:
            await world.start()
            agent = await world.agents.manager.create_agent(
                TRADER, "Trader", {"symbols": ["BTC/USDT"]}, start=True)
            await body(world, agent.agent_id)
        finally:
            await world.aclose()
            await provider.aclose()

    asyncio.run(scenario())


async def ask(world: World, agent_id: str, question: str = "what is the price?") -> Any:
    task = world.agents.manager.send_user_message(agent_id, question)
    await settle(world)
    return world.agents.queue.get(task.task_id)


def kinds(world: World, task_id: str) -> list[str]:
    return [m.kind for m in world.agents.conversations.messages(task_id)
            if m.kind not in ("notice", "commentary", "normalised")]


def usage_rows(world: World) -> list[tuple[int, int, int, int]]:
    return world.ledger.connection.execute(
        "SELECT input_tokens, output_tokens, estimated, cut FROM llm_usage ORDER BY id"
    ).fetchall()


def last_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") or str(b.get("content", "")) for b in content)


# -- answers cut at the token limit ---------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_final_answer_cut_at_the_token_limit_is_told_to_the_model_and_never_accepted(
    tmp_path: Path, desk: Desk, stream: bool
) -> None:
    desk.server.script([text("BTC/USDT: HOLD, con", finish_reason="length"),
                        "BTC/USDT: HOLD, confidence 0.4."])

    async def body(world: World, agent_id: str) -> None:
        task = await ask(world, agent_id)
        assert task.status is TaskStatus.DONE
        assert task.result == "BTC/USDT: HOLD, confidence 0.4."  # not the cut one
        assert kinds(world, task.task_id) == [
            "task", "cut_answer", "tool_result", "final"]
        told = last_text(desk.requests()[1])
        assert "<error_code>ANSWER_CUT</error_code>" in told
        assert "Your answer was cut at 2,048 tokens" in told and "shorter" in told
        assert [row[3] for row in usage_rows(world)] == [1, 0]
        assert world.agents.conversations.usage(agent_id=agent_id).cut_answers == 1

    run(tmp_path, desk.provider(stream), body)


def test_a_call_cut_before_its_end_is_not_run(tmp_path: Path, desk: Desk) -> None:
    order = ("<thinking>buy a little</thinking><create_order><symbol>BTC/USDT</symbol><side>BUY"
             "</side><order_type>MARKET</order_type><quantity>0.01")
    desk.server.script([text(order, finish_reason="length"), "Nothing bought."])

    async def body(world: World, agent_id: str) -> None:
        task = await ask(world, agent_id, "buy 0.01 BTC")
        assert task.result == "Nothing bought."
        placed = world.ledger.connection.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
        assert placed == 0
        (refused,) = world.ledger.connection.execute(
            "SELECT error_code FROM tool_calls WHERE agent_id = ?", (agent_id,)).fetchall()
        assert refused == ("ANSWER_CUT",)  # in the audit trail like any refused answer

    run(tmp_path, desk.provider(), body)


# -- native tool calls ----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_native_tool_call_runs_through_the_executor_and_its_result_goes_back_as_tool_result(
    tmp_path: Path, desk: Desk, stream: bool
) -> None:
    desk.server.script([Reply(tool_calls=(NATIVE_TICKER,)), "The price is noted."])

    async def body(world: World, agent_id: str) -> None:
        task = await ask(world, agent_id)
        assert task.result == "The price is noted."
        assert kinds(world, task.task_id) == ["task", "native_call", "tool_result", "final"]
        stored = [m for m in world.agents.conversations.messages(task.task_id)
                  if m.kind in ("native_call", "tool_result")]
        assert stored[0].content == TICKER  # kept as the XML call it stands for
        audit = world.ledger.connection.execute(
            "SELECT tool_name, status, params_json FROM tool_calls WHERE agent_id = ?",
            (agent_id,)).fetchall()
        assert [(name, status) for name, status, _ in audit] == [
            ("get_current_ticker_info", "success")]
        assert json.loads(audit[0][2]) == {"symbols": ["BTC/USDT"]}
        first, second = desk.requests()
        offered = {t.get("name") or t["function"]["name"]: t for t in first["tools"]}
        assert "get_current_ticker_info" in offered and "create_order" in offered
        result = stored[1].content
        if desk.vendor == "openai":
            assert offered["create_order"]["function"]["parameters"]["required"]
            made, answer = second["messages"][-2:]
            (native,) = made["tool_calls"]
            assert native["function"]["name"] == "get_current_ticker_info"
            assert json.loads(native["function"]["arguments"]) == {"symbols": ["BTC/USDT"]}
            assert answer == {"role": "tool", "tool_call_id": native["id"], "content": result}
        else:
            assert offered["create_order"]["input_schema"]["required"]
            made, answer = second["messages"][-2:]
            (use,) = made["content"]
            assert (use["type"], use["name"], use["input"]) == (
                "tool_use", "get_current_ticker_info", {"symbols": ["BTC/USDT"]})
            (block,) = answer["content"]
            assert (block["type"], block["tool_use_id"], block["content"]) == (
                "tool_result", use["id"], result)
        assert "<status>success</status>" in result and "<ticker " in result

    run(tmp_path, desk.provider(stream), body, '[llm]\ntool_transport = "native"\n')


def test_a_native_call_that_cannot_be_read_is_answered_with_what_to_fix(
    tmp_path: Path, desk: Desk
) -> None:
    desk.server.script([Reply(tool_calls=(call("get_current_ticker_info", '{"symbols": ["BTC'),)),
                        Reply(tool_calls=(NATIVE_TICKER, NATIVE_TICKER)),
                        Reply(tool_calls=(NATIVE_TICKER,)), "Noted."])

    async def body(world: World, agent_id: str) -> None:
        task = await ask(world, agent_id)
        assert task.result == "Noted."
        results = [m.content for m in world.agents.conversations.messages(task.task_id)
                   if m.kind == "tool_result"]
        assert "<error_code>PARSE_ERROR</error_code>" in results[0]
        assert "are not a JSON object" in results[0]
        assert "<error_code>MULTIPLE_TOOL_CALLS</error_code>" in results[1]
        assert "<status>success</status>" in results[2]

    run(tmp_path, desk.provider(), body, '[llm]\ntool_transport = "native"\n')


def test_auto_keeps_offering_tools_to_a_model_that_calls_natively(
    tmp_path: Path, desk: Desk
) -> None:
    desk.server.script([Reply(tool_calls=(NATIVE_TICKER,)), Reply(tool_calls=(NATIVE_TICKER,)),
                        "Noted."])

    async def body(world: World, agent_id: str) -> None:
        assert (await ask(world, agent_id)).result == "Noted."
        assert [bool(b.get("tools")) for b in desk.requests()] == [True, True, True]

    run(tmp_path, desk.provider(), body, '[llm]\ntool_transport = "auto"\n')


def test_auto_turns_to_xml_for_a_model_that_answers_in_xml(tmp_path: Path, desk: Desk) -> None:
    desk.server.script([TICKER, "Noted."])

    async def body(world: World, agent_id: str) -> None:
        assert (await ask(world, agent_id)).result == "Noted."
        assert [bool(b.get("tools")) for b in desk.requests()] == [True, False]

    run(tmp_path, desk.provider(), body, '[llm]\ntool_transport = "auto"\n')


def test_auto_falls_back_to_xml_when_the_server_refuses_tools(tmp_path: Path, desk: Desk) -> None:
    refusal = "registry.ollama.ai/library/gemma:2b does not support tools"
    desk.server.script([error(400, refusal), TICKER, "Noted."])

    async def body(world: World, agent_id: str) -> None:
        task = await ask(world, agent_id)
        assert task.result == "Noted.", task.result
        assert [bool(b.get("tools")) for b in desk.requests()] == [True, False, False]
        assert world.agents.store.get(agent_id).state is AgentState.RUNNING

    run(tmp_path, desk.provider(), body, '[llm]\ntool_transport = "auto"\n')


def test_native_transport_on_a_server_that_refuses_tools_says_what_to_set(
    tmp_path: Path, desk: Desk
) -> None:
    desk.server.script([error(400, "this model does not support tools")])

    async def body(world: World, agent_id: str) -> None:
        task = await ask(world, agent_id)
        assert task.status is TaskStatus.FAILED
        agent = world.agents.store.get(agent_id)
        assert agent.state is AgentState.FAULTED
        assert "refused the tools offered natively" in agent.fault_reason
        assert "tool_transport" in what_to_do(agent.fault_reason)

    run(tmp_path, desk.provider(), body, '[llm]\ntool_transport = "native"\n')


# -- answers without usage ------------------------------------------------------------------------


def test_an_answer_without_usage_is_counted_and_marked_estimated(tmp_path: Path,
                                                                 desk: Desk) -> None:
    desk.server.script([Reply(text=TICKER, usage=False), Reply(text="Noted.", usage=False)])

    async def body(world: World, agent_id: str) -> None:
        assert (await ask(world, agent_id)).result == "Noted."
        rows = usage_rows(world)
        assert len(rows) == 2 and all(r[2] == 1 for r in rows)  # estimated
        assert all(r[0] > 5_000 and r[1] > 0 for r in rows)  # the prompt, counted by Kestrel
        assert world.agents.conversations.usage(agent_id=agent_id).estimated_calls == 2

    run(tmp_path, desk.provider(), body, '[llm]\ntool_transport = "xml"\n')


def test_a_budget_trips_on_answers_whose_usage_the_server_never_sent(tmp_path: Path) -> None:
    priced = Reply(text=TICKER, usage=False, model="claude-3-5-haiku")
    with FakeAnthropicServer(default=priced) as server:
        provider = Desk("anthropic", server, "claude-3-5-haiku").provider()

        async def body(world: World, agent_id: str) -> None:
            task = await ask(world, agent_id, "watch the price")
            assert task.status is TaskStatus.FAILED
            assert world.agents.store.get(agent_id).state is AgentState.STOPPED
            spent = world.agents.conversations.usage(run_id=world.agents.run_id)
            assert spent.cost >= Decimal("0.02") and spent.estimated_calls == spent.calls
            assert spent.calls < 10  # stopped by the budget, long before the step limit

        run(tmp_path, provider, body,
            '[agents]\nrun_budget_usd = "0.02"\n[llm]\ntool_transport = "xml"\n')


def test_a_database_from_before_keeps_its_usage_rows_as_reported_and_not_cut(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / "old.db")
    migrate(db, len(MIGRATIONS) - 1)
    db.execute("INSERT INTO llm_usage (agent_id, task_id, run_id, provider, model, input_tokens, "
               "output_tokens, cached_tokens, cost, latency_ms, market_ms, wall_ms) "
               "VALUES ('a', 't', 'r', 'anthropic', 'm', 900, 30, 0, '0.001', 5.0, 0, 0)")
    db.commit()
    migrate(db)
    assert db.execute("SELECT input_tokens, estimated, cut FROM llm_usage").fetchall() == [
        (900, 0, 0)]
