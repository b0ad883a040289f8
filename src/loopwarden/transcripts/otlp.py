"""OpenTelemetry traces (OTLP JSON): the tool-call spans of each trace, one run per trace.

The OpenTelemetry collector's file exporter writes one ``{"resourceSpans": [...]}`` object per
line (``resourceSpans`` → ``scopeSpans`` → ``spans``); a whole document of that shape reads the
same. A span is a tool call when it follows either convention:

- GenAI: ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``;
- OpenInference: ``openinference.span.kind = TOOL``, ``tool.name``, ``input.value``,
  ``output.value`` (a LangChain ``ToolMessage`` serialised there is read back to its content).

Arguments that hold a JSON value are parsed; a span whose status is an error is a failed call.
loopwarden's own event on a call's span (``loopwarden.loop``) says what the guard did there: a
blocked or stopped call never ran, and a warning appended to the result is taken off it.
A trace's spans may arrive over many lines (batches): they are gathered per ``traceId`` and
ordered by start time. Traces without tool spans are not runs and are left out. A model call's
span (GenAI ``chat``, OpenInference ``LLM``) gives its tokens to the first tool call after it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import iter_lines, load_json, open_text, usage_of, warn_read
from loopwarden.transcripts._shapes import otlp_export as looks_like
from loopwarden.transcripts.model import MISSING, ToolCall, Trajectory, TranscriptError, Usage

FORMAT = "otlp"

_ERROR_CODES = (2, "STATUS_CODE_ERROR")
_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


def read(path: Path, doc: Any = None) -> Iterator[Trajectory]:
    """One trajectory per trace that has tool-call spans, in order of each trace's first call."""
    exports = [doc] if doc is not None else list(_exports(path))
    traces: dict[str, list[tuple[int, ToolCall | _Response]]] = {}
    unrecorded: list[ToolCall] = []  # tool spans without arguments
    for export in exports:
        for trace_id, start, item in _spans(export, path, unrecorded):
            traces.setdefault(trace_id, []).append((start, item))
    if unrecorded:
        calls = sum(isinstance(item, ToolCall) for items in traces.values() for _, item in items)
        warn_read(
            f"{path}: {len(unrecorded)} of {calls} tool spans record no arguments, so calls to "
            "one tool all look alike and a repeat cannot be told from progress; turn on the "
            "instrumentation's content capture (for Google ADK: "
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY)"
        )
    runs = [
        (trace_id, sorted(items, key=lambda pair: pair[0]))
        for trace_id, items in traces.items()
        if any(isinstance(item, ToolCall) for _, item in items)
    ]
    runs.sort(key=lambda run: run[1][0][0])
    for trace_id, items in runs:
        yield _trajectory(path, trace_id, [item for _, item in items])


@dataclass(frozen=True, slots=True)
class _Response:
    """A model call's span (GenAI ``chat``, OpenInference ``LLM``): its model and tokens."""

    model: str | None
    usage: Usage | None


def _trajectory(path: Path, trace_id: str, items: list[ToolCall | _Response]) -> Trajectory:
    """The trace's calls in order; a model response's tokens go on the first call after it."""
    trajectory = Trajectory(id=trace_id, source=str(path), format=FORMAT)
    pending: Usage | None = None
    for item in items:
        if isinstance(item, _Response):
            pending = item.usage
            trajectory.model = item.model or trajectory.model
        else:
            item.usage, pending = pending, None
            trajectory.items.append(item)
    return trajectory


def _exports(path: Path) -> Iterator[Any]:
    """The export objects of a file: one per line, or the one document it holds."""
    with open_text(path) as handle:
        lines = [(number, raw) for number, raw in iter_lines(handle, path) if raw.strip()]
    try:
        parsed = [(number, json.loads(raw)) for number, raw in lines]
    except json.JSONDecodeError:
        yield load_json(path)  # pretty-printed: one document over many lines
        return
    for number, obj in parsed:
        if not looks_like(obj):
            raise TranscriptError(str(path), "not an OTLP traces object (no resourceSpans)", number)
        yield obj


def _spans(
    export: Any, path: Path, unrecorded: list[ToolCall]
) -> Iterator[tuple[str, int, ToolCall | _Response]]:
    if not looks_like(export):
        raise TranscriptError(str(path), "not an OTLP traces export (no resourceSpans)")
    for resource in export["resourceSpans"]:
        scopes = _list(resource, "scopeSpans") or _list(resource, "instrumentationLibrarySpans")
        for scope in scopes:
            for span in _list(scope, "spans"):
                found = _tool_call(span, unrecorded) or _response(span)
                if found is not None:
                    yield str(span.get("traceId", "")), *found


