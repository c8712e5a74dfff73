"""Where a sweep's cells run: this machine's processes, or an existing Dask cluster.

Both run the same function (``app.sweep.cells.run_cell``) and yield each ``CellOutcome`` as it
finishes, in whatever order; the driver stores it. Nothing here writes to the sweep's folder.

Local processes are never forked from the driver: a fork copies whatever threads and locks the
driver holds (the progress bar's monitor thread, a logging lock mid-write). On Linux they are
forked from a *fork server*, a clean process started once per driver that has imported the
backtest's modules (pandas, matplotlib, the store) before any worker exists, so a worker starts in
milliseconds instead of the second or two a fresh interpreter spends importing them; that
matters for short cells, and for the fresh pools a dying worker forces. Elsewhere (macOS, Windows,
where forking a process that loaded system frameworks is unsafe) they are spawned. A worker
ignores Ctrl-C (the driver decides what an interruption means: it stops the pool and keeps what
finished) and ends itself when the driver dies, even by ``kill -9`` (the fork server ends with
the driver, so its workers see their parent go), so no cell goes on computing for nobody.

The Dask cluster is optional (``pip install 'kestrel[cluster]'``). Each distinct data file is
sent once to the cluster (``scatter``) and each cell refers to it; the cell's report comes back
as bytes. So the workers need the same Kestrel installed, and nothing else: no shared folder.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from app.domain.errors import OperationalError
from app.sweep.cells import CellOutcome, CellTask, run_cell

CLUSTER_EXTRA = "pip install 'kestrel[cluster]'"


class ClusterUnavailable(OperationalError):
    """The Dask cluster cannot be used (not installed, unreachable, workers without Kestrel)."""


class Executor(Protocol):
    label: str
    workers: int

    def run(self, tasks: Sequence[CellTask], blobs: Mapping[str, bytes]) -> Iterator[CellOutcome]:
        """Run every task; yield each outcome as it finishes."""
        ...

    def close(self) -> None:
        """Stop at once: cells not finished are dropped (a resumed sweep runs them)."""
        ...


def default_workers() -> int:
    """The processors this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _their_data(task: CellTask, blobs: Mapping[str, Any]) -> dict[str, Any]:
    return {digest: blobs[digest] for _name, digest in task.files}


def failed(task: CellTask, error: str) -> CellOutcome:
    return CellOutcome(task.cell_id, {"cell": task.cell_id, "status": "failed", "error": error},
                       b"")


class InProcess:
    """Cells one after another in this very process: what a person running the cells one by one
    would get, without a process to start (the benchmark's baseline, and a sweep small enough
    not to need one)."""

    workers = 1
    label = "this process, one cell at a time"

    def run(self, tasks: Sequence[CellTask], blobs: Mapping[str, bytes]) -> Iterator[CellOutcome]:
        for task in tasks:
            yield run_cell(task, _their_data(task, blobs))

    def close(self) -> None:
        pass


# -- local processes ----------------------------------------------------------------------------
# what every cell imports, loaded once by the fork server rather than by each worker
PRELOAD = ["app.sweep.cells", "app.runtime.strategy_backtest", "app.runtime.agent_backtest",
           "app.backtest.report", "app.store.db", "sqlite_utils", "matplotlib.figure",
           "matplotlib.dates", "matplotlib.backends.backend_agg"]


def worker_context() -> Any:
    """How local workers are started: forked from a preloaded fork server on Linux, spawned
    elsewhere."""
    if sys.platform.startswith("linux"):
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)  # no effect once this process's server runs
        return context
    return multiprocessing.get_context("spawn")


