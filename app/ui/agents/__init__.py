"""The agent list of the main window: agents, their lifecycle controls, P&L and scheduled jobs.

``AgentsPanel`` is what the main window docks; ``CreateAgentDialog`` and ``ConfigForm`` (a form
generated from a template's config schema) are exported for anything else that creates agents.
"""

from app.ui.agents.config_form import ConfigForm
from app.ui.agents.create_dialog import CreateAgentDialog
from app.ui.agents.panel import AgentsPanel

__all__ = ["AgentsPanel", "ConfigForm", "CreateAgentDialog"]
