"""A final answer's blocks are written for the agent through its memory tools, audited like its
calls; the task ends with the answer's text once they are, and a refused block goes back to the
model instead of being lost. Driven by a scripted model against the real stores and tools."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import yaml

from app.agents.answer_blocks import NOT_WRITTEN_NOTE
from app.agents.loop import task_message
from app.domain.agents import TaskStatus
from app.runtime.world import World
from tests.helpers.agents import agent_world, settle
from tests.helpers.scripted_llm import ScriptedProvider

TRADER = "TraderAgent_Default_v1"
TRADES = "symbols/BTCUSDT/trades.yaml"
RECORD = "schema_version: 1\nsymbol: BTC/USDT\ntrades: []\n"
ANSWER = (
    "<thinking>Nothing to trade.</thinking>\n"
    "No trade on BTC/USDT: RSI is mid-range.\n"
    "<trades>\n" + RECORD + "</trades>\n"
    "<journal>\nBTC/USDT: no trade, RSI < 30 & MACD flat was not met.\n</journal>"
)


def _run(tmp_path: Path, provider: ScriptedProvider,
         body: Callable[[World, str], Awaitable[None]]) -> None:
    async def scenario() -> None:
        world = agent_world(tmp_path / "ws", provider_override=lambda _info, _tpl: provider)
        try:
            await world.start()
            agent = await world.agents.manager.create_agent(
                TRADER, "Scripted", {"symbols": ["BTC/USDT"]}, start=True
            )
            await body(world, agent.agent_id)
        finally:
            await world.aclose()

    asyncio.run(scenario())


def _calls(world: World, agent_id: str) -> list[tuple[str, dict[str, object], str]]:
    rows = world.ledger.connection.execute(
        "SELECT tool_name, params_json, status FROM tool_calls WHERE agent_id=? ORDER BY id",
        (agent_id,),
    ).fetchall()
    return [(name, json.loads(params), status) for name, params, status in rows]


def _journal(world: World, agent_id: str) -> str:
    assert world.memory is not None
    if not (world.memory.agent_folder(agent_id) / "journal").is_dir():
        return ""
    files = world.memory.list_files(agent_id, "journal")
    return "".join(world.memory.read_file(agent_id, f.path).data.decode() for f in files)


def test_the_blocks_of_a_final_answer_are_written_and_the_task_ends_in_one_model_call(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([ANSWER])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "anything to do?")
        await settle(world)
        done = world.agents.queue.get(task.task_id)
        assert done.status is TaskStatus.DONE
        assert done.result == "No trade on BTC/USDT: RSI is mid-range."  # what people read
        assert len(provider.requests) == 1
        assert world.memory is not None
        assert world.memory.read_file(agent_id, TRADES).data.decode() == RECORD
        assert "BTC/USDT: no trade, RSI < 30 & MACD flat was not met." in _journal(
            world, agent_id)
        # made for the agent through its own tools, in the answer's order, and audited
        calls = _calls(world, agent_id)
        assert [(name, status) for name, _, status in calls] == [
            ("write_agent_memory_file", "success"), ("log_journal_entry", "success")]
        assert calls[0][1]["file_path"] == TRADES and calls[0][1]["file_type_hint"] == "YAML"
        messages = world.agents.conversations.messages(task.task_id)
        assert [m.kind for m in messages] == ["task", "answer_blocks", "block_results", "final"]
        assert "<trades>" not in messages[-1].content

    _run(tmp_path, provider, body)


def test_a_refused_block_goes_back_to_the_model_and_the_task_ends_once_it_is_fixed(
    tmp_path: Path,
) -> None:
    broken = ANSWER.replace(RECORD, "trades: [unclosed\n")
    fixed = "Record fixed.\n<trades>\n" + RECORD + "</trades>"
    provider = ScriptedProvider([broken, fixed])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "anything to do?")
        await settle(world)
        done = world.agents.queue.get(task.task_id)
        assert done.status is TaskStatus.DONE and done.result == "Record fixed."
        # the model saw its answer and what became of each block, and was asked again
        second = provider.requests[1].messages
        assert [m.role for m in second] == ["user", "assistant", "user"]
        assert second[1].content == broken
        assert second[2].content.startswith(NOT_WRITTEN_NOTE)
        assert "not valid YAML" in second[2].content and "journal_entry_logged" in second[2].content
        assert world.memory is not None
        assert world.memory.read_file(agent_id, TRADES).data.decode() == RECORD
        assert _journal(world, agent_id).count("RSI < 30") == 1  # written once, not again
        assert [(name, status) for name, _, status in _calls(world, agent_id)] == [
            ("write_agent_memory_file", "error"), ("log_journal_entry", "success"),
            ("write_agent_memory_file", "success")]

    _run(tmp_path, provider, body)


def test_blocks_with_no_answer_before_them_are_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(["<journal>\nonly a block\n</journal>", "Nothing to do."])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "anything to do?")
        await settle(world)
        done = world.agents.queue.get(task.task_id)
        assert done.status is TaskStatus.DONE and done.result == "Nothing to do."
        refusal = provider.requests[1].messages[-1].content
        assert "<status>error</status>" in refusal and "no text before them" in refusal
        assert _calls(world, agent_id) == [("unknown", {}, "error")]
        assert _journal(world, agent_id) == ""

    _run(tmp_path, provider, body)


def test_an_answer_stored_before_a_crash_has_its_blocks_written_on_redelivery_without_asking_again(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([])  # asking the model again would fail the test

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.queue.enqueue(agent_id, "USER_MESSAGE", {"text": "anything?"}, "user")
        conversations = world.agents.conversations
        conversations.add(agent_id, task.task_id, 0, "user", "task", task_message(task))
        conversations.add(agent_id, task.task_id, 1, "assistant", "answer_blocks", ANSWER)
        await settle(world)
        done = world.agents.queue.get(task.task_id)
        assert done.status is TaskStatus.DONE
        assert done.result == "No trade on BTC/USDT: RSI is mid-range."
        assert provider.requests == []
        assert world.memory is not None
        assert yaml.safe_load(world.memory.read_file(agent_id, TRADES).data)["trades"] == []

    _run(tmp_path, provider, body)
