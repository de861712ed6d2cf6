"""list the profiles of the outside world (api, db, llm, prompt), credentials as ***

%profiles
Each profile with its fields, as the settings hold them (s2o.toml, %config). Every
credential shows as ***, whether it reads a secret or is written literally: every
header and query value, every llm key, a URL's password and query values, and a URL
written as an expression; the secrets' values never show. A fragment names a profile
(for example {"db": {"profile": "demo", "sql": "SELECT * FROM customers"}}).
"""

from __future__ import annotations

import json
from typing import Any

from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.render import json_bundle


def _given(value: Any) -> Any:
    """``value`` without the keys of its objects (at any depth) that hold ``None``: a field not given,
    such as a scripted turn's ``text`` when it is a ``call``, is left out of the text view."""
    if isinstance(value, dict):
        return {k: _given(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_given(v) for v in value]
    return value


def profile_lines(profiles: dict[str, Any]) -> list[str]:
    """Text lines for ``profiles`` (``{kind: {name: {field: value}}}``, already masked), a block per profile;
    fields (and keys inside their values) that hold ``None``, ``{}`` or ``[]`` are left out."""
    lines: list[str] = []
    for kind in ("api", "db", "llm", "prompt"):
        for name, fields in sorted((profiles.get(kind) or {}).items()):
            lines.append(f"profiles.{kind}.{name}")
            for field, value in fields.items():
                if value is None or value in ({}, []):
                    continue
                lines.append(f"  {field} = {json.dumps(_given(value), ensure_ascii=False)}")
    return lines or ["(no profiles)"]


def handle(call: MagicCall) -> None:
    """``%profiles``: every profile, credentials as ``***`` (SPEC 7.1, 9.1), as text and JSON."""
    call.no_argument()
    profiles = call.ctx.require_session().settings_dict().get("profiles") or {}
    data = {"text/plain": call.ctx.redact("\n".join(profile_lines(profiles)))}
    data["application/json"] = json_bundle(profiles, call.ctx.redact)["application/json"]
    call.ctx.emit_result(data)


MAGIC = Magic("profiles", __doc__, line=handle)
