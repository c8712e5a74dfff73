"""Dockable panels of the main window: the memory browser, the account and the tool-call audit.

Each panel takes its services in the constructor, subscribes to the event bus itself, and offers
an ``async refresh()`` the main window may call (after the replay clock advances, say).
"""

from app.ui.panels.account_panel import AccountPanel
from app.ui.panels.audit_panel import AuditPanel
from app.ui.panels.memory_browser import MemoryBrowser
from app.ui.panels.mode_badge import ModeBadge

__all__ = ["AccountPanel", "AuditPanel", "MemoryBrowser", "ModeBadge"]