def _response(span: Any) -> tuple[int, _Response] | None:
    """A model call's span with what it cost (GenAI or OpenInference token counts)."""
    if not isinstance(span, dict):
        return None
    attrs = attributes(_list(span, "attributes"))
    if attrs.get("openinference.span.kind") == "LLM":
        usage = usage_of(
            attrs.get("llm.token_count.prompt"),
            attrs.get("llm.token_count.completion"),
            attrs.get("llm.token_count.prompt_details.cache_read"),
        )
        model = attrs.get("llm.model_name")
    elif attrs.get("gen_ai.operation.name") in _MODEL_OPERATIONS:
        usage = usage_of(
            attrs.get("gen_ai.usage.input_tokens"),
            attrs.get("gen_ai.usage.output_tokens"),
            attrs.get("gen_ai.usage.cache_read.input_tokens"),
        )
        model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
    else:
        return None
    name = model if isinstance(model, str) else None
    return _int(span.get("startTimeUnixNano")), _Response(name, usage)


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def _tool_call(span: Any, unrecorded: list[ToolCall]) -> tuple[int, ToolCall] | None:
    """The call a span records, with its start time (ns); None for a span that is no tool call."""
    if not isinstance(span, dict):
        return None
    attrs = attributes(_list(span, "attributes"))
    if "loopwarden.action" in attrs:
        return None  # loopwarden's own span for a loop event, not a call
    if attrs.get("gen_ai.operation.name") == "execute_tool":
        name, args = attrs.get("gen_ai.tool.name"), attrs.get("gen_ai.tool.call.arguments")
        output = attrs.get("gen_ai.tool.call.result", MISSING)
    elif attrs.get("openinference.span.kind") == "TOOL":
        name, args = attrs.get("tool.name"), attrs.get("input.value")
        output = _langchain_content(attrs.get("output.value", MISSING))
    else:
        return None
    start = _int(span.get("startTimeUnixNano"))
    call = ToolCall(
        tool=str(name or span.get("name") or ""),
        params=_parsed(args),
        tool_call_id=_text(attrs.get("gen_ai.tool.call.id")) or _text(span.get("spanId")),
        at=start / 1e9 if start else None,
    )
    status = span.get("status")
    if isinstance(status, dict) and status.get("code") in _ERROR_CODES:
        call.error = str(status.get("message") or "error")
    if output is not MISSING:
        call.result = output
    if args is None:
        unrecorded.append(call)
    _own_answer(call, span)
    return start, call


def _own_answer(call: ToolCall, span: dict[str, Any]) -> None:
    """What loopwarden itself did to the call, read from its event on the call's span.

    A block or stop: the call never ran (its error is the guard's refusal), as in a session
    log of a CLI with loopwarden's hook. A warning: the adapters append it to the result the
    model sees, which instrumentation records; it is not the tool's output, and an identical
    result must not look different on replay.
    """
    for event in _list(span, "events"):
        if not isinstance(event, dict) or event.get("name") != "loopwarden.loop":
            continue
        attrs = attributes(_list(event, "attributes"))
        message = attrs.get("loopwarden.message")
        if attrs.get("loopwarden.action") in ("block", "stop"):
            call.refused = True
            call.result, call.error = MISSING, None
        elif isinstance(message, str) and isinstance(call.result, str):
            call.result = _without_warning(call.result, message)


# Where the Google ADK plugin and the MCP proxy put a warning in a structured result.
_WARNING_KEY = "loopwarden_warning"


def _without_warning(result: str, message: str) -> str:
    """``result`` without the guard's warning ``message``: appended to a text after a blank
    line (most adapters), or as the last key of a JSON object (Google ADK's plugin)."""
    if result == message:
        return ""
    if result.endswith("\n\n" + message):
        return result[: -len(message) - 2]
    try:
        value = json.loads(result)
    except json.JSONDecodeError:
        return result
    if not isinstance(value, dict) or value.get(_WARNING_KEY) != message:
        return result
    # Cut the key out of the text, so the rest stays exactly as recorded; kept only when it
    # reads back to the object without the key (the key was last).
    head = result[: result.rfind(f'"{_WARNING_KEY}"')].rstrip()
    cut = (head[:-1] if head.endswith(",") else head).rstrip() + "}"
    del value[_WARNING_KEY]
    try:
        return cut if json.loads(cut) == value else result
    except json.JSONDecodeError:
        return result


def attributes(items: Iterable[Any]) -> dict[str, Any]:
    """OTLP JSON ``[{key, value: {stringValue | intValue | ...}}]`` as a plain dict."""
    found: dict[str, Any] = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            found[item["key"]] = _value(item.get("value"))
    return found


def _value(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return _int(value["intValue"])  # int64 is a string in OTLP JSON
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_value(v) for v in _list(value["arrayValue"], "values")]
    if "kvlistValue" in value:
        return attributes(_list(value["kvlistValue"], "values"))
    return value.get("bytesValue")


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _parsed(args: Any) -> Any:
    """Arguments as recorded: a JSON text is read to its value, anything else kept as it is."""
    if args is None:
        return {}
    if isinstance(args, str):
        try:
            return json.loads(args)
        except json.JSONDecodeError:
            return args
    return args


def _langchain_content(output: Any) -> Any:
    """A LangChain ``ToolMessage`` serialised into ``output.value``: its content; else as is.

    The message's ids differ on every call, its content is what the tool returned.
    """
    if not isinstance(output, str) or not output.startswith("{"):
        return output
    try:
        message = json.loads(output)
    except json.JSONDecodeError:
        return output
    data = message.get("data") if isinstance(message, dict) else None
    if message.get("type") == "tool" and isinstance(data, dict) and "content" in data:
        return data["content"]
    return output
