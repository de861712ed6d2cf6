"""show local, agent and conversation variables

%vars
"""

from __future__ import annotations

from typing import Any

from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.render import json_bundle, safe_repr


def _scope_lines(title: str, values: dict[str, Any]) -> list[str]:
    lines = [f"{title}:"]
    if not values:
        lines.append("  (none)")
    lines.extend(f"  {key} = {safe_repr(value)}" for key, value in values.items())
    return lines


def handle(call: MagicCall) -> None:
    """``%vars``: every variable as text, and as JSON when every value is JSON (SPEC 5, 9.1)."""
    call.no_argument()
    session = call.ctx.require_session()
    scopes = (("locals", session.locals), ("agent", session.agent_vars), ("conv", session.conv_vars))
    text_lines: list[str] = []
    for title, values in scopes:
        text_lines.extend(_scope_lines(title, values))
    data: dict[str, Any] = {"text/plain": call.ctx.redact("\n".join(text_lines))}
    as_json = {title: call.ctx.as_json(dict(values)) for title, values in scopes}
    if all(value is not None for value in as_json.values()):
        data["application/json"] = json_bundle(as_json, call.ctx.redact)["application/json"]
    call.ctx.emit_result(data)


MAGIC = Magic("vars", __doc__, line=handle)
