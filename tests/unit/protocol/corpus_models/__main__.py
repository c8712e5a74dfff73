"""Print the corpus report for this checkout: ``python -m tests.unit.protocol.corpus_models``.

Used to measure the parser of another checkout (the base of a change) against the same corpus:
copy this folder into that checkout's ``tests/unit/protocol/`` and run it from there.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.unit.protocol.corpus_models import mismatch, run_corpus


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        pairs, report = run_corpus(Path(folder))
    for line in report.lines():
        print(line)
    if "-v" in sys.argv:
        for output, got in pairs:
            problem = mismatch(output, got)
            if problem:
                print(f"differs from the expectation: {output.name}: {problem}")


if __name__ == "__main__":
    main()
