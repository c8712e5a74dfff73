"""The Telegram bot end to end: python-telegram-bot over real HTTP against a local fake Bot API,
a real agent world (rule-engine agents, the replayed market, SQLite in a temp workspace).

A person's Telegram is played by pushing updates into the fake server; what the bot answers is
read back from what the server received. Nothing here mocks the library or the world.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.config.telegram import BOT_TOKEN_KEY, NotifyModes, TelegramSettings
from app.domain.agents import AgentRole, AgentState, Channel, DeliveryStatus, QuestionKind
from app.orchestration.ids import RandomIds
from app.redaction import MARKER
from app.runtime.world import World
from app.secrets import SecretStore, env_var_name
from app.telegram import format as fmt
from app.telegram.bot import BotState, TelegramBot
from app.telegram.check import send_test_message
from app.telegram.outbox import Outbox
from app.telegram.request import RequestBounds
from app.telegram.start import start_telegram
from app.tools.spec import AgentContext
from tests.helpers.agents import SETUP_COMMAND, advance_hours, agent_world, settle
from tests.helpers.eventually import PATIENCE_S, eventually, eventually_blocking
from tests.helpers.fake_telegram import ENDLESS_CAP_BYTES, FakeTelegram, Sent

OWNER = 4242
STRANGER = 31337
GROUP = -1001234
TRADER = "TraderAgent_Default_v1"


def fast_outbox(send: Any) -> Outbox:
    return Outbox(send, first_delay_s=0.2, max_delay_s=0.5)


@pytest.fixture
def server() -> Any:
    with FakeTelegram() as fake:
        yield fake


@asynccontextmanager
async def telegram(
    world: World, server: FakeTelegram, *, kill_switch: Any = None,
    request_bounds: RequestBounds | None = None, **settings: Any
) -> AsyncIterator[TelegramBot]:
    values: dict[str, Any] = {"enabled": True, "allowed_user_ids": (OWNER,),
                              "api_base_url": server.base_url, **settings}
    secrets = SecretStore(environ={env_var_name(BOT_TOKEN_KEY): server.token})
    bot = await start_telegram(world, TelegramSettings(**values), secrets,
                               kill_switch=kill_switch, poll_timeout_s=1.0, outbox=fast_outbox,
                               request_bounds=request_bounds)
    assert bot is not None
    assert await bot.wait_connected(PATIENCE_S), bot.fault_reason
    try:
        yield bot
    finally:
        await bot.aclose()


@asynccontextmanager
async def running(folder: Path, settings_toml: str = "", **kwargs: Any) -> AsyncIterator[
        World]:
    if settings_toml:
        (folder / "settings.toml").write_text(settings_toml, encoding="utf-8")
    world = agent_world(folder, **kwargs)
    try:
        await world.start()
        yield world
    finally:
        await world.aclose()


async def ask(server: FakeTelegram, text: str, *, chat: int = OWNER, user: int = OWNER) -> str:
    """Write ``text`` and return the bot's next message in that chat."""
    before = len(server.in_chat(chat))
    server.push_text(user, chat, text)
    await eventually(lambda: len(server.in_chat(chat)) > before)
    return server.in_chat(chat)[before]


def with_buttons(server: FakeTelegram, chat: int = OWNER) -> list[Sent]:
    return [s for s in server.sent if s.chat_id == chat and s.buttons]


async def signal_trader(world: World) -> str:
    """A Trader and a BUY signal for it: its order is placed (or held for approval)."""
    trader = await world.agents.manager.create_agent(TRADER, "T", {"symbols": ["BTC/USDT"]})
    price = await world.venue.broker.last_price("BTC/USDT")
    world.agents.queue.enqueue(trader.agent_id, "NEW_MARKET_ANALYSIS_SIGNAL", {
        "symbol": "BTC/USDT", "side": "BUY", "confidence": "0.8", "price": str(price),
        "stop_loss": str((price * Decimal("0.98")).quantize(Decimal("0.01"))),
        "take_profit": str((price * Decimal("1.04")).quantize(Decimal("0.01"))),
        "reason": "test signal"}, "agent:analyst-1")
    await settle(world)
    return trader.agent_id


