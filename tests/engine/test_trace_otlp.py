"""A run trace exported as OpenTelemetry spans (SPEC 14, issue 33), read with OpenTelemetry's own protobuf
definitions (``opentelemetry-proto``): the OTLP JSON parses without error, with OTLP/JSON's one rule applied
here (ids are hexadecimal, which protobuf's JSON mapping reads as base64), its spans carry the GenAI names
and attributes, parents link up, and the protobuf export decodes to the same request."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from benchmarks.fragments import ORDERS_AGENT  # the orders agent of notebooks/outside-world.ipynb
from s2o_kernel.engine import Engine, Session, default_settings, trace_to_otlp, trace_to_protobuf


def parsed(request: dict[str, Any]) -> ExportTraceServiceRequest:
    """``request`` (OTLP JSON) read by protobuf's JSON parser, unknown fields refused."""
    data = copy.deepcopy(request)
    for resource in data["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
                    else:
                        span.pop(key, None)
    message = ExportTraceServiceRequest()
    json_format.ParseDict(data, message, ignore_unknown_fields=False)
    return message


def attributes(span: Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        field = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, field)
    return out


@pytest.fixture(scope="module")
def orders_trace() -> dict[str, Any]:
    run = Session(Engine(default_settings())).run_fragment(ORDERS_AGENT)
    assert run.code == "success", run.error
    return run.trace


def test_the_otlp_json_parses_with_the_opentelemetry_definitions_and_carries_the_genai_names(
        orders_trace: dict[str, Any]) -> None:
    request = trace_to_otlp(orders_trace)
    json.loads(json.dumps(request))  # JSON all through
    message = parsed(request)
    [resource] = message.resource_spans
    assert attributes_of(resource.resource.attributes)["service.name"] == "s2o-kernel"
    spans = list(resource.scope_spans[0].spans)
    names = [s.name for s in spans]
    assert names == ["invoke_agent agent", "command llm", "chat orders", "execute_tool get_order", "command api",
                     "api echo", "command return", "chat orders", "command return"]
    by_id = {s.span_id: s for s in spans}
    assert all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans)
    assert len({s.trace_id for s in spans}) == 1 and len(by_id) == len(spans)
    assert spans[0].parent_span_id == b"" and all(s.parent_span_id in by_id for s in spans[1:])
    assert by_id[spans[2].parent_span_id].name == "command llm"  # the model turn inside its llm span
    assert by_id[spans[5].parent_span_id].name == "command api"
    assert all(s.start_time_unix_nano <= s.end_time_unix_nano for s in spans)
    assert spans[0].start_time_unix_nano > 1_700_000_000 * 10**9  # the run's wall-clock start
    chat = attributes(spans[2])
    assert chat["gen_ai.operation.name"] == "chat" and spans[2].kind == Span.SPAN_KIND_CLIENT
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (35, 6)
    assert chat["llm.cost.total"] == pytest.approx(0.0001475)
    tool = attributes(spans[3])
    assert (tool["gen_ai.operation.name"], tool["gen_ai.tool.name"], tool["gen_ai.tool.call.id"]) == (
        "execute_tool", "get_order", "call_0")
    agent = attributes(spans[0])
    assert (agent["gen_ai.operation.name"], agent["s2o.kind"]) == ("invoke_agent", "run")
    assert attributes(spans[5])["s2o.request"] == "GET /orders/7"
    assert all(s.status.code == Status.STATUS_CODE_OK for s in spans)


def attributes_of(kvs: Any) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in kvs}


def test_a_failed_span_has_status_error_and_a_handled_one_not() -> None:
    run = Session(Engine(default_settings())).run_fragment([
        {"var": {"x": "{ 1 / 0 }"}, "onError": [{"var": {"y": 1}}]}, {"var": {"z": "{ 1 / 0 }"}}])
    assert run.code == "errorInAgent"
    spans = list(parsed(trace_to_otlp(run.trace)).resource_spans[0].scope_spans[0].spans)
    status = {s.name + " " + attributes(s)["s2o.path"]: s.status for s in spans}
    assert status["command var [1].var"].code == Status.STATUS_CODE_ERROR
    assert status["command var [1].var"].message.startswith("runtime: ZeroDivisionError")
    assert status["command var [0].var"].code == Status.STATUS_CODE_OK  # onError handled it
    assert status["invoke_agent commands "].code == Status.STATUS_CODE_ERROR


def test_the_protobuf_export_decodes_to_the_same_request_and_exports_are_stable(orders_trace: dict[str, Any]) -> None:
    data = trace_to_protobuf(orders_trace)
    assert ExportTraceServiceRequest.FromString(data) == parsed(trace_to_otlp(orders_trace))
    assert trace_to_otlp(orders_trace) == trace_to_otlp(copy.deepcopy(orders_trace))  # ids from the trace itself
