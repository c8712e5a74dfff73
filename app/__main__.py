"""Entry point for ``python -m app``: the same as the ``kestrel`` console script.

In the packaged app this is also how an MCP server's process keeper runs (``sys.executable`` is
Kestrel itself there): ``kestrel --mcp-process-keeper -- COMMAND...`` (``app.mcp.process_tree``).
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--mcp-process-keeper"]:
        from app.mcp.process_tree import main as keep

        sys.exit(keep(sys.argv[2:]))
    from app.cli.main import main

    sys.exit(main())