def orders_of(world: World, agent_id: str) -> list[Any]:
    return [r.order for r in world.ledger.load().orders if r.order.agent_id == agent_id]


# -- who may command ---------------------------------------------------------------------------

def test_a_strangers_commands_do_nothing_and_each_refusal_is_logged(
    tmp_path: Path, server: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server) as bot:
            world.agents.manager.send_user_message(
                (await world.ensure_orchestrator()).agent_id, SETUP_COMMAND)
            await settle(world)
            before = {a.agent_id: a.state for a in world.agents.manager.list_agents()}
            assert set(before.values()) == {AgentState.RUNNING}
            with caplog.at_level(logging.WARNING, logger="app.telegram.auth"):
                server.push_text(STRANGER, STRANGER, "/stop_all", username="mallory")
                server.push_text(STRANGER, STRANGER, "sell everything", username="mallory")
                server.push_text(OWNER, GROUP, "/pause")  # the owner, in a chat not allowed
                answer = await ask(server, "/agents")
            assert answer.startswith("Agents: 3 (3 running)")
            assert {a.agent_id: a.state for a in world.agents.manager.list_agents()} == before
            assert server.in_chat(STRANGER) == [] and server.in_chat(GROUP) == []
            assert world.agents.queue.tasks(world.orchestrator().agent_id)[-1].payload.get(
                "text") != "sell everything"
            assert [r.sender.what for r in bot.gate.refusals] == [
                "/stop_all", "sell everything", "/pause"]
            refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
            assert len(refused) == 3
            assert "user 31337 (@mallory) in chat 31337" in refused[0]
            assert "chat -1001234 is not an allowed chat" in refused[2]
            assert "Refused Telegram senders since start: 3" in await ask(server, "/status")

    asyncio.run(scenario())


