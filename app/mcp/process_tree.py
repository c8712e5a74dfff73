"""The keeper of one MCP server's process tree: whatever the server starts ends with it.

Why a process of its own: a server is someone else's code, and it may leave processes behind the
way a daemon does: fork twice (the middle process exits, so the grandchild is orphaned and nobody
that started it is its parent any more) and ``setsid`` (so it is out of the server's process
group, which Kestrel ends at close). Nothing Kestrel can look up afterwards links such a process
to the server. And when Kestrel itself is killed (``kill -9``, a crash, the machine's OOM killer)
none of its own code runs to end anything.

So on Linux Kestrel starts each stdio server through a keeper (``keep_command``): a small
process, stdlib only, that

- marks itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a process orphaned
  anywhere below it is re-parented to the keeper, not to init, so every process the server
  started, double-forked and ``setsid`` ones included, stays a descendant of the keeper;
- starts the server on the standard streams it was given (Kestrel's pipes) and closes its own
  copies of stdin and stdout;
- waits until the server exits, Kestrel asks it to stop (SIGTERM, SIGINT or SIGHUP), or Kestrel
  is gone (its parent pid changes: checked every ``WATCH_S``);
- then ends every descendant (``end_descendants``: found in ``/proc``, SIGTERM, ``GRACE_S`` to
  exit, then SIGKILL) and exits with the server's code (128 + the signal's number when a signal
  ended it).

``GRACE_S`` is shorter than the transport's wait between SIGTERM and SIGKILL, so the keeper is
done before Kestrel kills its process group. A pid is signalled a few milliseconds after it was
read from ``/proc``; a process that exited and whose pid was given to another in between would be
signalled wrongly, which the kernel's sequential pid allocation makes practically impossible.

Elsewhere (macOS, Windows: no subreaper, no ``/proc``) the server is started directly and the
transport ends its process group, as before. In the packaged app ``sys.executable`` is Kestrel
itself, which runs the keeper when its first argument is ``KEEPER_FLAG`` (``app/__main__.py``).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

KEEPER_FLAG = "--mcp-process-keeper"
GRACE_S = 1.0  # a descendant's time to exit after SIGTERM
WATCH_S = 0.2  # how often the keeper checks that Kestrel is still there
POLL_S = 0.02  # while waiting for descendants to exit
KILL_ROUNDS = 50  # SIGKILL rounds at most: a process forking as fast as it is killed still ends
EXIT_NOT_STARTED = 127  # the shell's code for a command that could not be run
_PR_SET_CHILD_SUBREAPER = 36


def supported() -> bool:
    """The keeper needs Linux: a child subreaper and ``/proc``."""
    return sys.platform.startswith("linux") and Path("/proc/self/stat").exists()


def keep_command(command: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The command line that starts ``command`` under a keeper (``command`` itself where the
    keeper is not supported).

    Raises:
        FileNotFoundError: the program is not found on the ``PATH`` of ``env``, as starting it
            directly would raise (the keeper would only say so on its stderr, later).
    """
    command = list(command)
    if not supported():
        return command
    if shutil.which(command[0], path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command[0])
    if getattr(sys, "frozen", False):
        return [sys.executable, KEEPER_FLAG, "--", *command]
    # by path, isolated (-I): the server's environment (PYTHONPATH...) must not change the keeper
    return [sys.executable, "-I", str(Path(__file__).resolve()), "--", *command]


# -- the process tree, as /proc shows it --------------------------------------------------------


def _stat(pid: str) -> tuple[int, str] | None:
    """The parent pid and state of a process (None: it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), fields[0]


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (zombies excluded: they have exited already)."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(entry.name)
        if stat is not None:
            pid = int(entry.name)
            children.setdefault(stat[0], []).append(pid)
            states[pid] = stat[1]
    found: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if states.get(pid) not in ("Z", "X"):
            found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _signal(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass  # exited meanwhile (or became another user's: not ours to end)


def reap(statuses: dict[int, int]) -> None:
    """Collect every exited child (re-parented orphans too), keeping each wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        statuses[pid] = status


def end_descendants(statuses: dict[int, int], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM every descendant of this process, give them ``grace_s`` to exit, SIGKILL the rest
    (again and again while new ones appear). Returns the pids that had to be killed."""
    me = os.getpid()
    _signal(descendants(me), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while True:
        reap(statuses)
        left = descendants(me)
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    killed: list[int] = []
    for _ in range(KILL_ROUNDS):
        if not left:
            break
        _signal(left, signal.SIGKILL)
        killed.extend(left)
        time.sleep(POLL_S)
        reap(statuses)
        left = descendants(me)
    return killed


# -- the keeper -----------------------------------------------------------------------------------


def _become_subreaper() -> bool:
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        answer: int = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        return answer == 0
    except (OSError, AttributeError):
        return False


def _detach_standard_streams() -> None:
    """The server holds Kestrel's pipes now; the keeper's copies would keep its stdout open after
    the server ended (Kestrel reads its end until every writer is gone). stderr stays: what the
    keeper has to say goes where the server's stderr goes."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)


def _exit_code(status: int | None) -> int:
    if status is None:
        return 128 + signal.SIGKILL  # never seen: it ended with the rest
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


def main(argv: Sequence[str]) -> int:
    """``keeper -- COMMAND [ARGS...]``: run the command as described in the module docstring."""
    arguments = list(argv)
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    if not arguments:
        sys.stderr.write("kestrel MCP keeper: no command to start\n")
        return EXIT_NOT_STARTED
    _become_subreaper()  # without it, descendants that left the tree are not found (still ends
    # the rest, and the transport ends the process group)
    kestrel = os.getppid()
    watched = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)  # taken by sigtimedwait below, not lost
    try:
        server = os.posix_spawnp(
            arguments[0], arguments, dict(os.environ),
            setsigmask=(),  # the server starts with no signal blocked ...
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),  # ... and none ignored that Python ignores
        )
    except OSError as exc:
        sys.stderr.write(f"kestrel could not start the MCP server {arguments[0]!r}: {exc}\n")
        return EXIT_NOT_STARTED
    _detach_standard_streams()
    statuses: dict[int, int] = {}
    while True:
        reap(statuses)
        if server in statuses or os.getppid() != kestrel:
            break
        received = signal.sigtimedwait(watched, WATCH_S)
        if received is not None and received.si_signo != signal.SIGCHLD:
            break
    end_descendants(statuses)
    return _exit_code(statuses.get(server))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
