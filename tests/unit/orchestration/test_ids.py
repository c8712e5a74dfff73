"""Ids: random ones never repeat; seeded ones repeat exactly, so a replayed run names alike."""

from __future__ import annotations

import threading
import uuid

from app.orchestration.ids import RandomIds, SeededIds, keyed_id


def test_random_ids_are_uuid4_and_distinct() -> None:
    factory = RandomIds()
    made = [factory.new() for _ in range(1000)]
    assert len(set(made)) == 1000
    assert all(uuid.UUID(i).version == 4 for i in made)


def test_the_same_seed_gives_the_same_ids_in_the_same_order() -> None:
    first, second = SeededIds("run-7"), SeededIds("run-7")
    a = [first.new() for _ in range(50)]
    assert a == [second.new() for _ in range(50)]
    assert len(set(a)) == 50
    assert all(uuid.UUID(i).version == 5 and len(i) == 36 for i in a)


def test_a_different_seed_gives_different_ids() -> None:
    assert SeededIds("a").new() != SeededIds("b").new()
    assert SeededIds(1).new() == SeededIds("1").new()


def test_a_seeded_sequence_can_be_continued_from_where_it_stopped() -> None:
    whole = SeededIds("s")
    ids = [whole.new() for _ in range(5)]
    assert SeededIds("s", start=3).new() == ids[3]


def test_seeded_ids_shared_between_threads_never_repeat() -> None:
    factory = SeededIds("threads")
    made: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        local = [factory.new() for _ in range(500)]
        with lock:
            made.extend(local)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 2000
    reference = SeededIds("threads")
    assert set(made) == {reference.new() for _ in range(2000)}


def test_a_call_key_always_maps_to_the_same_id() -> None:
    assert keyed_id("task-1:3") == keyed_id("task-1:3")
    assert keyed_id("task-1:3") != keyed_id("task-1:4")
