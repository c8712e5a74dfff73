"""The chat panel of the main window: talk to the Orchestrator (or any agent) and watch it work.

``ChatPanel`` is the widget; the modules beside it hold its parts: ``entries`` and ``builder``
turn stored protocol messages into cards' data (Qt-free), ``reader`` reads history off the loop,
``cards`` and ``bubbles`` draw them, ``transcript`` scrolls them, ``header`` and ``composer`` are
the top and bottom of the panel, ``style`` its look.
"""

from app.ui.chat.panel import ChatPanel

__all__ = ["ChatPanel"]
