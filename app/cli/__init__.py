"""The headless commands: ``kestrel`` and ``python -m app`` (``app.cli.main``).

Each command module declares its arguments and its handler; they build their world with
``app.runtime`` and print what happened. Nothing below this package imports it.
"""
