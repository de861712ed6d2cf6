"""A run's trace shown in a cell (SPEC 14): nested ``<details>`` as ``text/html``, an outline as ``text/plain``.

Both views show the same lines. Each span has a *head* (the ``<summary>`` in html): what ran, its JSON path,
its outcome, and for model calls their tokens and price (summed over what a span holds, so an ``llm``
command's head shows its turns' together); a failed span is marked ``✗`` (``!`` when ``onError`` or
``outputPath`` handled it) and open in html. Below the head come its *details*: the expressions it evaluated
(``x = …``), the variables it set besides (``set x = …``: an ``outputPath`` target, a loop's item in its
pass), an outside call's request (``→``) and response (``←``), the error, the passes of a loop that are
counted but not shown; then the spans it holds.

Shown traces are stable, so a stored ``%trace`` output passes nbval: no times and no word of replay unless
``times`` is asked for; then each span's head ends with its duration, a replayed outside call's taken from
the cassette (the time the call took when it was recorded). The html holds no script; it goes through nh3
with its default policy plus the ``open`` attribute of ``<details>``.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from typing import Any

from s2o_kernel.bounds import TRACE_SHOWN_CHARS
from s2o_kernel.kernel.render import escape_text

#: Markers of a failed span in a head: not handled, and handled (``onError``, ``outputPath``).
FAILED, HANDLED = "✗", "!"

#: Indentation of one level in the text outline.
INDENT = "  "


def bundle(trace: dict[str, Any], *, times: bool = False, redact: Callable[[str], str] = str) -> dict[str, str]:
    """``{"text/plain", "text/html"}`` of ``trace`` (the JSON form, ``RunResult.trace``), each text passed
    through ``redact`` (the session's secrets masked once more). The spans shown stop at
    :data:`~s2o_kernel.bounds.TRACE_SHOWN_CHARS` characters of lines; a last line says how many more the trace
    holds (``%trace save`` writes them all)."""
    shown, more = _within(trace["root"], TRACE_SHOWN_CHARS, times)
    lines = [INDENT * depth + line for depth, line in _lines(trace["root"], 0, times, shown)]
    tail = f"… {more} more spans not shown here: %trace save FILE writes the whole trace" if more else ""
    text = "\n".join([*lines, tail] if tail else lines)
    page = _html(trace["root"], times, shown) + (f"<div>{html.escape(tail)}</div>" if tail else "")
    return {"text/plain": escape_text(redact(text)), "text/html": _sanitised(escape_text(redact(page)))}


def _within(root: dict[str, Any], budget: int, times: bool) -> tuple[set[int], int]:
    """The spans shown (their ids), depth first while their lines fit in ``budget`` characters, and how many
    are not."""
    shown: set[int] = set()
    more, stack = 0, [root]
    while stack:
        span = stack.pop()
        budget -= len(head(span, times)) + sum(len(line) for line in details(span))
        if budget < 0:
            more += 1
        else:
            shown.add(id(span))
        stack.extend(reversed(span["spans"]))
    return shown, more


def _sanitised(text: str) -> str:
    import nh3

    attributes = {**nh3.ALLOWED_ATTRIBUTES, "details": {"open"}}
    return nh3.clean(text, attributes=attributes)


def _lines(span: dict[str, Any], depth: int, times: bool, shown: set[int]) -> Iterator[tuple[int, str]]:
    if id(span) not in shown:
        return
    yield depth, head(span, times)
    for line in details(span):
        yield depth + 1, line
    for child in span["spans"]:
        yield from _lines(child, depth + 1, times, shown)


def _html(span: dict[str, Any], times: bool, shown: set[int]) -> str:
    if id(span) not in shown:
        return ""
    failed = span["outcome"] != "ok" and "handled" not in span
    body = "".join(f"<div>{html.escape(line)}</div>" for line in details(span))
    children = "".join(_html(child, times, shown) for child in span["spans"])
    inner = f"<div>{body}{children}</div>" if body or children else ""
    return f"<details{' open' if failed else ''}><summary>{html.escape(head(span, times))}</summary>{inner}</details>"


def head(span: dict[str, Any], times: bool) -> str:
    """The one line that names ``span`` (see the module doc)."""
    kind, name = span["kind"], span["name"]
    if kind == "outside":
        what = f"{name} {span.get('profile', '')}".rstrip() + (f", turn {span['turn']}" if "turn" in span else "")
    elif kind == "tool":
        what = f"tool {name} (call {span.get('call_id', '?')})"
    elif kind == "function":
        what = f"function {name}"
    elif kind == "run":
        what = f"run ({name})"
    else:
        what = name
    parts = [what]
    if span["path"] and kind not in ("run", "outside", "pass"):
        parts.append(span["path"])
    outcome = span["outcome"]
    if outcome != "ok":
        outcome = f"{HANDLED if 'handled' in span else FAILED} {outcome}"
    parts.append(outcome)
    tokens, price = usage(span)
    if tokens:
        parts.append(f"{tokens[0] + tokens[1]} tokens ({tokens[0]} in, {tokens[1]} out)")
    if price:
        parts.append(f"${price:.6f}")
    if "passes" in span:
        parts.append(f"{span['passes']} passes")
    if times:
        parts.append(duration(span))
    return " · ".join(parts)


def duration(span: dict[str, Any]) -> str:
    """How long ``span`` took, in ms; a replayed call's recorded time."""
    if span.get("replayed") and "recorded" in span:
        return f"{span['recorded'] * 1000:.1f} ms (replayed; as recorded)"
    return f"{span['duration'] * 1000:.1f} ms"


def usage(span: dict[str, Any]) -> tuple[tuple[int, int] | None, float]:
    """The tokens (in, out) and price of the model calls in ``span`` and below it, the counted-only passes'
    too; ``(None, 0.0)`` when there were none."""
    inp = out = 0
    price, seen = 0.0, False
    stack = [span]
    while stack:
        node = stack.pop()
        tokens = node.get("tokens")
        if tokens:
            inp, out, seen = inp + tokens["input"], out + tokens["output"], True
        price += node.get("price", 0.0)
        hidden = node.get("hidden") or {}
        if hidden.get("input_tokens") or hidden.get("output_tokens"):
            inp += hidden.get("input_tokens", 0)
            out += hidden.get("output_tokens", 0)
            seen = True
        price += hidden.get("price", 0.0)
        stack.extend(node["spans"])
    return ((inp, out) if seen else None), price


def details(span: dict[str, Any]) -> list[str]:
    """The lines below ``span``'s head (see the module doc)."""
    lines = [f"{name} = {value}" for name, value in (span.get("fields") or {}).items()]
    lines += [f"set {name} = {value}" for name, value in (span.get("wrote") or {}).items()]
    if span.get("more"):
        lines.append(f"… and {span['more']} more")
    if "request" in span:
        lines.append(f"→ {span['request']}")
    if "response" in span:
        lines.append(f"← {span['response']}")
    error = span.get("error")
    if error and not any(child.get("error") == error for child in span["spans"]):  # shown where it happened
        handled = f" (handled by {span['handled']})" if "handled" in span else ""
        lines.append(f"error {error['code']} at {error['path'] or '?'}: {error['message']}{handled}")
    hidden = span.get("hidden")
    if hidden and hidden.get("passes"):
        first = span.get("passes", 0) - hidden["passes"] + 1
        calls = f": {hidden['calls']} outside calls" if hidden.get("calls") else ""
        lines.append(f"passes {first}–{span.get('passes')} counted, not shown{calls}")
    if span.get("dropped"):
        lines.append(f"{span['dropped']} more spans not kept (the trace's bound)")
    return lines
