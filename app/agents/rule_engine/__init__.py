"""The built-in rule engine: deterministic, documented policies that speak the XML tool protocol.

It is the offline default, the baseline every LLM agent is compared with, and what the tests use.
It is labelled as what it is (``is_llm = False``) everywhere a person sees it.
"""