def _worker_started(driver: int) -> None:
    """In each local worker: leave Ctrl-C to the driver, and end when the driver is gone.

    The parent is the driver (spawned) or the fork server, which ends when the driver does;
    either way the parent going means the driver went. The driver's own process is watched too,
    for a driver that died before this worker looked at its parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def gone() -> bool:
        if os.getppid() != parent:  # re-parented
            return True
        try:
            os.kill(driver, 0)
        except ProcessLookupError:
            return True
        except OSError:  # there, but not ours to signal
            return False
        return False

    def watch() -> None:
        while not gone():
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="driver-watch", daemon=True).start()


class LocalPool:
    """Cells on ``workers`` local processes.

    A worker that dies in a cell (killed, out of memory, a crash in native code) breaks the
    whole pool in ``concurrent.futures``, and does not say which cell it was running. So the
    cells that could have been running then (the first ``workers + 1`` unfinished ones, in the
    order they were handed out) run again one at a time on a fresh pool: the one that kills its
    worker again is recorded as failed, the others finish, and the rest go on in parallel.
    """

    def __init__(self, workers: int | None = None, *,
                 function: Callable[[CellTask, Mapping[str, bytes]], CellOutcome] = run_cell
                 ) -> None:
        """``function`` runs one cell in a worker (``run_cell``; a test gives one that dies)."""
        self.function = function
        self.workers = max(1, workers or default_workers())
        self.label = f"{self.workers} local process{'es' if self.workers != 1 else ''}"
        self._pool: ProcessPoolExecutor | None = None

    def _fresh(self, workers: int) -> ProcessPoolExecutor:
        self._shutdown()
        self._pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=worker_context(), initializer=_worker_started,
            initargs=(os.getpid(),),
        )
        return self._pool

    def run(self, tasks: Sequence[CellTask], blobs: Mapping[str, bytes]) -> Iterator[CellOutcome]:
        queue = list(tasks)
        while queue:
            try:
                yield from self._parallel(queue, blobs)
            except BrokenProcessPool:
                suspects = queue[:self.workers + 1]
                for task in suspects:
                    queue.remove(task)
                    yield self._alone(task, blobs)

    def _parallel(self, queue: list[CellTask], blobs: Mapping[str, bytes]
                  ) -> Iterator[CellOutcome]:
        pool = self._fresh(self.workers)
        futures: dict[Future[CellOutcome], CellTask] = {
            pool.submit(self.function, task, _their_data(task, blobs)): task
            for task in queue}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                outcome = future.result()  # BrokenProcessPool goes to ``run``
                queue.remove(futures[future])
                yield outcome

    def _alone(self, task: CellTask, blobs: Mapping[str, bytes]) -> CellOutcome:
        pool = self._fresh(1)
        try:
            return pool.submit(self.function, task, _their_data(task, blobs)).result()
        except BrokenProcessPool:
            return failed(task, "its worker process died while running it (killed, out of "
                                "memory, or a crash in native code), twice")

    def _shutdown(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())  # no public handle in 3.12
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with contextlib.suppress(Exception):
                process.kill()
        for process in processes:
            with contextlib.suppress(Exception):
                process.join(timeout=5)

    def close(self) -> None:
        self._shutdown()


# -- a Dask cluster -----------------------------------------------------------------------------
def require_dask() -> None:
    """Refuse ``--cluster`` at once, before the sweep's folder is made, where dask.distributed
    is not installed.

    Raises:
        ClusterUnavailable: saying what to install.
    """
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ClusterUnavailable(
            f"--cluster needs dask.distributed, which is not installed here: {CLUSTER_EXTRA} "
            "(the workers need it too); without --cluster the sweep runs on this machine's "
            "processes (--workers N)") from None


def worker_version() -> str:
    """Runs on each Dask worker: the Kestrel it has (checked before any cell is sent)."""
    from app import __version__

    return __version__


class DaskCluster:
    """Cells on an existing Dask cluster (``tcp://HOST:8786``), through ``dask.distributed``.

    Raises (when made):
        ClusterUnavailable: dask.distributed is not installed, the scheduler cannot be
            reached, it has no worker, or its workers cannot run this Kestrel's cells.
    """

    def __init__(self, address: str, *, timeout_s: float = 10.0) -> None:
        require_dask()
        from distributed import Client

        from app import __version__

        try:
            self.client = Client(address, timeout=f"{timeout_s}s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailable(
                f"cannot reach the Dask scheduler at {address}: {exc}. Start one (dask "
                "scheduler; dask worker ADDRESS on each machine) or check the address") from None
        try:
            self.client.wait_for_workers(1, timeout=timeout_s)
            versions = self.client.run(worker_version)
        except (OSError, TimeoutError) as exc:
            self.client.close()
            raise ClusterUnavailable(
                f"the Dask cluster at {address} has no worker ready ({exc})") from None
        except Exception as exc:  # noqa: BLE001 - a worker that cannot import Kestrel
            self.client.close()
            raise ClusterUnavailable(
                f"the workers of {address} cannot run Kestrel's cells ({type(exc).__name__}: "
                f"{exc}); install this Kestrel on every worker ({CLUSTER_EXTRA})") from None
        other = {w: v for w, v in versions.items() if v != __version__}
        if other:
            self.client.close()
            worker, version = next(iter(other.items()))
            raise ClusterUnavailable(
                f"the worker {worker} runs Kestrel {version}, this machine {__version__}: a "
                "sweep's cells must run the same Kestrel everywhere")
        self.workers = len(versions)
        self.label = f"the Dask cluster at {address} ({self.workers} worker" \
                     f"{'s' if self.workers != 1 else ''})"
        self._futures: list[Any] = []

    def run(self, tasks: Sequence[CellTask], blobs: Mapping[str, bytes]) -> Iterator[CellOutcome]:
        from distributed import as_completed

        needed = {digest for task in tasks for _name, digest in task.files}
        # each file once to the cluster, not once per cell
        sent = {digest: self.client.scatter(blobs[digest], hash=False) for digest in needed}
        run = uuid.uuid4().hex[:8]
        futures = {}
        for task in tasks:
            future = self.client.submit(run_cell, task, _their_data(task, sent), pure=False,
                                        key=f"kestrel-cell-{task.cell_id}-{run}")
            futures[future.key] = task
            self._futures.append(future)
        for future in as_completed(list(self._futures), loop=self.client.loop):
            task = futures[future.key]
            try:
                outcome = future.result()
            except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: that cell failed
                outcome = failed(task, f"the cluster could not run it: {type(exc).__name__}: "
                                       f"{exc}")
            future.release()
            yield outcome
        self._futures.clear()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._futures:
                self.client.cancel(self._futures)
        self._futures.clear()
        with contextlib.suppress(Exception):
            self.client.close()
