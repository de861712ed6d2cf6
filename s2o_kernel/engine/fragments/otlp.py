"""A run trace as OpenTelemetry spans: OTLP JSON, and OTLP protobuf with the ``otel`` extra (SPEC 14).

:func:`to_otlp` turns the JSON form of a trace (:mod:`.trace`) into an OTLP/JSON export request
(``{"resourceSpans": [...]}``, the shape OTLP/HTTP receivers and files take), named after the OpenTelemetry
GenAI semantic conventions, so the trace opens in Phoenix, Langfuse or any OpenTelemetry back end:

* the run is ``invoke_agent {name}`` (``gen_ai.operation.name`` ``invoke_agent``, ``gen_ai.agent.name``);
* a model turn (an ``llm`` outside call) is ``chat {profile}``, a CLIENT span with ``gen_ai.operation.name``
  ``chat``, ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens`` and its price as OpenInference's
  ``llm.cost.total`` (US dollars; the GenAI conventions have no cost);
* a tool call the model made is ``execute_tool {name}`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``);
* an ``api``, ``db`` or ``ask`` call is a CLIENT span ``{kind} {profile}``; every other span INTERNAL, named
  ``{kind} {name}``.

Every span carries ``s2o.kind``, ``s2o.path`` (the JSON path in the fragment) and ``s2o.outcome``, and the
summaries the trace holds as ``s2o.*`` attributes (request, response, fields, wrote, …): content the trace
already cut and masked. A failed span has status ERROR with the error's code and message. Times are the run's
wall-clock start (``started``) plus each span's offset, in nanoseconds written as text (OTLP/JSON's 64-bit
integers). Ids are hexadecimal, as OTLP/JSON writes them, and derived from the trace itself, so the same trace
exports to the same file.

:func:`to_protobuf` encodes the same request as OTLP protobuf bytes through ``opentelemetry-proto`` (the
``otel`` extra); nothing else here needs OpenTelemetry packages.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from ..errors import S2OError

#: OTLP span kinds (``opentelemetry.proto.trace.v1.Span.SpanKind``) and status codes.
SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3
STATUS_OK, STATUS_ERROR = 1, 2

#: The instrumentation scope's name in the export.
SCOPE = "s2o-kernel"


def to_otlp(trace: dict[str, Any], service: str = "s2o-kernel") -> dict[str, Any]:
    """The OTLP/JSON export request of ``trace`` (the JSON form: ``{"schema": "s2o-trace", "root": …}``), under
    resource attribute ``service.name`` = ``service``. See the module doc for names and attributes."""
    digest = hashlib.sha256(json.dumps(trace, sort_keys=True).encode()).hexdigest()
    trace_id = digest[:32]
    origin = round(float(trace.get("started") or 0.0) * 1e9)
    out: list[dict[str, Any]] = []
    stack: list[tuple[dict[str, Any], str]] = [(trace["root"], "")]
    while stack:  # depth first, without recursion: a trace may nest as deep as the run did
        node, parent = stack.pop()
        span_id = hashlib.sha256(f"{digest}:{len(out)}".encode()).hexdigest()[:16]
        out.append(_span(node, trace_id, span_id, parent, origin))
        stack.extend((child, span_id) for child in reversed(node["spans"]))
    return {"resourceSpans": [{
        "resource": {"attributes": [_attribute("service.name", service)]},
        "scopeSpans": [{"scope": {"name": SCOPE}, "spans": out}]}]}


def _span(node: dict[str, Any], trace_id: str, span_id: str, parent: str, origin: int) -> dict[str, Any]:
    """One OTLP span of the trace's span ``node``."""
    kind, name = node["kind"], node["name"]
    attributes: dict[str, Any] = {"s2o.kind": kind, "s2o.path": node["path"], "s2o.outcome": node["outcome"]}
    span_kind = SPAN_KIND_INTERNAL
    if kind == "run":
        title = f"invoke_agent {name}"
        attributes |= {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    elif kind == "outside" and name == "llm":
        title, span_kind = f"chat {node.get('profile', '')}".rstrip(), SPAN_KIND_CLIENT
        attributes["gen_ai.operation.name"] = "chat"
        tokens = node.get("tokens")
        if tokens:
            attributes |= {"gen_ai.usage.input_tokens": tokens["input"], "gen_ai.usage.output_tokens": tokens["output"]}
        if "price" in node:
            attributes["llm.cost.total"] = node["price"]
    elif kind == "tool":
        title = f"execute_tool {name}"
        attributes |= {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                       "gen_ai.tool.call.id": node.get("call_id", "")}
    elif kind == "outside":
        title, span_kind = f"{name} {node.get('profile', '')}".rstrip(), SPAN_KIND_CLIENT
    else:
        title = f"{kind} {name}" if kind == "command" else name
    for key, value in node.items():
        if key in ("tokens", "price", "spans", "kind", "name", "path", "outcome", "start", "duration", "call_id"):
            continue
        if isinstance(value, dict):
            attributes |= {f"s2o.{key}.{k}": v for k, v in value.items()}
        else:
            attributes[f"s2o.{key}"] = value
    start = origin + round(node["start"] * 1e9)
    error = node.get("error")
    status = {"code": STATUS_ERROR, "message": f"{error['code']}: {error['message']}"} if error and \
        "handled" not in node else {"code": STATUS_OK}
    return {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": title, "kind": span_kind,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + round(node["duration"] * 1e9)),
            "attributes": [_attribute(k, v) for k, v in attributes.items()], "status": status}


def _attribute(key: str, value: Any) -> dict[str, Any]:
    """An OTLP ``KeyValue``: text, a boolean, a 64-bit integer (as text) or a double."""
    if type(value) is bool:
        return {"key": key, "value": {"boolValue": value}}
    if type(value) is int:
        return {"key": key, "value": {"intValue": str(value)}}
    if type(value) is float:
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def to_protobuf(trace: dict[str, Any], service: str = "s2o-kernel") -> bytes:
    """The same export request as :func:`to_otlp`, as OTLP protobuf bytes (an ``ExportTraceServiceRequest``).
    Needs ``opentelemetry-proto`` (``pip install 's2o-kernel[otel]'``); raises ``trace`` without it."""
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:
        raise S2OError("trace", "a protobuf export needs the OpenTelemetry extra: pip install 's2o-kernel[otel]' "
                       "(or write OTLP JSON, which needs nothing)") from None
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(protobuf_json(to_otlp(trace, service)), message)
    except json_format.ParseError as exc:  # a text protobuf cannot carry (a trace's texts are UTF-8: a guard)
        raise S2OError("trace", f"the trace cannot be written as protobuf: {str(exc)[:200]}") from None
    data: bytes = message.SerializeToString()
    return data


def protobuf_json(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` (OTLP/JSON) as protobuf's own JSON mapping reads it: the ids, hexadecimal in OTLP/JSON, as
    base64 (the proto3 mapping of ``bytes``); an empty parent id left out."""
    converted: dict[str, Any] = json.loads(json.dumps(request))
    for resource in converted["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
                    else:
                        span.pop(key, None)
    return converted
