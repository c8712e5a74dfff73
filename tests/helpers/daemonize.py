"""A process that leaves its parent behind as a daemon does, for the MCP process-tree tests.

``python tests/helpers/daemonize.py PID_FILE [--setsid]``: forks and exits, so the first child is
orphaned; that child (with ``--setsid``, in a new session and process group of its own) forks
again and exits, so the grandchild is orphaned too and belongs to nobody that started it. The
grandchild writes its pid to ``PID_FILE`` (atomically: a temporary file, then a rename) and
sleeps for five minutes. Standard streams go to /dev/null, as a daemon's do.
"""

from __future__ import annotations

import os
import sys
import time


def main(pid_file: str, new_session: bool) -> None:
    if os.fork() > 0:
        os._exit(0)  # the caller reaps this one at once
    if new_session:
        os.setsid()  # out of the caller's process group and session
    if os.fork() > 0:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    temporary = pid_file + ".tmp"
    with open(temporary, "w", encoding="ascii") as handle:
        handle.write(str(os.getpid()))
    os.replace(temporary, pid_file)
    time.sleep(300)


if __name__ == "__main__":
    main(sys.argv[1], "--setsid" in sys.argv[2:])
