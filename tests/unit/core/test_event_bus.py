"""The event bus delivers to every subscriber even when one of them fails."""

import asyncio
import dataclasses

import pytest

from app.events import Event, EventBus, MemoryFileChanged


def test_a_failing_subscriber_does_not_stop_the_others():
    bus = EventBus()
    seen: list[str] = []

    def broken(event: MemoryFileChanged) -> None:
        raise RuntimeError("boom")

    async def slow(event: MemoryFileChanged) -> None:
        await asyncio.sleep(0)
        seen.append(f"async:{event.path}")

    bus.subscribe(MemoryFileChanged, broken)
    bus.subscribe(MemoryFileChanged, lambda e: seen.append(f"sync:{e.path}"))
    bus.subscribe(MemoryFileChanged, slow)
    asyncio.run(bus.publish(MemoryFileChanged("a1", "notes/x.md", "written")))
    assert seen == ["sync:notes/x.md", "async:notes/x.md"]


def test_subscribers_to_a_base_type_receive_every_event():
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(Event, seen.append)
    event = MemoryFileChanged("a1", "journal/2019-01-01.md", "appended")
    asyncio.run(bus.publish(event))
    assert seen == [event]


def test_publish_nowait_runs_async_subscribers_as_tasks():
    bus = EventBus()
    seen: list[str] = []

    async def handler(event: MemoryFileChanged) -> None:
        seen.append(event.kind)

    async def main() -> None:
        bus.subscribe(MemoryFileChanged, handler)
        bus.publish_nowait(MemoryFileChanged("a", "p", "created"))
        await bus.drain()

    asyncio.run(main())
    assert seen == ["created"]


def test_events_are_immutable():
    event = MemoryFileChanged("a", "p", "created")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.path = "q"  # type: ignore[misc]


def test_unsubscribed_handlers_receive_nothing():
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(MemoryFileChanged, seen.append)
    bus.unsubscribe(MemoryFileChanged, seen.append)
    asyncio.run(bus.publish(MemoryFileChanged("a", "p", "created")))
    assert seen == []