def test_commands_sent_while_kestrel_was_closed_are_dropped_not_executed(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world:
            world.agents.manager.send_user_message(
                (await world.ensure_orchestrator()).agent_id, SETUP_COMMAND)
            await settle(world)
            server.push_text(OWNER, OWNER, "/stop_all")  # while the bot was not running
            async with telegram(world, server):
                assert server.pending() == 0  # dropped when polling started
                # a message that arrives now but was written an hour ago (a delayed delivery)
                server.push_text(OWNER, OWNER, "/pause", date_s=time.time() - 3600)
                assert (await ask(server, "/agents")).startswith("Agents: 3 (3 running)")
            assert all(a.state is AgentState.RUNNING for a in world.agents.manager.list_agents())
            assert server.in_chat(OWNER)[0].startswith("Agents:")

    asyncio.run(scenario())


# -- the owner's commands ----------------------------------------------------------------------

def test_the_owners_account_commands_answer_with_the_accounts_real_data(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server):
            trader = await signal_trader(world)
            await advance_hours(world, 2)  # the order fills; the trader sets its TP/SL
            broker = world.venue.broker
            account = await broker.account()
            (position,) = await broker.positions()
            open_orders = await broker.open_orders()
            (fill,) = await broker.trades()
            assert open_orders, "the take-profit and stop-loss wait"

            status = await ask(server, "/status")
            assert f"Equity {fmt.money(account.equity, 'USDT')}" in status
            assert "Positions 1, open orders 2" in status and "Agents: 1 (1 running)" in status
            balance = await ask(server, "/balance")
            for asset in account.assets:
                assert f"{asset.currency}: {fmt.number(asset.total)}" in balance
            positions = await ask(server, "/positions")
            assert f"BTC/USDT: {fmt.number(position.size)} at avg cost " \
                   f"{fmt.number(position.avg_price)}" in positions
            orders = await ask(server, "/orders")
            for order in open_orders:
                assert f"id {order.order_id[:8]}" in orders
            assert "[take profit]" in orders and "[stop loss]" in orders
            trades = await ask(server, "/trades")
            assert f"BUY {fmt.number(fill.quantity)} BTC/USDT at {fmt.number(fill.price)}" \
                in trades and "· T" in trades
            agents = await ask(server, "/agents")
            assert "• T · trader · running · rule engine" in agents
            info = world.agents.store.get(trader)
            assert info.last_action in agents
            fill_alerts = [t for t in server.in_chat(OWNER) if t.startswith("✅ Order filled · T")]
            assert len(fill_alerts) == 1 and fmt.number(fill.price) in fill_alerts[0]

    asyncio.run(scenario())


def test_pause_and_resume_change_the_agents_state(tmp_path: Path, server: FakeTelegram) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server):
            world.agents.manager.send_user_message(
                (await world.ensure_orchestrator()).agent_id, SETUP_COMMAND)
            await settle(world)
            states = lambda: {a.state for a in world.agents.manager.list_agents()}  # noqa: E731
            assert (await ask(server, "/pause")).startswith("Paused 3 agent(s)")
            assert states() == {AgentState.PAUSED}
            trader = next(a for a in world.agents.manager.list_agents()
                          if a.role is AgentRole.TRADER)
            assert await ask(server, f"/resume {trader.name}") == f"Resumed {trader.name}."
            assert world.agents.store.get(trader.agent_id).state is AgentState.RUNNING
            assert (await ask(server, "/resume")).startswith("Resumed 2 agent(s)")
            assert states() == {AgentState.RUNNING}
            assert "no agent named 'Nobody'" in await ask(server, "/pause Nobody")
            assert (await ask(server, "/stop_all")).startswith("Stopped 3 agent(s)")
            assert states() == {AgentState.STOPPED}

    asyncio.run(scenario())


def test_plain_text_reaches_the_orchestrator_and_its_answer_comes_back(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server):
            server.push_text(OWNER, OWNER, SETUP_COMMAND)
            await eventually(lambda: world.orchestrator() is not None and world.agents.queue.tasks(
                world.orchestrator().agent_id))
            await settle(world)
            orchestrator = world.orchestrator()
            (task,) = world.agents.queue.tasks(orchestrator.agent_id)
            assert task.payload["text"] == SETUP_COMMAND and task.source == "user"
            finals = [m.content for m in world.agents.conversations.recent(orchestrator.agent_id)
                      if m.kind == "final"]
            assert finals
            await eventually(lambda: finals[-1].strip() in server.in_chat(OWNER))
            assert {a.role for a in world.agents.manager.list_agents()} == set(AgentRole)
            assert "sendChatAction" in server.methods()

    asyncio.run(scenario())


# -- questions and approvals -------------------------------------------------------------------

