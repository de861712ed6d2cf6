"""show the last run's trace: every command, call and outside call it made

%trace                 the last run's trace: nested, collapsible (html) and an outline (text);
                       a failed step is open and marked ✗ (! when onError or outputPath handled it)
%trace --times         the same with each step's duration (a replayed call's as recorded)
%trace on | off        show the trace after every run (off by default)
%trace save FILE       the whole trace as JSON (schema s2o-trace, version 1; docs/tracing.md)
%trace otlp FILE       the trace as OpenTelemetry spans (OTLP JSON; FILE.pb: protobuf, which needs
                       pip install 's2o-kernel[otel]') for Phoenix, Langfuse or any OTLP back end
A shown trace has no times unless --times is given, so a stored %trace output
passes nbval. Secrets are masked as everywhere else.
"""

from __future__ import annotations

import json
from typing import Any

from s2o_kernel.engine import S2OError, trace_to_otlp, trace_to_protobuf
from s2o_kernel.kernel import trace_view
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.files import write_bytes, write_text

PARSER = MagicArgumentParser("trace")
PARSER.add_argument("action", nargs="?", choices=("on", "off", "save", "otlp"), metavar="on|off|save|otlp")
PARSER.add_argument("file", nargs="?", metavar="FILE")
PARSER.add_argument("--times", action="store_true", help="add each step's duration")


def last_trace(call: MagicCall) -> dict[str, Any]:
    """The last run's trace; ``trace`` when no run kept one yet."""
    trace = call.ctx.last_trace
    if trace is None:
        raise S2OError("trace", "no run has kept a trace yet: %trace shows the last fragment run's")
    return trace


def handle(call: MagicCall) -> None:
    """``%trace``: show, save or export the last run's trace, or show it after every run (SPEC 14)."""
    args = PARSER.parse_words(call.arg)
    if args.action in ("on", "off"):
        if args.file is not None or args.times:
            raise S2OError("magic", f"%trace {args.action} takes nothing more")
        call.ctx.trace_after = args.action == "on"
        return
    if args.action in ("save", "otlp"):
        if args.file is None:
            raise S2OError("magic", f"%trace {args.action} FILE: name the file to write")
        trace = last_trace(call)
        if args.action == "save":
            write_text(args.file, call.ctx.redact(json.dumps(trace, indent=1, ensure_ascii=False)) + "\n")
        elif args.file.endswith(".pb"):
            write_bytes(args.file, trace_to_protobuf(trace))
        else:
            write_text(args.file, call.ctx.redact(json.dumps(trace_to_otlp(trace), indent=1, ensure_ascii=False)))
        call.ctx.emit_stream("stdout", f"Wrote the trace of the last run ({_count(trace)} spans) to {args.file}.\n")
        return
    if args.file is not None:
        raise S2OError("magic", f"%trace takes on, off, save FILE or otlp FILE, not {args.file!r}")
    call.ctx.emit_result(trace_view.bundle(last_trace(call), times=args.times, redact=call.ctx.redact))


def _count(trace: dict[str, Any]) -> int:
    count, stack = 0, [trace["root"]]
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(node["spans"])
    return count


MAGIC = Magic("trace", __doc__, line=handle, parser=PARSER)
