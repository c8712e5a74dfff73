"""Test-wide settings: Qt offscreen, no test may touch the person's real workspace, and no test's
secrets or logging set-up outlive it."""

import gc
import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Property tests take their number of cases from a profile. "ci" (the default) is sized so the whole
# suite stays a few minutes on a small machine, draws the same cases every run (a hundred random
# ones would sometimes miss a limit the Risk Guard's test checks was reached) and leaves nothing in
# the checkout (no example database: a failure prints the blob that reproduces it); "thorough"
# runs the long, freshly random searches, e.g. before a release or after changing the Risk Guard:
#     KESTREL_HYPOTHESIS=thorough pytest tests/unit
settings.register_profile("ci", max_examples=100, derandomize=True, database=None,
                          print_blob=True)
settings.register_profile("thorough", max_examples=1_000)
settings.load_profile(os.environ.get("KESTREL_HYPOTHESIS", "ci"))


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` starts one worker more than there are cores: about a third of the suite's
    time is spent waiting (on ``kestrel`` subprocesses, local servers, Qt's timers), and the
    extra worker runs tests meanwhile (2 cores: 6 min 44 s -> 6 min 6 s). Where
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` is set, it decides, as pytest-xdist documents."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    if hasattr(os, "sched_getaffinity"):  # the cores this process may use (Linux)
        return len(os.sched_getaffinity(0)) + 1
    return (os.cpu_count() or 1) + 1


def pytest_sessionstart(session: pytest.Session) -> None:
    """No cyclic garbage collection while the test modules load: rewriting their asserts makes
    millions of short-lived objects, and each collection pass would walk every module already
    imported (a fresh checkout's collection: 16 s -> 11.5 s a process, the same memory)."""
    gc.disable()


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the test modules loaded (every module, class and function of the app, its SDKs and
    the tests) lives as long as the process: frozen, it is left out of every later collection,
    so the full collections the Qt tests make at each set-up and tear-down walk only what the
    tests made (0.23 s -> a few ms each)."""
    gc.freeze()
    gc.enable()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Test files with a slow test run first. The workers are handed whole files in this order,
    so a file of long tests handed out last keeps one worker busy while the others wait idle;
    the many short files at the end fill the gaps instead. The order within a file is kept."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(autouse=True)
def _secrets_learnt_in_a_test_are_forgotten_after_it() -> Iterator[None]:
    """The redactor is process-wide: a key typed in one test (``typed-kestrel_telegram_...``)
    would redact the word TELEGRAM in every later test."""
    from app.redaction import REDACTOR

    known = REDACTOR.known()
    yield
    REDACTOR.restore(known)


@pytest.fixture(autouse=True)
def _exchange_pauses_do_not_outlive_a_test() -> Iterator[None]:
    """The exchanges' gates are process-wide: a ban one test provoked would hold the requests
    of every later test (fixtures of the fake exchange reset them on its fake time)."""
    from app.ccxt.gate import GATES

    GATES.reset()
    yield
    GATES.reset()


@pytest.fixture(autouse=True)
def _logging_set_up_in_a_test_is_undone_after_it() -> Iterator[None]:
    """Code under test configures the root logger as if it owned the process (see
    ``tests.helpers.logs``)."""
    from tests.helpers.logs import kept_logging

    with kept_logging():
        yield