def test_a_clarification_arrives_with_buttons_and_the_answer_reaches_the_agent_after_a_restart(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def first_session() -> tuple[str, Sent]:
        async with running(tmp_path) as world, telegram(world, server):
            server.push_text(OWNER, OWNER, "watch BTC/USDT")
            await eventually(lambda: with_buttons(server))
            (question,) = world.agents.questions.pending()
            (message,) = with_buttons(server)
            assert question.text in message.text
            assert f"ref {fmt.ref(question.question_id)}" in message.text
            assert [row[0][0] for row in message.buttons] == list(question.suggested_replies)
            return question.question_id, message

    async def second_session(question_id: str, message: Sent) -> None:
        async with running(tmp_path, ids=RandomIds()) as world, telegram(world, server):
            orchestrator = world.orchestrator()
            assert orchestrator.state is AgentState.WAITING_FOR_USER
            label, data = message.buttons[0][0]
            server.push_button(OWNER, OWNER, message.message_id, data)
            await eventually(lambda: world.agents.questions.get(question_id).answer is not None)
            assert world.agents.questions.get(question_id).answer == label
            await settle(world)
            replies = [m.content for m in world.agents.conversations.messages(
                world.agents.questions.get(question_id).task_id) if m.kind == "user_reply"]
            assert replies == [label], "the waiting agent got the answer and went on"
            await eventually(lambda: "Answered: " + label in server.message(
                OWNER, message.message_id).text)
            assert server.message(OWNER, message.message_id).buttons == []
            await eventually(lambda: server.button_answers)
            assert server.button_answers[-1][1] == f"Sent: {label}"

    question_id, message = asyncio.run(first_session())
    asyncio.run(second_session(question_id, message))


APPROVAL = "[approval]\nabove_quote = 100\n"


def test_an_approval_from_the_owner_places_the_held_order(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path, APPROVAL) as world, telegram(world, server):
            trader = await signal_trader(world)
            assert orders_of(world, trader) == []
            await eventually(lambda: with_buttons(server))
            (message,) = with_buttons(server)
            assert message.text.startswith("🟡 Approval needed · T")
            assert "Order: BUY BTC/USDT MARKET" in message.text
            assert [[label for label, _ in row] for row in message.buttons] == [
                ["Approve", "Refuse"]]
            assert not message.silent
            server.push_button(OWNER, OWNER, message.message_id, message.buttons[0][0][1])
            await eventually(lambda: orders_of(world, trader))
            await settle(world)
            (order,) = orders_of(world, trader)
            assert order.side.value == "BUY" and order.symbol == "BTC/USDT"
            (record,) = world.agents.approvals.all()
            assert record.decision == "approved" and record.order_id == order.order_id
            await eventually(lambda: server.button_answers)
            assert server.button_answers[-1][1] == "Approved: the order goes to the broker."
            await eventually(lambda: server.message(OWNER, message.message_id).buttons == [])
            assert "Answered: Approve" in server.message(OWNER, message.message_id).text

    asyncio.run(scenario())


def test_an_expired_approval_button_does_nothing_and_approve_sends_fresh_ones(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path, APPROVAL) as world, telegram(
                world, server, approval_expiry_s=60) as _bot:
            trader = await signal_trader(world)
            await eventually(lambda: with_buttons(server))
            (message,) = with_buttons(server)
            assert "The buttons work for 1 min" in message.text
            server.age_message(OWNER, message.message_id, 61)
            server.push_button(OWNER, OWNER, message.message_id, message.buttons[0][0][1])
            await eventually(lambda: server.button_answers)
            assert "expired" in server.button_answers[-1][1]
            await settle(world)
            assert orders_of(world, trader) == []
            (question,) = world.agents.questions.pending()
            assert question.answer is None
            await eventually(lambda: server.message(OWNER, message.message_id).buttons == [])

            server.push_text(OWNER, OWNER, "/approve")
            await eventually(lambda: len(with_buttons(server)) == 1 and
                             with_buttons(server)[0].message_id != message.message_id)
            (fresh,) = with_buttons(server)
            assert fmt.ref(question.question_id) in fresh.text
            reply = await ask(server, f"/reject {fmt.ref(question.question_id)}")
            assert reply == f"Refused ({fmt.ref(question.question_id)}): the order is not placed."
            await settle(world)
            assert orders_of(world, trader) == []
            assert world.agents.approvals.all()[0].decision == "refused"
            assert "No order waits" in await ask(server, "/approve")

    asyncio.run(scenario())


# -- the kill switch ---------------------------------------------------------------------------

class RecordingKillSwitch:
    """Stands in for issue 16's kill switch: the bot's side of the interface only."""

    def __init__(self) -> None:
        self.trips: list[tuple[str, str]] = []

    def is_tripped(self) -> bool:
        return bool(self.trips)

    async def trip(self, reason: str, by: str) -> str | None:
        self.trips.append((reason, by))
        return "Every open order was cancelled."


def test_kill_asks_for_confirmation_then_trips_the_switch(
    tmp_path: Path, server: FakeTelegram
) -> None:
    switch = RecordingKillSwitch()

    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server, kill_switch=switch):
            prompt = await ask(server, "/kill")
            assert prompt.startswith("Trip the kill switch now?") and switch.trips == []
            (message,) = with_buttons(server)
            server.push_button(OWNER, OWNER, message.message_id, message.buttons[0][1][1])
            await eventually(lambda: server.message(OWNER, message.message_id).text ==
                             "Kill switch: cancelled.")
            assert switch.trips == [] and server.button_answers[-1][1] == "Cancelled."

            await ask(server, "/kill")
            message = with_buttons(server)[-1]
            server.push_button(OWNER, OWNER, message.message_id, message.buttons[0][0][1])
            await eventually(lambda: switch.trips)
            assert switch.trips == [("tripped from Telegram", "Telegram user 4242 (@owner)")]
            await eventually(lambda: server.message(OWNER, message.message_id).text ==
                             "Kill switch tripped. Every open order was cancelled.")
            assert "Kill switch: TRIPPED" in await ask(server, "/status")

    asyncio.run(scenario())


