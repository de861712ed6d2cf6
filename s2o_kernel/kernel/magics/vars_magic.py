"""show local, agent and conversation variables as a table

%vars

One row a variable: its scope (locals, agent, conv), its name and its value's repr (no memory address; cut at 100
characters). Shown as an html table with a plain-text table as its fallback; with %display json,
also as application/json when every value is JSON.
"""

from __future__ import annotations

from typing import Any

from s2o_kernel.bounds import VALUE_WIDTH
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.pretty import rows_table, rows_text, without_addresses
from s2o_kernel.kernel.render import json_bundle, safe_repr


def _value_text(value: Any, redact: Any) -> str:
    text = " ".join(without_addresses(redact(safe_repr(value))).split("\n"))
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 1] + "…"


def handle(call: MagicCall) -> None:
    """``%vars``: every variable, one row each (SPEC 5, 9.1); ``(no variables)`` when there are none.

    The value is redacted before it is cut, so a secret is never shown in part.
    """
    call.no_argument()
    session = call.ctx.require_session()
    scopes = (("locals", session.locals), ("agent", session.agent_vars), ("conv", session.conv_vars))
    rows = [{"scope": title, "name": call.ctx.redact(str(name)), "value": _value_text(value, call.ctx.redact)}
            for title, values in scopes for name, value in values.items()]
    if not rows:
        call.ctx.emit_result({"text/plain": "(no variables)"})
        return
    data: dict[str, Any] = {"text/plain": rows_text(rows), "text/html": rows_table(rows)}
    as_json = {title: call.ctx.as_json(dict(values)) for title, values in scopes}
    if all(value is not None for value in as_json.values()):
        data["application/json"] = json_bundle(as_json, call.ctx.redact)["application/json"]
    call.ctx.emit_result(data)


MAGIC = Magic("vars", __doc__, line=handle)
