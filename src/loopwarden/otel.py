"""Loop events in OpenTelemetry: each warning, block and stop on the current span.

When the application has configured an OpenTelemetry SDK, :class:`~loopwarden.LoopGuard` hands
every loop event to :func:`emit`: it becomes an event named ``loopwarden.loop`` on the span
that is current when the guard decides (the tool's span, or the agent's), or, when no span is
recording, a log record (with a logger provider set) or else a short span of its own (with
only a tracer provider set: a hook or proxy process has no span of its own to attach to).

The attributes follow the GenAI semantic conventions where they name the thing
(``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.agent.id``, ``gen_ai.conversation.id``)
and ``loopwarden.*`` for the rest (action, level, detector, count, ...). Like every loop event
they carry names, hashes and counts, never raw arguments or results.

The guard imports this module only when the application has already imported
``opentelemetry``, so a process without OpenTelemetry pays nothing.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterable
from typing import Any

from loopwarden.core._lazylog import get_logger
from loopwarden.events import LoopEvent

EVENT_NAME = "loopwarden.loop"
"""The name of the span event (and log record event) every loop event becomes."""

SCOPE = "loopwarden"

logger = get_logger("loopwarden.otel")

# Environment variables by which a loopwarden process (a hook, the MCP proxy) is told to export.
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def attributes(event: LoopEvent) -> dict[str, str | int]:
    """The OpenTelemetry attributes of a loop event (GenAI conventions, then ``loopwarden.*``)."""
    found: dict[str, str | int | None] = {
        "gen_ai.tool.name": event.tool_name,
        "gen_ai.tool.call.id": event.tool_call_id,
        "gen_ai.agent.id": event.agent_id,
        "gen_ai.conversation.id": event.session,
        "loopwarden.event": event.type,
        "loopwarden.action": event.action,
        "loopwarden.level": event.level,
        "loopwarden.detector": event.detector,
        "loopwarden.count": event.count,
        "loopwarden.run_id": event.run_id,
        "loopwarden.paired_tool_name": event.paired_tool_name,
        "loopwarden.args_hash": event.args_hash,
        "loopwarden.message": event.message,
    }
    return {key: value for key, value in found.items() if value is not None}


def emit(events: Iterable[LoopEvent]) -> None:
    """Hand loop events to the configured OpenTelemetry SDK; nothing when none is configured.

    Failures are logged, never raised: telemetry never breaks the agent's tool call.
    """
    global _provider
    if _export_on_event and _provider is None:
        _provider = configure_from_environment() or False
    if not ("opentelemetry.trace" in sys.modules or "opentelemetry._logs" in sys.modules):
        return  # nothing configured it, and loopwarden is not to either
    try:
        _emit(events)
    except Exception:
        logger.exception("loopwarden could not emit loop events to OpenTelemetry")


def _emit(events: Iterable[LoopEvent]) -> None:
    from opentelemetry import trace

    for event in events:
        attrs = attributes(event)
        timestamp = int(event.timestamp * 1e9) if event.timestamp else None
        span = _current_span(trace.get_current_span())
        if span is not None:
            span.add_event(EVENT_NAME, attrs, timestamp)
        elif not _log(event, attrs, timestamp):
            _span_of_its_own(event, attrs, timestamp)


def _current_span(span: Any) -> Any:
    """The recording span the event belongs on, or None.

    OpenInference's LangChain instrumentation keeps its spans out of the OpenTelemetry context
    (they follow LangChain's callbacks), and says which one is current itself.
    """
    if span.is_recording():
        return span
    langchain = sys.modules.get("openinference.instrumentation.langchain")
    found = getattr(langchain, "get_current_span", None)
    span = found() if found is not None else None
    return span if span is not None and span.is_recording() else None


def _configured(provider: object) -> bool:
    """A provider an SDK set (the API's defaults are proxies and no-ops)."""
    name = type(provider).__name__
    return not (name.startswith("Proxy") or name.startswith("NoOp"))


def _log(event: LoopEvent, attrs: dict[str, str | int], timestamp: int | None) -> bool:
    """Emit the event as a log record when a logger provider is set; False when none is."""
    if "opentelemetry._logs" not in sys.modules:
        return False  # logs are not configured where their API was never imported
    from opentelemetry import _logs

    if not _configured(_logs.get_logger_provider()):
        return False
    severity = _logs.SeverityNumber.WARN if event.action == "warn" else _logs.SeverityNumber.ERROR
    _logs.get_logger(SCOPE).emit(
        timestamp=timestamp,
        severity_number=severity,
        severity_text=severity.name,
        body=event.message,
        attributes=attrs,
        event_name=EVENT_NAME,
    )
    return True


def _span_of_its_own(event: LoopEvent, attrs: dict[str, str | int], timestamp: int | None) -> None:
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if not _configured(provider):
        return
    tracer = provider.get_tracer(SCOPE)
    span = tracer.start_span(f"loopwarden {event.action} {event.tool_name}", start_time=timestamp)
    span.set_attributes(attrs)
    span.add_event(EVENT_NAME, attrs, timestamp)
    span.end(end_time=timestamp)


# -- loopwarden's own processes ------------------------------------------------------------


_export_on_event = False
_provider: Any = None  # the provider this process set up (False: it could not)


def export_requested() -> bool:
    """Whether the environment names an OTLP endpoint (a string check: nothing is imported)."""
    return any(os.environ.get(name) for name in _ENDPOINT_VARIABLES)


def export_from_environment() -> None:
    """In loopwarden's own processes: export loop events if ``OTEL_EXPORTER_OTLP_*`` says where.

    Nothing is imported now: the SDK is set up at the first loop event (most hook processes
    have none), and flushed when the process exits.
    """
    global _export_on_event
    _export_on_event = export_requested()


def configure_from_environment() -> Any:
    """Set up an SDK tracer provider exporting over OTLP/HTTP, as the ``OTEL_*`` variables say.

    For loopwarden's own processes (a coding-CLI hook, the MCP proxy), which have no
    application to configure OpenTelemetry for them. Needs ``opentelemetry-sdk`` and
    ``opentelemetry-exporter-otlp-proto-http``; without them it logs why and returns None.
    Returns the provider: call its ``shutdown()`` before the process exits to flush.
    """
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        logger.warning(
            "an OTLP endpoint is set but loopwarden cannot export (%s); install "
            "opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http",
            exc,
        )
        return None
    service = os.environ.get("OTEL_SERVICE_NAME", "loopwarden")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)  # a hook process lives for one event: flush on exit
    return provider
