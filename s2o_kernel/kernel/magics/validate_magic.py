"""validate an expression or a fragment without running it; show the names or paths it uses

%validate EXPR        e.g. %validate price * quantity
%validate FRAGMENT    e.g. %validate {"var": {"x": "†conv.a || †agent.b"}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from s2o_kernel.engine import ErrorGroup, S2OError
from s2o_kernel.kernel.magics.base import Magic, MagicCall


def _listed(names: Iterable[str]) -> str:
    return ", ".join(names) or "(none)"


def _fragment(call: MagicCall, text: str) -> Any:
    """``text`` as a fragment when it is JSON that is one (SPEC 7), else ``None`` (an expression); JSON
    that looks like a misspelled fragment gets a note on stderr (it is validated as an expression)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if call.ctx.fragment_kind(obj) is not None:
        return obj
    hint = call.ctx.fragment_hint(obj)
    if hint:
        call.ctx.emit_stream("stderr", f"note: this is JSON but not a fragment ({hint}), so it is validated as "
                             "an expression.\n")
    return None


def handle(call: MagicCall) -> None:
    """``%validate EXPR``: check an expression against the rules (SPEC 3); show the names it uses.
    ``%validate FRAGMENT``: check a fragment whole (SPEC 7); show the paths it reads and writes (SPEC 8).

    Raises every refusal at once as the engine's ``ErrorGroup`` (ename: the first one's code).
    """
    expr = call.text
    if not expr:
        raise S2OError("magic", "%validate needs an expression, for example: %validate len(items)")
    fragment = _fragment(call, expr)
    if fragment is not None:
        flow = call.ctx.require_session().dataflow(fragment)
        text = "\n".join(["ok: the fragment passes validation", f"reads: {_listed(flow.reads)}",
                          f"writes: {_listed(flow.writes)}"])
        call.ctx.emit_result({"text/plain": call.ctx.redact(text),
                              "application/json": {"ok": True, "reads": flow.reads, "writes": flow.writes}})
        return
    result = call.ctx.require_session().validate(expr)
    if not result.ok:
        raise ErrorGroup(result.errors)
    names = {
        "allowlist_names": sorted(result.allowlist_names),
        "local_names": sorted(result.local_names),
        "secrets": sorted(result.secrets),
    }
    text = "\n".join([
        "ok: the expression passes validation",
        f"allowlist names: {_listed(names['allowlist_names'])}",
        f"local names: {_listed(names['local_names'])}",
        f"secrets: {_listed(names['secrets'])}",
    ])
    call.ctx.emit_result({"text/plain": call.ctx.redact(text), "application/json": {"ok": True, **names}})


MAGIC = Magic("validate", __doc__, line=handle, cell=handle)
