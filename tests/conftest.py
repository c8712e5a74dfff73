"""Test-wide settings: Qt offscreen, and no test may touch the person's real workspace."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
