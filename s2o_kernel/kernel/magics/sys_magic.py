"""show or set sys.inputs, optional sys members and const

%sys                                     show sys values and const as JSON
%sys {"inputs": {"query": "hello"}}      set sys.inputs
%sys {"userEmail": "a@example.com"}      enable an optional member
%sys {"const": {"rate": 2}}              set the constants
"""

from __future__ import annotations

from typing import Any

from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.sections import apply_settings, parse_object
from s2o_kernel.kernel.render import json_bundle


def handle(call: MagicCall) -> None:
    """``%sys``: show the ``sys`` settings with ``const``, or merge a JSON object (SPEC 5, 10).

    A ``const`` key sets the ``const`` settings (replaced whole); the other keys go to ``sys``.
    """
    session = call.ctx.require_session()
    if not call.text:
        settings = session.settings_dict()
        shown = dict(settings.get("sys") or {})
        shown["const"] = settings.get("const") or {}
        call.ctx.emit_result(json_bundle(shown, call.ctx.redact))
        return
    obj = parse_object(call, '{"inputs": {"query": "hi"}, "const": {"rate": 2}}')
    patch: dict[str, Any] = {}
    if "const" in obj:
        patch["const"] = obj.pop("const")
    if obj:
        patch["sys"] = obj
    apply_settings(call, patch)


MAGIC = Magic("sys", __doc__, line=handle, cell=handle)