def test_kill_with_its_confirmation_button_trips_the_real_switch(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, \
                telegram(world, server, kill_switch=world.agents.kill_switch):
            trader = await signal_trader(world)
            await advance_hours(world, 2)  # the order fills; the trader sets its TP/SL
            price = await world.venue.broker.last_price("BTC/USDT")
            entry = await world.executor.execute_text(AgentContext(agent_id=trader), (
                "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT"
                f"</order_type><price>{(price * 95 / 100).quantize(1)}</price><quantity>0.002"
                "</quantity></create_order>"))
            assert entry is not None and entry.status == "success", entry
            assert "Kill switch: armed" in await ask(server, "/status")

            await ask(server, "/kill")
            message = with_buttons(server)[-1]
            server.push_button(OWNER, OWNER, message.message_id, message.buttons[0][0][1])
            await eventually(lambda: server.message(OWNER, message.message_id).text.startswith(
                "Kill switch tripped."))
            assert server.message(OWNER, message.message_id).text == (
                "Kill switch tripped. Cancelled 1 open order, kept 2 take-profit/stop-loss exits, "
                "paused 1 agent.")
            trip = world.agents.kill_switch.active()
            assert trip is not None and trip.by == "Telegram user 4242 (@owner)"
            assert trip.reason == "tripped from Telegram"
            assert world.agents.store.get(trader).state is AgentState.PAUSED
            assert len(await world.venue.broker.open_orders()) == 2  # the exits
            await eventually(lambda: any(t.startswith("🔔 Kestrel: kill switch tripped")
                                         for t in server.in_chat(OWNER)))
            assert "Kill switch: TRIPPED" in await ask(server, "/status")
            assert await ask(server, "/kill") == "The kill switch is already tripped."

    asyncio.run(scenario())


def test_kill_without_a_kill_switch_says_it_is_not_available(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server):
            answer = await ask(server, "/kill")
            assert answer == ("The kill switch is not available in this version. /stop_all "
                              "stops every agent.")
            assert with_buttons(server) == []

    asyncio.run(scenario())


# -- notifications -----------------------------------------------------------------------------

def test_notification_modes_silent_sends_without_sound_and_off_sends_nothing(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world:
            modes = NotifyModes(agent_messages="silent", daily_summary="off")
            async with telegram(world, server, notify=modes) as bot:
                sent = await world.agents.notifications.send(
                    "system", [Channel.TELEGRAM], "BTC crossed 9000", "Price alert")
                (status,) = sent.statuses
                assert status.delivery_status is DeliveryStatus.SUCCESS
                (message,) = server.sent
                assert message.text.startswith("🔔 Price alert\nBTC crossed 9000")
                assert message.silent
                assert await bot.alerts.send_summary() == []
            modes = NotifyModes(agent_messages="off", daily_summary="on")
            async with telegram(world, server, notify=modes) as bot:
                sent = await world.agents.notifications.send("system", [Channel.TELEGRAM], "again")
                (status,) = sent.statuses
                assert status.delivery_status is DeliveryStatus.FAILED
                assert "switched off" in status.message_id_or_error
                await asyncio.gather(*await bot.alerts.send_summary())
            assert len(server.sent) == 2
            summary = server.sent[1]
            assert summary.text.startswith("📊 Daily summary · PAPER") and not summary.silent
            # closed: the channel says so again instead of pretending to send
            sent = await world.agents.notifications.send("system", [Channel.TELEGRAM], "after")
            assert sent.statuses[0].delivery_status is DeliveryStatus.FAILED

    asyncio.run(scenario())


@pytest.mark.parametrize("failure", ["error", "drop"])
def test_a_network_drop_reconnects_and_what_was_said_meanwhile_arrives(
    tmp_path: Path, server: FakeTelegram, failure: str
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server) as bot:
            assert (await ask(server, "/agents")).startswith("Agents:")
            server.failing = failure
            await eventually(lambda: bot.poll_errors >= 2)
            during = asyncio.ensure_future(world.agents.notifications.send(
                "system", [Channel.TELEGRAM], "said during the outage"))
            await eventually(lambda: bot.outbox.failures >= 1)
            server.failing = None
            (status,) = (await during).statuses
            assert status.delivery_status in (DeliveryStatus.SUCCESS, DeliveryStatus.PENDING)
            await eventually(lambda: any("said during the outage" in t
                                         for t in server.in_chat(OWNER)))
            assert (await ask(server, "/status")).startswith("Kestrel · PAPER")
            assert bot.state is BotState.RUNNING

    asyncio.run(scenario())


def test_a_refused_token_faults_the_bot_with_the_reason_and_no_token_text(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world:
            wrong = "999:not-the-token-the-server-knows"
            settings = TelegramSettings(enabled=True, allowed_user_ids=(OWNER,),
                                        api_base_url=server.base_url)
            secrets = SecretStore(environ={env_var_name(BOT_TOKEN_KEY): wrong})
            bot = await start_telegram(world, settings, secrets, poll_timeout_s=1.0)
            assert bot is not None
            try:
                assert not await bot.wait_connected(10)
                assert bot.state is BotState.FAULTED
                assert "Telegram refused the bot token" in bot.fault_reason
                assert wrong not in bot.fault_reason
                sent = await world.agents.notifications.send("system", [Channel.TELEGRAM], "hi")
                assert sent.statuses[0].delivery_status is DeliveryStatus.FAILED
                assert "Telegram refused the bot token" in sent.statuses[0].message_id_or_error
            finally:
                await bot.aclose()

    asyncio.run(scenario())


def test_approval_questions_of_an_approval_kind_switched_off_still_answer_approve(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path, APPROVAL) as world, telegram(
                world, server, notify=NotifyModes(approvals="off")):
            trader = await signal_trader(world)
            (question,) = world.agents.questions.pending()
            assert question.kind is QuestionKind.APPROVAL
            assert with_buttons(server) == []  # off: not pushed
            answer = await ask(server, f"/approve {fmt.ref(question.question_id)}")
            assert answer == (f"Approved ({fmt.ref(question.question_id)}): the order goes to "
                              "the broker.")
            await settle(world)
            assert orders_of(world, trader)

    asyncio.run(scenario())


# -- not started -------------------------------------------------------------------------------

def test_with_telegram_off_or_without_a_token_no_bot_starts_and_the_channel_says_why(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world:
            assert await start_telegram(world, TelegramSettings(), SecretStore(environ={})) \
                is None
            sent = await world.agents.notifications.send("system", [Channel.TELEGRAM], "hello")
            assert sent.statuses[0].message_id_or_error == (
                "TELEGRAM is not configured: Telegram is off: turn it on and set the bot token "
                "in Settings > Telegram")
            on = TelegramSettings(enabled=True, allowed_user_ids=(OWNER,))
            from keyring.backends import fail

            assert await start_telegram(
                world, on, SecretStore(backend=fail.Keyring(), environ={})) is None
            sent = await world.agents.notifications.send("system", [Channel.TELEGRAM], "hello")
            assert sent.statuses[0].delivery_status is DeliveryStatus.FAILED
            assert "has no bot token" in sent.statuses[0].message_id_or_error
            assert "KESTREL_TELEGRAM_BOT_TOKEN" in sent.statuses[0].message_id_or_error

    asyncio.run(scenario())


@pytest.mark.slow
def test_kestrel_run_answers_on_telegram_while_it_runs(
    tmp_path: Path, server: FakeTelegram
) -> None:
    import os
    import subprocess
    import sys

    from tests.helpers.paths import REPO

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "settings.toml").write_text(
        f'[telegram]\nenabled = true\nallowed_user_ids = [{OWNER}]\n'
        f'api_base_url = "{server.base_url}"\n', encoding="utf-8")
    env = {**os.environ, env_var_name(BOT_TOKEN_KEY): server.token}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "run", "--workspace", str(workspace), "--for", "1h",
         "--speed", "600", "--setup", SETUP_COMMAND],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        eventually_blocking(
            lambda: "getUpdates" in server.methods() or process.poll() is not None)
        assert process.poll() is None, process.communicate()
        server.push_text(OWNER, OWNER, "/agents")
        eventually_blocking(lambda: any(t.startswith("Agents:") for t in server.in_chat(OWNER)))
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err.decode()[-2000:]
    assert server.token.encode() not in out + err
    answer = next(t for t in server.in_chat(OWNER) if t.startswith("Agents:"))
    assert "Orchestrator" in answer


def test_a_reply_in_the_persons_own_words_answers_the_question_it_replies_to(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path, APPROVAL) as world, telegram(
                world, server, approval_expiry_s=60):
            trader = await signal_trader(world)
            await eventually(lambda: with_buttons(server))
            (message,) = with_buttons(server)
            server.age_message(OWNER, message.message_id, 61)
            before = len(server.in_chat(OWNER))
            server.push_text(OWNER, OWNER, "yes", reply_to=message.message_id)
            await eventually(lambda: len(server.in_chat(OWNER)) > before)
            assert server.in_chat(OWNER)[before].startswith("That approval request has expired")
            (question,) = world.agents.questions.pending()
            server.age_message(OWNER, message.message_id, -61)
            before = len(server.in_chat(OWNER))
            server.push_text(OWNER, OWNER, "no, too big for today", reply_to=message.message_id)
            await eventually(lambda: len(server.in_chat(OWNER)) > before)
            assert server.in_chat(OWNER)[before] == "Answer sent to T."
            answered = world.agents.questions.get(question.question_id)
            assert answered.answer == "no, too big for today"
            await settle(world)
            assert orders_of(world, trader) == []
            assert world.agents.approvals.all()[0].decision == "refused"
            assert world.orchestrator() is None, "the reply was not sent to the Orchestrator"

    asyncio.run(scenario())


def test_telegram_down_at_start_holds_nothing_up_and_the_bot_connects_once_it_is_back(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world:
            server.failing = "drop"
            settings = TelegramSettings(enabled=True, allowed_user_ids=(OWNER,),
                                        api_base_url=server.base_url)
            secrets = SecretStore(environ={env_var_name(BOT_TOKEN_KEY): server.token})
            bot = await start_telegram(world, settings, secrets, poll_timeout_s=1.0)
            assert bot is not None
            try:
                # returned while Telegram is still down: the start waited for no connection
                assert bot.state is BotState.CONNECTING
                assert not await bot.wait_connected(0.5)
                assert bot.state is BotState.CONNECTING
                server.failing = None
                assert await bot.wait_connected(PATIENCE_S)
                assert (await ask(server, "/agents")).startswith("Agents:")
            finally:
                await bot.aclose()

    asyncio.run(scenario())


def test_a_secret_in_an_outgoing_text_is_masked(tmp_path: Path, server: FakeTelegram) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server):
            await world.agents.notifications.send(
                "system", [Channel.TELEGRAM], f"my token is {server.token}, keep it safe")
            await eventually(lambda: server.sent)
            (message,) = server.sent
            assert server.token not in message.text and f"my token is {MARKER}" in message.text

    asyncio.run(scenario())


# -- every answer from the Bot API is bounded --------------------------------------------------

# 1 MiB at most; a getUpdates of the tests' 1 s long poll must be complete within
# 1 (connect) + 1 (write) + 1 (pool) + 3 (read: 2, plus the poll's 1) = 6 s
SMALL = RequestBounds(max_answer_bytes=1024 * 1024, connect_timeout_s=1.0, write_timeout_s=1.0,
                      pool_timeout_s=1.0, read_timeout_s=2.0)


def test_an_endless_answer_to_a_poll_is_cut_at_the_size_bound_and_polling_goes_on(
    tmp_path: Path, server: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server, request_bounds=SMALL):
            with caplog.at_level(logging.WARNING, logger="app.telegram"):
                server.misbehave("getUpdates", "endless")
                await eventually(lambda: server.misbehaved)
                assert (await ask(server, "/help")).startswith(fmt.HELP[:40])
            assert ("Telegram: Telegram's answer to getUpdates passed 1,048,576 bytes (the largest "
                    "answer Kestrel reads); the connection was closed") in caplog.text
            assert server.misbehaved[0] < ENDLESS_CAP_BYTES, "the bot stopped reading"
            assert server.token not in caplog.text

    asyncio.run(scenario())


def test_an_answer_that_trickles_forever_is_cut_at_the_time_bound_and_polling_goes_on(
    tmp_path: Path, server: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server, request_bounds=SMALL):
            with caplog.at_level(logging.WARNING, logger="app.telegram"):
                server.misbehave("getUpdates", "trickle")
                await eventually(lambda: server.misbehaved and server.misbehaved[0] > 3)
                assert (await ask(server, "/help")).startswith(fmt.HELP[:40])
            assert ("Telegram: Telegram's answer to getUpdates was not complete within 6 s (the "
                    "time limit of one request); the connection was closed") in caplog.text

    asyncio.run(scenario())


def test_a_message_longer_than_telegrams_own_limit_is_not_read(
    tmp_path: Path, server: FakeTelegram
) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as world, telegram(world, server):
            text = "sell everything " + "x" * 5000
            answer = await ask(server, text)
            assert answer == ("That message is 5,016 characters long; Kestrel reads at most 4,096 "
                              "(Telegram's own limit), so it was not read. Send a shorter one.")
            orchestrator = world.orchestrator()
            tasks = [] if orchestrator is None else world.agents.queue.tasks(orchestrator.agent_id)
            assert all(task.payload.get("text") != text for task in tasks), "not read"
            assert (await ask(server, "/agents")).startswith("Agents:")

    asyncio.run(scenario())


def test_the_settings_test_message_reads_no_answer_past_the_bound(server: FakeTelegram) -> None:
    server.misbehave("getMe", "endless")
    settings = TelegramSettings(enabled=True, allowed_user_ids=(OWNER,),
                                api_base_url=server.base_url)
    outcome = asyncio.run(send_test_message(server.token, settings, SMALL))
    assert not outcome.ok
    assert outcome.message == ("Telegram said: Telegram's answer to getMe passed 1,048,576 bytes "
                               "(the largest answer Kestrel reads); the connection was closed.")
    assert server.misbehaved[0] < ENDLESS_CAP_BYTES
