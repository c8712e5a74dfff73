"""Kestrel: LLM agents that analyse crypto markets and trade through one fixed, audited toolset."""

__version__ = "0.1.0"
