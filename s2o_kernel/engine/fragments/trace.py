"""The run trace (SPEC 14): the spans a run records as it goes, and their nested JSON form.

**Recording.** A :class:`Tracer` keeps one run's spans in a flat list, in the order they started; each span
names its parent by index, span 0 being the run. The parent of a new span is the current span of the task
that opens it (:data:`_AT`, a ``ContextVar``): ``parallel`` branches run as tasks, each starting from the
``parallel`` command's span, so their spans nest under their own branch whatever order they run in.
:meth:`Tracer.open` makes the new span the task's current one and :meth:`Tracer.close` gives the task its
parent back; every opening is closed in a ``finally`` (or an ``except`` that raises on), so the nesting holds.

**Muted passes.** A loop keeps the spans of its first :data:`~s2o_kernel.bounds.TRACE_PASSES` passes; for
the rest the task's current span is ``-(loop span) - 2``, a negative number: :meth:`Tracer.open` then
records nothing and returns ``-1``, while the loop's span counts its passes and :meth:`Tracer.hidden` adds
the outside calls made in them (calls, tokens, price), so the totals stay true. A loop whose body is all
sync commands runs those passes on its fast path (:mod:`.fastpath`), which records nothing at all; that
is how keeping a trace stays within SPEC 14's 5 % on the fragment benchmarks.

**Bounds.** At most :data:`~s2o_kernel.bounds.TRACE_SPANS` spans (the rest counted as ``dropped`` on the
run's span); a value is a summary of at most :data:`~s2o_kernel.bounds.TRACE_VALUE_CHARS` characters
(:meth:`Tracer.summary`, built on :func:`~..policy.values.safe_repr`, which shows a secret's text masked);
a span lists at most :data:`~s2o_kernel.bounds.TRACE_ITEMS` fields and variables (``more`` counts the
others); all summaries together hold at most :data:`~s2o_kernel.bounds.TRACE_CHARS` characters.

**The JSON form** (:func:`nest` of :meth:`Tracer.finish`'s flat form; schema ``s2o-trace``, version
:data:`VERSION`, documented in ``docs/tracing.md``)::

    {"schema": "s2o-trace", "version": 1, "code": RESULT CODE, "started": UNIX SECONDS, "root": SPAN}
    SPAN = {"kind": "run" | "command" | "pass" | "branch" | "function" | "tool" | "outside",
            "name": TEXT, "path": JSON PATH, "start": SECONDS, "duration": SECONDS,
            "outcome": "ok" | CODE, "spans": [SPAN, ...], and any of INFO}

The keys of ``INFO`` are :data:`INFO_TYPES`'. The *flat form* lists the same spans in the order they started,
each with ``parent`` (an index, ``-1`` for the run) instead of ``spans``: it is what crosses the worker's pipe,
whose messages nest no deeper than values do, and :func:`check` reads it back from a sender not trusted
(known keys of known types only, every count bounded).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from contextvars import ContextVar
from itertools import islice
from time import perf_counter_ns, time
from typing import Any

from ...bounds import (
    TRACE_CHARS,
    TRACE_DEPTH_SHOWN,
    TRACE_ITEMS,
    TRACE_MOST_COUNT,
    TRACE_MOST_PRICE,
    TRACE_SHORT_INT,
    TRACE_SPANS,
    TRACE_TEXT_CHARS,
    TRACE_VALUE_CHARS,
)
from ..errors import S2OError
from ..policy.parts import parts_of
from ..policy.values import safe_repr
from ..run.scopes import PLACEHOLDER_END, PLACEHOLDER_START

#: The schema's name and version in the JSON form (``docs/tracing.md``): a reader checks both.
SCHEMA = "s2o-trace"
VERSION = 1

#: The current span of the running task: an index into :attr:`Tracer.spans`; ``-1`` while nothing is recorded
#: (past the span bound); ``-(loop) - 2`` in a loop's muted passes (see the module doc).
_AT: ContextVar[int] = ContextVar("s2o_trace_at", default=0)

#: The kinds of span, in the JSON form's ``kind``.
KINDS = ("run", "command", "pass", "branch", "function", "tool", "outside")

#: The optional keys of a span in the JSON form and their types: (type, what the value is).
INFO_TYPES: dict[str, tuple[type, str]] = {
    "error": (dict, "{code, message, path}: the error the span ended with"),
    "handled": (str, "onError or outputPath: what handled the span's error"),
    "fields": (dict, "JSON path (from the span's) → summary: each expression the span evaluated"),
    "wrote": (dict, "target → summary: the variables the span set besides its fields (outputPath, a loop's item)"),
    "more": (int, "fields and variables evaluated or bound but not listed"),
    "pass": (int, "the pass's number, from 1"),
    "passes": (int, "a loop's passes in all"),
    "branch": (int, "a parallel branch's index, from 0"),
    "turn": (int, "a model turn's number in its llm command, from 1"),
    "call_id": (str, "the id of the model's tool call"),
    "profile": (str, "an outside call's profile"),
    "request": (str, "an outside call's request, summarised"),
    "response": (str, "an outside call's response, summarised"),
    "tokens": (dict, "{input, output}: a model turn's tokens"),
    "price": (float, "US dollars a model turn cost"),
    "replayed": (bool, "whether a record/replay cassette answered the call"),
    "recorded": (float, "seconds the replayed call took when it was recorded"),
    "hidden": (dict, "{passes, calls, input_tokens, output_tokens, price}: what a loop's passes not kept did"),
    "dropped": (int, "spans past the bound, counted not kept (the run's span)"),
}

#: Keys of ``hidden`` and of ``tokens``.
HIDDEN_KEYS = ("passes", "calls", "input_tokens", "output_tokens", "price")
TOKEN_KEYS = ("input", "output")
ERROR_KEYS = ("code", "message", "path")


class Span:
    """One span as it is recorded: ``kind`` (:data:`KINDS`), ``name``, ``path``, ``parent`` (index, ``-1`` for
    the run), ``t0``/``t1`` (nanoseconds from the run's start; ``t1`` ``None`` while open), ``outcome`` (``ok`` or
    a code) and ``info`` (the optional keys of :data:`INFO_TYPES`)."""

    __slots__ = ("info", "kind", "name", "outcome", "parent", "path", "t0", "t1")

    def __init__(self, kind: str, name: str, path: str, parent: int, t0: int) -> None:
        self.kind, self.name, self.path, self.parent, self.t0 = kind, name, path, parent, t0
        self.t1: int | None = None
        self.outcome = "ok"
        self.info: dict[str, Any] = {}


class Tracer:
    """One run's trace as it is recorded (see the module doc). ``Tracer(name)``: the run's span is named
    ``name`` (the fragment's kind: ``command``, ``commands``, ``function``, ``agent``) and starts now."""

    def __init__(self, name: str) -> None:
        self.origin = perf_counter_ns()
        self.started = time()  # the wall clock at the run's start, for exports (OTLP's absolute times)
        self.spans: list[Span] = [Span("run", name, "", -1, 0)]
        self.chars = TRACE_CHARS
        self.turns: dict[int, int] = {}  # span → model turns below it so far
        #: What is summarised when the trace is written out, as nothing changes it meanwhile: (span, key, name,
        #: value): small values that cannot change (key ``fields``, ``wrote``), an outside call's request (its own
        #: copy of the fields: ``request``, name the kind) and a model turn's answer (``response``).
        self.later: list[tuple[int, str, str, Any]] = []
        self.ended, self.code = 0, ""  # set by finish
        self.token: Any = _AT.set(0)

    # -- spans ------------------------------------------------------------------------------------
    def open(self, kind: str, name: str, path: str) -> int:
        """Open a span below the task's current one and make it current; its index, or ``-1`` when nothing is
        recorded (a muted pass, or past :data:`~s2o_kernel.bounds.TRACE_SPANS` or the run's characters: then
        counted as ``dropped``). Its name and path count against the characters (:meth:`cut`)."""
        at = _AT.get()
        if at < 0:
            return -1
        spans = self.spans
        if len(spans) >= TRACE_SPANS:
            info = spans[0].info
            info["dropped"] = info.get("dropped", 0) + 1
            return -1
        if not (name.isascii() and path.isascii()):
            name, path = readable(name), readable(path)
        if len(name) > TRACE_TEXT_CHARS or len(path) > TRACE_TEXT_CHARS:
            name, path = name[:TRACE_TEXT_CHARS], path[:TRACE_TEXT_CHARS]
        self.chars -= len(name) + len(path)
        if self.chars < 0:  # the run's characters are spent: no more spans
            info = spans[0].info
            info["dropped"] = info.get("dropped", 0) + 1
            return -1
        index = len(spans)
        spans.append(Span(kind, name, path, at, perf_counter_ns() - self.origin))
        _AT.set(index)
        return index

    def close(self, index: int, raised: BaseException | None = None) -> None:
        """Close span ``index`` (``-1``: nothing), with the exception that ended it, if any: an ``S2OError``
        gives its code and ``error``; a limit or an interrupt that unwinds the run its own outcome."""
        if index < 0:
            return
        span = self.spans[index]
        span.t1 = perf_counter_ns() - self.origin
        if raised is not None:
            self.failed(span, raised)
        _AT.set(span.parent)

    def failed(self, span: Span, raised: BaseException) -> None:
        """Mark ``span`` as ended by ``raised`` (kept when an error is already there: the first is the cause)."""
        if isinstance(raised, S2OError):
            if "error" not in span.info:
                span.outcome = raised.code
                span.info["error"] = {"code": raised.code, "message": self.cut(raised.message, TRACE_TEXT_CHARS),
                                      "path": self.cut(raised.path or "", TRACE_TEXT_CHARS)}
        elif span.outcome == "ok":
            error = getattr(raised, "error", None) if type(raised).__name__ == "Fail" else None
            if isinstance(error, S2OError):  # fail: the span ends with the error it names
                self.failed(span, error)
                span.outcome = "failCommand"
            else:
                span.outcome = _UNWOUND.get(type(raised).__name__, "ok")

    def error(self, raised: S2OError, handled: str | None) -> None:
        """The task's current span failed with ``raised``; ``handled`` names what handled it (``onError``,
        ``outputPath``), ``None`` when it goes on up."""
        at = _AT.get()
        if at >= 0:
            span = self.spans[at]
            self.failed(span, raised)
            if handled is not None:
                span.info["handled"] = handled

    def note(self, key: str, value: Any) -> None:
        """Set ``key`` of :data:`INFO_TYPES` on the task's current span."""
        at = _AT.get()
        if at >= 0:
            self.spans[at].info[key] = value

    def current(self) -> int:
        """The task's current span (negative: none recorded, see :data:`_AT`)."""
        return _AT.get()

    # -- what a span holds ----------------------------------------------------------------------------
    def field(self, path: str, value: Any) -> None:
        """An expression at ``path`` evaluated to ``value`` in the task's current span, listed by its path after
        the span's own (``in`` for ``….for.in``; ``value`` for the span's own path: a ``return``'s value). A value
        that cannot change (a number, a short text) is summarised when the trace is written out, any other now."""
        at = _AT.get()
        if at >= 0:
            if later(value):
                self.later.append((at, "fields", path, value))
            else:
                self._item(self.spans[at], "fields", path, self.summary(value))

    def bound(self, index: int, name: str, value: Any) -> None:
        """Span ``index`` set the variable ``name`` (a target as written: ``x``, ``agent.x``, ``x[0]``) to
        ``value``: an ``outputPath`` target, a loop's item in its pass."""
        if index >= 0:
            if later(value):
                self.later.append((index, "wrote", name, value))
            else:
                self._item(self.spans[index], "wrote", name, self.summary(value))

    def _item(self, span: Span, key: str, name: str, text: str) -> None:
        items = span.info.get(key)
        if items is None:
            items = span.info[key] = {}
        if key == "fields":
            own = span.path
            name = name[len(own) + 1:] if name.startswith(own) and len(name) > len(own) + 1 else \
                "value" if name == own else name
        name = self.cut(name, TRACE_TEXT_CHARS)
        if len(items) < TRACE_ITEMS or name in items:
            items[name] = text
        else:
            span.info["more"] = span.info.get("more", 0) + 1

    def hidden(self, tokens: tuple[int, int] | None, price: float | None) -> None:
        """An outside call made in a muted pass: counted on its loop's span (``hidden``)."""
        at = _AT.get()
        if at < -1:
            hidden = self.spans[-at - 2].info.setdefault("hidden", dict.fromkeys(HIDDEN_KEYS, 0))
            hidden["calls"] = min(hidden["calls"] + 1, TRACE_MOST_COUNT)
            if tokens is not None:  # sums kept within what a reader takes (a count below 2**53, a finite price)
                hidden["input_tokens"] = min(hidden["input_tokens"] + tokens[0], TRACE_MOST_COUNT)
                hidden["output_tokens"] = min(hidden["output_tokens"] + tokens[1], TRACE_MOST_COUNT)
            if price is not None:
                hidden["price"] = min(hidden["price"] + price, TRACE_MOST_PRICE)

    def request(self, index: int, kind: str, profile: str | None, fields: dict[str, Any]) -> None:
        """Note on outside span ``index`` its profile and request (:func:`request_text`)."""
        if index >= 0:
            info = self.spans[index].info
            if profile is not None:
                info["profile"] = self.cut(profile, TRACE_TEXT_CHARS)
            self.later.append((index, "request", kind, fields))  # the call's own copy: nothing changes it
            if kind == "llm":  # model turns numbered within their llm command
                parent = self.spans[index].parent
                self.turns[parent] = info["turn"] = self.turns.get(parent, 0) + 1

    def response(self, index: int, kind: str, result: Any, receipt: dict[str, Any]) -> None:
        """Note on outside span ``index`` its response (:func:`response_text`), a model turn's tokens and price,
        and what the door's ``receipt`` says; in a muted pass, count the call on the loop (:meth:`hidden`)."""
        tokens, price = _usage(result) if kind == "llm" else (None, None)
        if index < 0:
            self.hidden(tokens, price)
            return
        info = self.spans[index].info
        if kind == "llm":  # a model turn's answer: the llm command reads it and hands the run only its text
            self.later.append((index, "response", kind, result))
        else:  # the run's result now, which the run may change
            info["response"] = self.cut(response_text(kind, result, self.summary))
        if tokens is not None:
            info["tokens"] = {"input": tokens[0], "output": tokens[1]}
        if price is not None:
            info["price"] = price
        info["replayed"] = receipt.get("replayed") is True
        if type(receipt.get("recorded")) is float:
            info["recorded"] = receipt["recorded"]

    def mute(self, loop: int) -> Any:
        """Stop recording in this task for the rest of loop span ``loop``'s passes; a token for :meth:`unmute`."""
        if loop >= 0:
            self.spans[loop].info.setdefault("hidden", dict.fromkeys(HIDDEN_KEYS, 0))
        return _AT.set(-loop - 2 if loop >= 0 else -1)

    def unmute(self, token: Any, loop: int, passes: int, kept: int) -> None:
        """The loop ended after ``passes`` passes, ``kept`` of them recorded: the task records again."""
        _AT.reset(token)
        if loop >= 0:
            info = self.spans[loop].info
            info["passes"] = passes
            if "hidden" in info:
                info["hidden"]["passes"] = passes - kept

    def summary(self, value: Any) -> str:
        """``value`` as a trace shows it (:func:`shown`): at most :data:`~s2o_kernel.bounds.TRACE_VALUE_CHARS`
        characters, the cut ending in ``…``, in time bounded by that too; only ``…`` once the run's budget of
        characters is spent."""
        t = type(value)
        if t is float or t is bool or value is None or (t is int and -TRACE_SHORT_INT < value < TRACE_SHORT_INT) or \
                (t is str and len(value) < TRACE_VALUE_CHARS):  # written whole, short: shown's own first step
            return self.cut(repr(value))
        return self.cut(shown(value, TRACE_VALUE_CHARS))

    def cut(self, text: str, limit: int = TRACE_VALUE_CHARS) -> str:
        """``text`` as every text enters a trace: :func:`readable`, within ``limit`` characters and the run's
        budget of :data:`~s2o_kernel.bounds.TRACE_CHARS` (only ``…`` once that is spent)."""
        if not text.isascii():
            text = readable(text)
        if len(text) > limit:
            text = text[:limit - 1] + "…"
        self.chars -= len(text)
        return text if self.chars >= 0 else "…"

    # -- the JSON form --------------------------------------------------------------------------------
    def finish(self, code: str, error: S2OError | None) -> Tracer:
        """End the run's span with result ``code`` (and ``error``) and give the task back its span; spans still
        open (a run stopped inside them) end now. Returns the tracer, whose :meth:`flat` form is made only when
        someone reads it (:class:`TraceSource`): a run pays for recording its trace, not for writing it out."""
        self.ended = perf_counter_ns() - self.origin
        self.code = code
        root = self.spans[0]
        root.outcome = "ok" if code == "success" else code
        if error is not None and "error" not in root.info:
            root.info["error"] = {"code": error.code, "message": self.cut(error.message, TRACE_TEXT_CHARS),
                                  "path": self.cut(error.path or "", TRACE_TEXT_CHARS)}
        _AT.reset(self.token)
        self.token = None  # a token holds its context, which holds what the run set: dropped with the run
        return self

    def flat(self) -> dict[str, Any]:
        """The trace's flat form (:func:`nest` makes it the JSON form), once :meth:`finish` ended the run. Times are
        whole microseconds, written as seconds."""
        now, code = self.ended, self.code
        for index, key, name, value in self.later:
            if key == "request":
                self.spans[index].info["request"] = self.cut(request_text(name, value))
            elif key == "response":
                self.spans[index].info["response"] = self.cut(response_text(name, value, self.summary))
            else:
                self._item(self.spans[index], key, name, self.summary(value))
        self.later = []
        nodes = []
        for span in self.spans:
            t0, t1 = span.t0 // 1000, (now if span.t1 is None else span.t1) // 1000
            node = {"kind": span.kind, "name": span.name, "path": span.path, "start": t0 / 1e6,
                    "duration": (t1 - t0) / 1e6, "outcome": span.outcome}
            info = span.info
            if info:
                if "hidden" in info:  # what a loop's passes not kept did: only what is not nothing
                    info["hidden"] = {k: v for k, v in info["hidden"].items() if v or k == "passes"}
                node.update(info)
            node["parent"] = span.parent
            nodes.append(node)
        return {"schema": SCHEMA, "version": VERSION, "code": code, "started": round(self.started, 6), "spans": nodes}


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """The JSON form (see the module doc) of a trace's flat form (``{"schema", "version", "code", "started",
    "spans": [SPAN with "parent": index, -1 for the run]}``, each span after its parent, as
    :meth:`Tracer.finish` and :func:`check` give it), made of its spans (``flat`` is used up): each span in its
    parent's ``spans``, in the order they started."""
    nodes: list[dict[str, Any]] = flat["spans"]
    for node in nodes:  # in place: the flat form's spans become the nested form's
        parent = node.pop("parent")
        node["spans"] = []
        if parent >= 0:
            nodes[parent]["spans"].append(node)
    return {"schema": flat["schema"], "version": flat["version"], "code": flat["code"], "started": flat["started"],
            "root": nodes[0]}


def flatten(trace: dict[str, Any]) -> dict[str, Any]:
    """The flat form of a trace in the JSON form (:func:`nest` undone), walked without recursion: how a trace
    crosses the worker's pipe, whose messages nest no deeper than values do."""
    nodes: list[dict[str, Any]] = []
    stack: list[tuple[dict[str, Any], int]] = [(trace["root"], -1)]
    while stack:
        node, parent = stack.pop()
        index = len(nodes)
        nodes.append({**{k: v for k, v in node.items() if k != "spans"}, "parent": parent})
        stack.extend((child, index) for child in reversed(node.get("spans") or ()))
    return {"schema": trace["schema"], "version": trace["version"], "code": trace["code"],
            "started": trace["started"], "spans": nodes}


def mask(flat: dict[str, Any], text: Any) -> dict[str, Any]:
    """The flat form ``flat`` with every string, keys of ``fields`` and ``wrote`` too, passed through ``text``
    (a masker's: SPEC 14's secrets appear in no trace)."""
    def value(v: Any) -> Any:
        if type(v) is str:
            return text(v)
        if type(v) is dict:
            return {text(k) if type(k) is str else k: value(x) for k, x in v.items()}
        return v
    return {**flat, "spans": [{k: value(v) for k, v in span.items()} for span in flat["spans"]]}


class TraceSource:
    """A run's trace in its JSON form, made when first read (:meth:`json`) and kept: what ``RunResult.trace``
    reads. ``TraceSource(flat, text)``: ``flat()`` gives the flat form (:meth:`Tracer.flat`, or a worker's,
    checked), whose strings are passed through ``text`` (a masker's; ``None``: nothing to mask), then nested."""

    __slots__ = ("_flat", "_json", "_text")

    def __init__(self, flat: Callable[[], dict[str, Any]], text: Callable[[str], str] | None = None) -> None:
        self._flat, self._text = flat, text
        self._json: dict[str, Any] | None = None

    def masked(self, text: Callable[[str], str] | None) -> TraceSource:
        """The same trace, its strings passed through ``text`` instead."""
        return TraceSource(self._flat, text)

    def json(self) -> dict[str, Any]:
        """The JSON form (the module doc), made on the first call."""
        if self._json is None:
            flat = self._flat()
            self._json = nest(mask(flat, self._text) if self._text is not None else copy_flat(flat))
        return self._json


def copy_flat(flat: dict[str, Any]) -> dict[str, Any]:
    """``flat`` with spans of its own (:func:`nest` uses its argument up)."""
    return {**flat, "spans": [dict(span) for span in flat["spans"]]}


#: What a span that a limit or an interrupt unwound shows as its outcome, by the exception's class name; the
#: signals that unwind commands as the language says (``break``, ``continue``, ``return``, ``end``) leave ``ok``.
_UNWOUND = {"RunTimeout": "timedOut", "TimeoutError": "timedOut", "CancelledError": "cancelled",
            "RunInterrupt": "stopped", "KeyboardInterrupt": "stopped", "RecursionError": "too-deep"}

_PLACEHOLDER = re.compile(re.escape(PLACEHOLDER_START) + "([^" + PLACEHOLDER_END + "]*)" + PLACEHOLDER_END)


def readable(text: str) -> str:
    """``text`` as a trace holds it: a secret's placeholder (``scopes.PLACEHOLDER_START``, in a request's fields)
    written as ``<secret NAME>`` before anything cuts it, and a lone surrogate as its escape (``\\ud800``), so
    the text is UTF-8 wherever it goes (a message, nh3, protobuf)."""
    if PLACEHOLDER_START in text:
        text = _PLACEHOLDER.sub(lambda found: f"<secret {found.group(1)}>", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


#: Types of small values that cannot change once made (:func:`later`).
_LATER = frozenset({float, bool, type(None), complex})


def later(value: Any) -> bool:
    """Whether ``value`` may be summarised when the trace is written out rather than now: it cannot change and
    is small (a number, a short text), so keeping it meanwhile holds on to nothing a run made big."""
    t = type(value)
    return t in _LATER or (t is int and -TRACE_SHORT_INT < value < TRACE_SHORT_INT) or \
        (t is str and len(value) < TRACE_VALUE_CHARS)



# -- values, shown -------------------------------------------------------------------------------------------

def shown(value: Any, limit: int) -> str:
    """About ``limit`` characters of ``value``'s repr, written in time bounded by ``limit`` whatever its size:
    the built-in containers (by exact type) are opened item by item until the text is long enough, ``…`` then
    standing for the rest; a number too long to write in full shows its size. A value that holds parts of
    another type (a host object, a subclass of a container) shows only its type, since writing it could take any
    time; other values of their own kind (a secret, a decimal, a date) their repr (:func:`safe_repr`, which
    shows a secret masked)."""
    out: list[str] = []
    _write(value, out, [limit], 0)
    return "".join(out)


_OPEN: dict[type, tuple[str, str]] = {list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}"),
                                      frozenset: ("frozenset({", "})"), dict: ("{", "}")}


def _write(value: Any, out: list[str], left: list[int], depth: int) -> None:
    """Write ``value`` into ``out`` while ``left[0]`` characters are left (see :func:`shown`)."""
    if left[0] <= 0:
        return
    t = type(value)
    if t is str or t is bytes:
        if t is str and not value.isascii():
            value = readable(value)
        text = repr(value[:left[0]]) + ("…" if len(value) > left[0] else "")
    elif t is int:
        text = repr(value) if -10**60 < value < 10**60 else f"<int of {value.bit_length()} bits>"
    elif t in (float, bool, complex, range) or value is None:
        text = repr(value)
    elif t in _OPEN:
        if value and depth < TRACE_DEPTH_SHOWN:
            _write_items(value, out, left, depth)
            return
        text = "{}…{}".format(*_OPEN[t]) if value else repr(value)
    elif parts_of(value) is None:
        text = safe_repr(value, left[0])
    else:
        text = f"<{t.__name__} object>"
    out.append(text)
    left[0] -= len(text)


def _write_items(value: Any, out: list[str], left: list[int], depth: int) -> None:
    """Write a built-in container (exact type, not empty) item by item while characters are left; a text or a
    number is written here, anything else by :func:`_write`."""
    t = type(value)
    opening, closing = _OPEN[t]
    out.append(opening)
    room = left[0] - len(opening)
    pairs = t is dict
    first = True
    for item in value.items() if pairs else value:
        if room <= 0:
            out.append("…" + closing)
            left[0] = 0
            return
        if not first:
            out.append(", ")
            room -= 2
        first = False
        for part in item if pairs else (item,):
            kind = type(part)
            if kind is str:
                if not part.isascii():
                    part = readable(part)
                text = repr(part) if len(part) < room else repr(part[:max(room, 0)]) + "…"
            elif kind is float or kind is bool or part is None or \
                    (kind is int and -TRACE_SHORT_INT < part < TRACE_SHORT_INT):
                text = repr(part)
            else:
                left[0] = room
                _write(part, out, left, depth + 1)
                room = left[0]
                text = ""
            out.append(text)
            room -= len(text)
            if pairs and part is item[0]:
                out.append(": ")
                room -= 2
    closing = ",)" if t is tuple and len(value) == 1 else closing
    out.append(closing)
    left[0] = room - len(closing)


def request_text(kind: str, fields: dict[str, Any]) -> str:
    """An outside call's request in one line: ``GET /orders/7``; the SQL and its parameters' count; a model
    turn's messages, the last one's start, and the tools offered; an ``ask``'s message and inputs."""
    if kind == "api":
        return f"{fields.get('method') or 'GET'} {fields.get('path') or '/'}"
    if kind == "db":
        params: Any = fields.get("params")
        count = f" ({len(params)} parameters)" if type(params) is dict and params else ""
        return _plain(fields.get("sql"), 200) + count
    if kind == "llm":
        return _llm_request(fields)
    inputs = [q.get("name") for q in islice(fields.get("inputs") or (), 20) if type(q) is dict]
    return f"{_plain(fields.get('message'), 60)}: {', '.join(_plain(n, 40) for n in inputs)}"


def _llm_request(fields: dict[str, Any]) -> str:
    """A model turn's request in one line: how many messages, the last one's role and start, the tools."""
    messages: Any = fields.get("messages") if type(fields.get("messages")) is list else []
    tools = [t.get("name") for t in islice(fields.get("tools") or (), 20) if type(t) is dict]
    last = messages[-1] if messages and type(messages[-1]) is dict else {}
    count = f"{len(messages)} message{'s' if len(messages) != 1 else ''}"
    text = f"{count}, last {_plain(last.get('role'), 20)}: {shown(last.get('content'), 60)}"
    return text + (f"; tools: {', '.join(_plain(t, 40) for t in tools)}" if tools else "")


def _plain(value: Any, limit: int) -> str:
    """Text as itself, anything else as :func:`shown`, at most about ``limit`` characters."""
    return readable(value)[:limit] if type(value) is str else shown(value, limit)


def response_text(kind: str, result: Any, summary: Callable[[Any], str]) -> str:
    """An outside call's response in one line: an api's body and a db's rows (``summary`` of them), a model
    turn's text or the tools it called, an ``ask``'s answers by name."""
    if kind == "db" and type(result) is list:
        return f"{len(result)} rows" + (f", first {summary(result[0])}" if result else "")
    if kind == "llm" and type(result) is dict:
        calls = [c for c in islice(result.get("tool_calls") or (), 20) if type(c) is dict]
        if calls:
            return "tool calls: " + ", ".join(f"{_plain(c.get('name'), 40)}({_arguments(c.get('arguments'))})"
                                              for c in calls)
        return f"text: {summary(result.get('text'))}"
    if kind == "ask" and type(result) is dict:
        return "answers: " + ", ".join(f"{_plain(k, 40)}={summary(v)}" for k, v in islice(result.items(), 20))
    return summary(result)


def _arguments(arguments: Any) -> str:
    if type(arguments) is not dict:
        return "…"
    return ", ".join(f"{_plain(k, 40)}={shown(v, 40)}" for k, v in islice(arguments.items(), 20))


def _usage(result: Any) -> tuple[tuple[int, int] | None, float | None]:
    """A model turn's ``(input tokens, output tokens)`` and price, each ``None`` when not of its type."""
    if type(result) is not dict:
        return None, None
    given: tuple[Any, Any] = (result.get("input_tokens"), result.get("output_tokens"))
    tokens = (int(given[0]), int(given[1])) if all(type(t) is int and 0 <= t < 2**53 for t in given) else None
    cost: Any = result.get("cost")
    price = float(cost) if type(cost) in (int, float) and math.isfinite(cost) and cost >= 0 else None
    return tokens, price


# -- reading the form from an untrusted sender -------------------------------------------------------------

def check(data: Any) -> dict[str, Any]:
    """The flat form ``data`` (see :func:`nest`) rebuilt from known keys of known types only; raises
    ``ValueError`` for anything else. Bounded: at most :data:`~s2o_kernel.bounds.TRACE_SPANS` spans (plus one,
    the run, which comes first), each after its parent; each string at most
    :data:`~s2o_kernel.bounds.TRACE_TEXT_CHARS` characters; each dict of :data:`INFO_TYPES` at most
    :data:`~s2o_kernel.bounds.TRACE_ITEMS` items."""
    if type(data) is not dict or data.get("schema") != SCHEMA or data.get("version") != VERSION:
        raise ValueError("a trace is {schema: s2o-trace, version: 1, code, spans}")
    spans = data.get("spans")
    if type(spans) is not list or not 1 <= len(spans) <= TRACE_SPANS + 1:
        raise ValueError(f"a trace's spans are a list of 1 to {TRACE_SPANS + 1}")
    nodes = [_span(span, index) for index, span in enumerate(spans)]
    return {"schema": SCHEMA, "version": VERSION, "code": _text(data.get("code")),
            "started": _seconds(data.get("started")), "spans": nodes}


def _span(data: Any, index: int) -> dict[str, Any]:
    if type(data) is not dict or data.get("kind") not in KINDS:
        raise ValueError("a span is an object of a known kind")
    parent = data.get("parent")
    if type(parent) is not int or not (parent == -1 if index == 0 else 0 <= parent < index):
        raise ValueError("a span's parent is a span before it (the run's is -1)")
    node: dict[str, Any] = {"kind": data["kind"]}
    for key in ("name", "path", "outcome"):
        node[key] = _text(data.get(key))
    for key in ("start", "duration"):
        node[key] = _seconds(data.get(key))
    for key, value in data.items():
        if key in INFO_TYPES:
            node[key] = _info(key, value)
        elif key not in node and key != "parent":
            raise ValueError(f"a span has no key {str(key)[:40]!r}")
    node["parent"] = parent
    return node


def _info(key: str, value: Any) -> Any:
    kind = INFO_TYPES[key][0]
    if kind is str:
        return _text(value)
    if kind is int:
        return _count(key, value)
    if kind is float:
        return _seconds(value)
    if kind is bool:
        if type(value) is not bool:
            raise ValueError(f"a span's {key} is true or false")
        return value
    if type(value) is not dict or len(value) > TRACE_ITEMS:
        raise ValueError(f"a span's {key} is an object of at most {TRACE_ITEMS} items")
    if key in {"tokens", "hidden"}:
        keys = TOKEN_KEYS if key == "tokens" else HIDDEN_KEYS
        if set(value) - set(keys):
            raise ValueError(f"a span's {key} has unknown keys")
        return {k: _seconds(v) if k == "price" else _count(f"{key}.{k}", v) for k, v in value.items()}
    if key == "error" and set(value) != set(ERROR_KEYS):
        raise ValueError("a span's error is {code, message, path}")
    return {_text(k): _text(v) for k, v in value.items()}


def _count(key: str, value: Any) -> int:
    if type(value) is not int or not 0 <= value < 2**53:
        raise ValueError(f"a span's {key} is a count below 2**53")
    return value


def _text(value: Any) -> str:
    if type(value) is not str or len(value) > TRACE_TEXT_CHARS:
        raise ValueError("a trace's text is a string within its bound")
    return value


def _seconds(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise ValueError("a trace's number is finite and not negative")
    return float(value)
