"""Agent memory: one sandboxed folder per agent, journal, notes and full-text recall.

``MemoryBank`` is the entry point; ``roles`` holds the documented file layouts of the Trader and
Analyst roles. See ``bank.py`` for the design (atomic writes, per-file locks, market-time recall).
"""

from app.memory.bank import FileContent, FileInfo, MemoryBank, MemoryLimits, WriteOutcome
from app.memory.index import Hit

__all__ = ["FileContent", "FileInfo", "Hit", "MemoryBank", "MemoryLimits", "WriteOutcome"]
