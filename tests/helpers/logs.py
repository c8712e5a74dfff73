"""Hand the next test the root logger as this one found it.

Why: the app configures the root logger as the process it normally owns (a console handler on the
stderr of the moment, the level); in a test process that stderr is a capture that is closed after
the test, and a later warning written to it fails with "I/O operation on closed file".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def kept_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
