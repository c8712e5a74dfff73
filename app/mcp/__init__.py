"""MCP (Model Context Protocol): external servers' tools for the agents, and Kestrel's own tools
served to external agents (``kestrel mcp-serve``).

Nothing here imports the ``mcp`` SDK at module level except the modules that talk the protocol
(``servers``, ``serve``), which are imported only when a server is configured or served, so the
app's start-up never pays for the SDK.
"""
