"""Changing the session's settings from a magic (SPEC 9.1, 10): one routine for every settings magic.

A patch goes to the session's ``update_settings``, which merges it all or nothing the engine's way:
objects key by key (``secrets`` too, so a patch adds secrets), ``sys.inputs``, ``const`` and
anything that is not an object replaced. The warnings the new settings bring are shown once: a
warning the person has already seen (the allowlist's, say) is not repeated by a later magic.
"""

from __future__ import annotations

from typing import Any

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.cells import parse_json_argument
from s2o_kernel.kernel.magics.base import Handler, MagicCall
from s2o_kernel.kernel.render import json_bundle


def apply_settings(call: MagicCall, patch: dict[str, Any], *, show_all_warnings: bool = False) -> None:
    """Merge ``patch`` into the session's settings and show the warnings not seen yet.

    ``show_all_warnings``: show every warning of the new settings (a new allowlist's warnings are
    new even when the old allowlist had the same). Raises the engine's ``S2OError`` (stage
    ``load``: ``settings``, ``allowlist``, ``refused-entry``) and then nothing has changed.
    """
    ctx = call.ctx
    warnings = ctx.require_session().update_settings(patch)
    ctx.emit_warnings(warnings if show_all_warnings else [w for w in warnings if w not in ctx.known_warnings])
    ctx.known_warnings = set(warnings)


def parse_object(call: MagicCall, example: str) -> dict[str, Any]:
    """The call's text as a JSON object: ``syntax`` when it is not JSON, ``magic`` when not an object."""
    name = call.magic.name
    obj = parse_json_argument(call.text, f"The argument of %{name}")
    if not isinstance(obj, dict):
        raise S2OError("magic", f"%{name} expects a JSON object, for example: %{name} {example}")
    return obj


def section_handler(section: str, example: str) -> Handler:
    """A handler that shows one settings section as JSON, or merges a JSON object into it.

    ``%limits`` shows ``limits``; ``%limits {"time": 5}`` merges ``{"limits": {"time": 5}}``.
    """

    def handler(call: MagicCall) -> None:
        if not call.text:
            current = call.ctx.require_session().settings_dict().get(section, {})
            call.ctx.emit_result(json_bundle(current, call.ctx.redact))
            return
        apply_settings(call, {section: parse_object(call, example)})

    return handler
