"""The agent loop's behaviour with a scripted model: recovery from malformed answers, limits,
budgets, approvals, faults, pausing and replies, all against the real stores and tools."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path

from app.agents.llm.port import LLMUsage, TemporaryLLMError
from app.domain.agents import AgentState, TaskStatus
from app.events import AnswerStreamed
from app.runtime.world import World
from tests.helpers.agents import agent_world, settle
from tests.helpers.scripted_llm import ScriptedProvider, prompt_size

TICKER = (
    "<get_current_ticker_info><symbols><symbol>BTC/USDT</symbol></symbols>"
    "</get_current_ticker_info>"
)
TRADER = "TraderAgent_Default_v1"


def _run(
    tmp_path: Path,
    provider: ScriptedProvider,
    body: Callable[[World, str], Awaitable[None]],
    settings: str = "",
) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    if settings:
        (folder / "settings.toml").write_text(settings, encoding="utf-8")

    async def scenario() -> None:
        world = agent_world(folder, provider_override=lambda _info, _tpl: provider)
        try:
            await world.start()
            agent = await world.agents.manager.create_agent(
                TRADER, "Scripted", {"symbols": ["BTC/USDT"]}, start=True
            )
            await body(world, agent.agent_id)
        finally:
            await world.aclose()

    asyncio.run(scenario())


def _kinds(world: World, task_id: str) -> list[str]:
    return [m.kind for m in world.agents.conversations.messages(task_id)]


def test_malformed_answer_gets_an_error_result_and_the_agent_recovers(tmp_path: Path) -> None:
    provider = ScriptedProvider(["<get_current_ticker_info><symbol>BTC", TICKER, "Price noted."])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "what is the price?")
        await settle(world)
        done = world.agents.queue.get(task.task_id)
        assert done.status is TaskStatus.DONE and done.result == "Price noted."
        results = [m.content for m in world.agents.conversations.messages(task.task_id)
                   if m.kind == "tool_result"]
        assert "<status>error</status>" in results[0]
        assert "<status>success</status>" in results[1] and "<ticker" in results[1]
        # the model saw its own malformed answer and the error, in order
        last = provider.requests[-1].messages
        assert [m.role for m in last] == ["user", "assistant", "user", "assistant", "user"]

    _run(tmp_path, provider, body)


def test_step_limit_ends_a_task_that_never_answers(tmp_path: Path) -> None:
    provider = ScriptedProvider([TICKER], repeat_last=True)

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "loop forever")
        await settle(world)
        done = world.agents.queue.get(task.task_id)
        limit = world.agents.manager.templates[TRADER].limits.max_steps
        assert done.status is TaskStatus.DONE and "step limit" in (done.result or "")
        assert len(provider.requests) == limit
        assert _kinds(world, task.task_id)[-1] == "notice"

    _run(tmp_path, provider, body)


def test_spent_run_budget_stops_the_agent_cleanly(tmp_path: Path) -> None:
    provider = ScriptedProvider([TICKER], repeat_last=True, usage=LLMUsage(400_000, 10_000))

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "spend")
        await settle(world)
        assert world.agents.queue.get(task.task_id).status is TaskStatus.FAILED
        agent = world.agents.store.get(agent_id)
        assert agent.state is AgentState.STOPPED
        spent = world.agents.conversations.usage(run_id=world.agents.run_id).cost
        assert spent >= Decimal("0.05")
        assert len(provider.requests) < 10

    _run(tmp_path, provider, body, '[agents]\nrun_budget_usd = "0.05"\n')


def _orders(world: World, agent_id: str) -> int:
    return world.ledger.connection.execute(
        "SELECT COUNT(*) FROM orders WHERE agent_id=?", (agent_id,)
    ).fetchone()[0]


def _order(quantity: str) -> str:
    return (
        "<thinking>buy</thinking><create_order><symbol>BTC/USDT</symbol><side>BUY</side>"
        f"<order_type>MARKET</order_type><quantity>{quantity}</quantity>"
        "<reason>test</reason></create_order>"
    )


def test_large_order_waits_for_approval_and_is_placed_when_approved(tmp_path: Path) -> None:
    provider = ScriptedProvider([_order("0.15"), "Bought."])  # ~1,275 USDT: above 1,000

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "buy")
        await settle(world)
        assert world.agents.store.get(agent_id).state is AgentState.WAITING_FOR_USER
        (question,) = world.agents.questions.pending(agent_id)
        assert question.kind.value == "approval" and "above your limit" in question.text
        assert _orders(world, agent_id) == 0, "nothing reaches the broker before approval"
        world.agents.manager.answer(question.question_id, "Approve")
        await settle(world)
        assert world.agents.queue.get(task.task_id).status is TaskStatus.DONE
        (record,) = world.agents.approvals.all()
        assert record.decision == "approved" and record.order_id
        assert _orders(world, agent_id) == 1
        assert world.agents.store.get(agent_id).state is AgentState.RUNNING

    _run(tmp_path, provider, body, '[approval]\nabove_quote = "1000"\n')


def test_refused_order_is_never_placed_and_the_agent_is_told(tmp_path: Path) -> None:
    provider = ScriptedProvider([_order("0.5"), "Understood, not buying."])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "buy")
        await settle(world)
        (question,) = world.agents.questions.pending(agent_id)
        world.agents.manager.answer(question.question_id, "Refuse")
        await settle(world)
        results = [m.content for m in world.agents.conversations.messages(task.task_id)
                   if m.kind == "tool_result"]
        assert "<status>rejected</status>" in results[-1] and "human_approval" in results[-1]
        assert _orders(world, agent_id) == 0
        assert world.agents.approvals.all()[0].decision == "refused"

    _run(tmp_path, provider, body, '[approval]\nabove_quote = "1000"\n')


def test_provider_failure_faults_the_agent_with_the_reason(tmp_path: Path) -> None:
    provider = ScriptedProvider([TemporaryLLMError("openai-compatible", "server unreachable")])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "hello")
        await settle(world)
        agent = world.agents.store.get(agent_id)
        assert agent.state is AgentState.FAULTED
        assert "server unreachable" in (agent.fault_reason or "")
        assert world.agents.queue.get(task.task_id).status is TaskStatus.FAILED

    _run(tmp_path, provider, body)


def test_paused_agent_stops_between_steps_and_finishes_after_resume(tmp_path: Path) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider([TICKER, "Done after resume."])

    async def body(world: World, agent_id: str) -> None:
        original = provider.complete

        async def slow(request, on_delta=None):  # noqa: ANN001, ANN202
            response = await original(request, on_delta)
            await gate.wait()
            return response

        provider.complete = slow  # type: ignore[method-assign]
        task = world.agents.manager.send_user_message(agent_id, "work")
        await asyncio.sleep(0.05)
        await world.agents.manager.control(agent_id, "pause")
        gate.set()
        await settle(world)
        assert world.agents.queue.get(task.task_id).status is TaskStatus.TAKEN
        assert len(provider.requests) == 1
        await world.agents.manager.control(agent_id, "resume")
        await settle(world)
        assert world.agents.queue.get(task.task_id).result == "Done after resume."

    _run(tmp_path, provider, body)


def test_every_call_is_stored_with_tokens_and_streamed_pieces(tmp_path: Path) -> None:
    provider = ScriptedProvider([TICKER, "ok"])

    async def body(world: World, agent_id: str) -> None:
        pieces: list[AnswerStreamed] = []
        world.bus.subscribe(AnswerStreamed, pieces.append)
        task = world.agents.manager.send_user_message(agent_id, "price?")
        await settle(world)
        usage = world.agents.conversations.usage(task_id=task.task_id)
        asked = sum(prompt_size(r) for r in provider.requests)
        assert usage.calls == 2 and usage.input_tokens == asked and usage.output_tokens == 200
        assert usage.cost > 0
        assert "".join(p.delta for p in pieces if p.step == 1) == TICKER
        assert _kinds(world, task.task_id) == [
            "task", "assistant", "tool_result", "final"]

    _run(tmp_path, provider, body)


def test_a_fenced_call_with_a_sentence_runs_and_the_transcript_says_what_was_normalised(
    tmp_path: Path,
) -> None:
    answer = f"Let me check the price first.\n\n```xml\n{TICKER}\n```"
    provider = ScriptedProvider([answer, "Price noted."])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "what is the price?")
        await settle(world)
        assert world.agents.queue.get(task.task_id).result == "Price noted."
        messages = world.agents.conversations.messages(task.task_id)
        assert [m.kind for m in messages] == [
            "task", "commentary", "normalised", "assistant", "tool_result", "final"
        ]
        by_kind = {m.kind: m for m in messages}
        assert by_kind["commentary"].content == "Let me check the price first."
        assert by_kind["commentary"].role == "assistant"
        assert by_kind["normalised"].content == (
            "accepted: code fence removed; text before the call kept as commentary"
        )
        assert by_kind["assistant"].content == answer  # what the model wrote, unchanged
        assert "<status>success</status>" in by_kind["tool_result"].content
        # neither the commentary nor the note is sent again: the answer already holds them
        last = provider.requests[-1].messages
        assert [m.role for m in last] == ["user", "assistant", "user"]
        assert last[1].content == answer

    _run(tmp_path, provider, body)


def test_a_journal_entry_with_raw_ampersand_and_less_than_is_written_as_meant(
    tmp_path: Path,
) -> None:
    note = "RSI < 30 & rising; stop < 42,100"
    provider = ScriptedProvider([
        f"<log_journal_entry><content>{note}</content></log_journal_entry>", "Logged.",
    ])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "note the setup")
        await settle(world)
        assert world.agents.queue.get(task.task_id).result == "Logged."
        kinds = _kinds(world, task.task_id)
        assert kinds == ["task", "normalised", "assistant", "tool_result", "final"]
        memory = world.memory
        (entry,) = [f for f in memory.list_files(agent_id, "journal")]
        assert note in memory.read_file(agent_id, entry.path).data.decode("utf-8")

    _run(tmp_path, provider, body)


def test_an_order_quoted_again_in_the_same_task_is_not_placed_twice(tmp_path: Path) -> None:
    # a model that ends its task by quoting the order it placed, in prose, must not buy twice
    quoted = "Done, I placed it:\n```xml\n" + _order("0.01").split("</thinking>")[1] + "\n```"
    provider = ScriptedProvider([_order("0.01"), quoted, "Bought once."])

    async def body(world: World, agent_id: str) -> None:
        task = world.agents.manager.send_user_message(agent_id, "buy 0.01 BTC")
        await settle(world)
        assert world.agents.queue.get(task.task_id).status is TaskStatus.DONE
        assert _orders(world, agent_id) == 1
        results = [m.content for m in world.agents.conversations.messages(task.task_id)
                   if m.kind == "tool_result"]
        assert "<status>success</status>" in results[0]
        assert "INVALID_ORDER" in results[1] and "already placed exactly this order" in results[1]

    _run(tmp_path, provider, body)


def test_a_second_identical_order_with_its_own_client_id_is_placed(tmp_path: Path) -> None:
    again = _order("0.01").replace(
        "<reason>", "<client_order_id>second-leg</client_order_id><reason>")
    provider = ScriptedProvider([_order("0.01"), again, "Bought twice, on purpose."])

    async def body(world: World, agent_id: str) -> None:
        world.agents.manager.send_user_message(agent_id, "buy 0.01 BTC, twice")
        await settle(world)
        assert _orders(world, agent_id) == 2

    _run(tmp_path, provider, body)


def test_work_waiting_for_a_paused_agent_leaves_the_world_idle_until_it_resumes(
    tmp_path: Path,
) -> None:
    """What a backtest waits for before it moves the clock on: a running agent's queued work,
    never a paused or deleted one's (which would hold the clock forever)."""
    provider = ScriptedProvider(["Done."])

    async def body(world: World, agent_id: str) -> None:
        manager, store = world.agents.manager, world.agents.store
        await manager.control(agent_id, "pause")
        assert store.state(agent_id) is AgentState.PAUSED
        assert agent_id not in store.ids_in_state(AgentState.RUNNING)
        task = manager.send_user_message(agent_id, "work")
        await settle(world)
        assert manager.idle() and world.agents.queue.get(task.task_id).status is TaskStatus.QUEUED
        await manager.control(agent_id, "resume")
        assert store.ids_in_state(AgentState.RUNNING) == [agent_id]
        assert not manager.idle()  # its task is waiting for it now
        await manager.wait_idle()
        assert world.agents.queue.get(task.task_id).result == "Done."
        store.delete(agent_id)
        assert store.state(agent_id) is None and store.ids_in_state(AgentState.RUNNING) == []

    _run(tmp_path, provider, body)
