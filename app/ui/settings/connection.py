""""Test connection": one tiny real request to the configured LLM, one test e-mail over SMTP.

Why real requests: a settings page that says "saved" proves nothing; the person wants to know the
URL, model and key work together before an agent depends on them. Both checks are coroutines (the
LLM SDKs are async; ``EmailNotifier`` sends from a worker thread), so the dialog stays responsive,
and both return a ``CheckResult`` carrying the provider's or server's exact words on failure.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from app.agents.llm.factory import build_provider
from app.agents.llm.port import ChatMessage, LLMError, LLMRequest
from app.config.email import EmailSettings
from app.domain.agents import Channel, DeliveryStatus, Notification, Urgency
from app.orchestration.email_channel import EmailNotifier

NOT_AN_LLM = ("template", "rule-engine")
TEST_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class CheckResult:
    ok: bool
    message: str
    latency_ms: float | None = None


async def test_llm(
    kind: str, *, model: str, base_url: str, api_key: str | None, timeout_s: float = TEST_TIMEOUT_S
) -> CheckResult:
    """Build the provider and ask for a one-word answer; report latency or the exact error."""
    if kind in NOT_AN_LLM:
        return CheckResult(True, "The built-in rule engine (not an LLM) needs no connection.")
    if not model:
        return CheckResult(False, "Enter a model name first (e.g. gpt-4o-mini or llama3.1).")
    try:
        provider = build_provider(
            kind, model=model, base_url=base_url or None, api_key=api_key,
            timeout_s=timeout_s, max_retries=0, stream=False,
        )
    except LLMError as exc:
        return CheckResult(False, str(exc))
    request = LLMRequest(
        agent_id="settings", task_id=f"connection-test-{uuid.uuid4().hex[:8]}", model=model,
        system="You are a connection test. Answer with the single word OK.",
        messages=[ChatMessage("user", "Reply with OK.")], max_output_tokens=8,
        temperature=0.0, timeout_s=timeout_s,
    )
    started = time.perf_counter()
    try:
        response = await provider.complete(request)
    except LLMError as exc:
        return CheckResult(False, str(exc))
    finally:
        await provider.aclose()
    latency = (time.perf_counter() - started) * 1000
    answer = " ".join(response.text.split())[:60] or "(empty answer)"
    return CheckResult(
        True,
        f"Connected to {response.provider} model {response.model} in {latency:,.0f} ms; "
        f"it answered {answer!r}.",
        latency,
    )


async def send_test_email(settings: EmailSettings, password: str | None) -> CheckResult:
    """Send one test message through ``EmailNotifier``; the server's own reason on failure."""
    notifier = EmailNotifier(settings, lambda: password)
    note = Notification(
        notification_id=f"test-{uuid.uuid4().hex[:8]}", agent_id="settings",
        channels=(Channel.EMAIL,), message="This is a test message from Kestrel's Settings. "
        "If you can read it, e-mail notifications work.", subject="Test message",
        urgency=Urgency.LOW, created_ms=int(time.time() * 1000),
    )
    started = time.perf_counter()
    status = await notifier.send(note)  # never raises: a failure is a FAILED status
    latency = (time.perf_counter() - started) * 1000
    if status.delivery_status is DeliveryStatus.SUCCESS:
        return CheckResult(
            True, f"Sent to {', '.join(settings.recipients)} in {latency:,.0f} ms.", latency
        )
    return CheckResult(False, f"Not sent: {status.message_id_or_error}")
