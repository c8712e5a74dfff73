"""An agent's requests stay within its token budget: the oldest tool results give way to a
summary, while the system prompt, the task, the model's own answers and the newest results stay
whole; the cut only moves forward, so later requests keep a stable prefix."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lxml import etree

from app.agents.context_budget import KEEP_RECENT, fit_context, summarise
from app.agents.llm.port import ChatMessage, NativeCall
from app.agents.prompt import estimate_tokens
from app.domain.errors import ErrorCode
from app.runtime.world import World
from app.tools.protocol.render import el, render_error, render_success
from tests.helpers.agents import agent_world, settle
from tests.helpers.scripted_llm import ScriptedProvider

SYSTEM = "You are a trader. " * 50


def klines(n: int) -> str:
    bars = [el("kline", None, timestamp_ms=1_700_000_000_000 + i * 3_600_000, open="43000.5",
               high="43100", low="42900", close="43050.25", volume="12.5") for i in range(n)]
    return render_success("get_historical_klines",
                          el("klines_data", None, *bars, symbol="BTC/USDT", interval="1h")).xml


def conversation(results: int) -> list[ChatMessage]:
    messages = [ChatMessage("user", '<task task_type="RUN_ANALYSIS">{}</task>')]
    for i in range(results):
        messages.append(ChatMessage("assistant", f"<get_historical_klines><limit>{i}</limit>"
                                                 "</get_historical_klines>"))
        messages.append(ChatMessage("user", klines(40)))
    return messages


def tokens(system: str, messages: list[ChatMessage]) -> int:
    return estimate_tokens(system) + sum(estimate_tokens(m.content) for m in messages)


def test_a_conversation_within_its_budget_is_sent_unchanged() -> None:
    messages = conversation(3)
    fitted = fit_context(SYSTEM, messages, 1_000_000)
    assert fitted.messages == messages and fitted.summarised == 0
    assert fitted.tokens == tokens(SYSTEM, messages)


def test_past_the_budget_the_oldest_results_are_summarised_and_the_rest_kept_whole() -> None:
    messages = conversation(6)
    full = tokens(SYSTEM, messages)
    budget = full // 2
    fitted = fit_context(SYSTEM, messages, budget)
    assert fitted.tokens <= budget < full
    assert fitted.tokens == tokens(SYSTEM, fitted.messages)
    changed = [i for i, (a, b) in enumerate(zip(messages, fitted.messages, strict=True))
               if a != b]
    assert changed and all(messages[i].content.startswith("<tool_result") for i in changed)
    assert changed == sorted(changed) and changed[0] == 2  # from the oldest result on
    results = [i for i, m in enumerate(messages) if m.role == "user" and i > 0]
    assert not set(results[-KEEP_RECENT:]) & set(changed)  # the newest stay whole
    summary = etree.fromstring(fitted.messages[changed[0]].content.encode())
    assert summary.get("tool_name") == "get_historical_klines"
    assert summary.findtext("status") == "success"
    text = summary.findtext("data/summarised")
    assert "klines_data (symbol=BTC/USDT, interval=1h): 40 kline" in text
    assert "call the tool again" in text


def test_the_cut_only_moves_forward_so_the_next_request_keeps_the_same_prefix() -> None:
    budget = tokens(SYSTEM, conversation(4)) * 2 // 3
    earlier = fit_context(SYSTEM, conversation(4), budget).messages
    later = fit_context(SYSTEM, conversation(5), budget).messages
    assert later[:len(earlier) - 2 * KEEP_RECENT] == earlier[:len(earlier) - 2 * KEEP_RECENT]


def test_errors_keep_their_code_and_message_when_summarised() -> None:
    message = "Quantity below the minimum " * 30
    error = render_error("create_order", ErrorCode.INVALID_ORDER, message).xml
    short = etree.fromstring(summarise(error, 400).encode())
    assert short.findtext("error_details/error_code") == "INVALID_ORDER"
    assert short.findtext("error_details/message").startswith("Quantity below the minimum")
    assert len(short.findtext("error_details/message")) <= 301


def test_an_llm_agent_with_a_small_budget_is_sent_summaries_of_its_older_results(
    tmp_path: Path,
) -> None:
    ticker = ("<get_current_ticker_info><symbols><symbol>BTC/USDT</symbol></symbols>"
              "</get_current_ticker_info>")
    provider = ScriptedProvider([ticker] * 5 + ["done"])

    async def scenario() -> None:
        world: World = agent_world(tmp_path,
                                              provider_override=lambda _i, _t: provider)
        try:
            await world.start()
            name = "TraderAgent_Default_v1"
            template = world.agents.manager.templates[name]
            limits = template.limits.model_copy(update={"context_tokens": 4_000})
            world.agents.manager.templates[name] = template.model_copy(update={"limits": limits})
            agent = await world.agents.manager.create_agent(name, "T", {"symbols": ["BTC/USDT"]})
            task = world.agents.manager.send_user_message(agent.agent_id, "price?")
            await settle(world)
            assert world.agents.queue.get(task.task_id).result == "done"
            last = provider.requests[-1].messages
            results = [m.content for m in last if m.content.startswith("<tool_result")]
            assert len(results) == 5
            assert all("<summarised" in r for r in results[:-KEEP_RECENT])
            assert all("<ticker " in r for r in results[-KEEP_RECENT:])
            stored = [m.content for m in world.agents.conversations.messages(task.task_id)
                      if m.kind == "tool_result"]
            assert all("<ticker " in r for r in stored)  # the store keeps every result whole
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_a_summarised_result_still_answers_the_native_call_it_belongs_to() -> None:
    messages = [ChatMessage("user", '<task task_type="RUN_ANALYSIS">{}</task>')]
    for i in range(4):
        call = NativeCall(f"call_{i}", "get_historical_klines", {"limit": i})
        messages.append(ChatMessage("assistant", f"<get_historical_klines><limit>{i}</limit>"
                                                 "</get_historical_klines>", call=call))
        messages.append(ChatMessage("user", klines(40), call_id=f"call_{i}"))
    fitted = fit_context(SYSTEM, messages, tokens(SYSTEM, messages) // 2)
    assert fitted.summarised > 0
    assert [m.call_id for m in fitted.messages] == [m.call_id for m in messages]
