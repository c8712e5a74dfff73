"""Build the provider an agent uses from its settings: one place that knows every provider kind.

Why: the runtime, the CLI and the backtest all turn (kind, model, URL, key) into an
``LLMProvider``; configuration mistakes (an unknown kind, a missing key, a replay without a
recording) are found here, before an agent starts, and explained as ``PermanentLLMError``.
"""

from __future__ import annotations

from pathlib import Path

from app.agents.llm.limits import shared_limiter
from app.agents.llm.port import LLMProvider, PermanentLLMError
from app.agents.llm.replay import RecordingProvider, ReplayProvider

KINDS = ("openai-compatible", "anthropic", "replay", "rule-engine")
OPENAI_BASE_URL = "https://api.openai.com/v1"
_KEY_HELP = (
    "store it in the OS keyring under the name given in settings ([llm] api_key_name), "
    "or set the environment variable KESTREL_<NAME> for that name"
)


def build_provider(
    kind: str,
    *,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 120,
    max_retries: int = 3,
    stream: bool = True,
    replay_path: Path | None = None,
    rule_engine: LLMProvider | None = None,
    record_path: Path | None = None,
    key_help: str | None = None,
    share_limits: bool = False,
) -> LLMProvider:
    """The provider for ``kind``.

    Args:
        kind: "openai-compatible", "anthropic", "replay" or "rule-engine".
        model: the default model of the provider.
        base_url: OpenAI-compatible server (default OpenAI's); Anthropic's own when ``None``.
        api_key: the key; optional for an OpenAI-compatible server other than OpenAI's own.
        replay_path: the recording a "replay" provider answers from.
        rule_engine: the rule-engine provider object, returned as is for "rule-engine".
        record_path: when given, the provider is wrapped in a ``RecordingProvider`` writing here.
        key_help: what to do when the key is missing, for the key's own name on this machine
            (``SecretStore.how_to_set``); a general explanation when not given.
        share_limits: pace the provider with every other provider of the same endpoint (kind,
            server, key) built so on this event loop: one Retry-After holds them all
            (``app.agents.llm.limits.shared_limiter``; needs a running loop).

    Raises:
        PermanentLLMError: unknown kind or missing configuration, with what to do.
    """
    provider: LLMProvider
    # each SDK is imported only when its provider is built: anthropic alone takes ~1.7 s to
    # import, which the window's cold start and every CLI command would otherwise pay
    if kind == "openai-compatible":
        from app.agents.llm.openai_compat import OpenAICompatibleProvider

        url = base_url or OPENAI_BASE_URL
        if not api_key and url.rstrip("/") == OPENAI_BASE_URL:
            raise PermanentLLMError(kind, f"no API key for OpenAI: {key_help or _KEY_HELP}")
        provider = OpenAICompatibleProvider(
            url, api_key, default_model=model, timeout_s=timeout_s, max_retries=max_retries,
            stream=stream, limiter=shared_limiter(kind, url, api_key) if share_limits else None,
        )
    elif kind == "anthropic":
        from app.agents.llm.anthropic_provider import DEFAULT_BASE_URL, AnthropicProvider

        if not api_key:
            raise PermanentLLMError(kind, f"no API key for Anthropic: {key_help or _KEY_HELP}")
        limiter = (shared_limiter(kind, base_url or DEFAULT_BASE_URL, api_key) if share_limits
                   else None)
        provider = AnthropicProvider(
            api_key, base_url=base_url, default_model=model, timeout_s=timeout_s,
            max_retries=max_retries, stream=stream, limiter=limiter,
        )
    elif kind == "replay":
        if replay_path is None:
            raise PermanentLLMError(kind, "a replay needs the path of a recording to play back")
        provider = ReplayProvider(replay_path)
    elif kind == "rule-engine":
        if rule_engine is None:
            raise PermanentLLMError(kind, "the rule engine was not provided to build_provider")
        provider = rule_engine
    else:
        raise PermanentLLMError(
            kind or "(empty)", f"unknown provider kind {kind!r}; known: {', '.join(KINDS)}")
    if record_path is not None:
        return RecordingProvider(provider, record_path)
    return provider
