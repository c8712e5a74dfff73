"""Entry point for ``python -m app``: the same as the ``kestrel`` console script."""

import sys

from app.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
