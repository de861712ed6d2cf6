"""``api``: an HTTP call through an API profile; ``result`` is the decoded body (SPEC 7, 7.1).

Fields: ``profile`` (a name under ``profiles.api``), ``method`` (default ``GET``), ``path``, ``query`` and
``headers`` (objects), ``body`` (a JSON value sent as JSON, or text) — dynamic values — and ``timeout``
(an int of seconds, never an expression: ``timeout is expected to be int, got str``). Validation refuses
an unknown profile (``unknown-profile``), a profile reading a secret that is not available
(``missing-secret``), a ``path`` where the profile's ``allow_path`` is false and ``headers`` where its
``allow_headers`` is false (``fragment``). The call itself is made by the session's outside door
(:mod:`..outside`); its failures (``api-status``, ``api-failed``, ``api-timeout``, ``api-too-large``) are
handled by ``onError`` or end the run with ``callFailed``. ``api`` produces a result, so it may carry
``outputPath`` (SPEC 8).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..fragments.tree import Command, join
from ..language.dynamic import expression_of
from ..outside.call import METHODS
from .protocols import Interpreter, Parser
from .spec import CommandSpec, FieldsModel, parse_profile

#: The fields sent to the gateway, in order (``body`` only when given).
_SENT = ("method", "path", "query", "headers", "body")


class ApiFields(FieldsModel):
    """``api``'s fields (see the module doc)."""

    profile: str = Field(strict=True)
    method: str = Field(default="GET", strict=True)
    path: Any = None
    query: Any = None
    headers: Any = None
    body: Any = None
    timeout: int | None = Field(default=None, strict=True, ge=1)


def parse(p: Parser, cmd: Command, fields: Any, known: set[str], in_loop: bool) -> Command | None:
    """Check the fields against the profile, check their expressions."""
    m = p.model(ApiFields, fields, cmd.path)
    if m is None:
        return None
    profile = parse_profile(p, "api", m.profile, join(cmd.path, "profile"))
    if profile is not None and m.path is not None and not profile.allow_path:
        p.error("fragment", f"the api profile {m.profile!r} does not allow a path (allow_path = false)",
                join(cmd.path, "path"))
    if profile is not None and m.headers is not None and not profile.allow_headers:
        p.error("fragment", f"the api profile {m.profile!r} does not allow a command's headers "
                "(allow_headers = false)", join(cmd.path, "headers"))
    if expression_of(m.method) is None and m.method.upper() not in METHODS:
        p.error("fragment", f"method is one of {', '.join(METHODS)}", join(cmd.path, "method"))
    for name in _SENT:
        if name in m.model_fields_set:
            p.value(getattr(m, name), join(cmd.path, name), known)
    cmd.model = m
    return cmd


async def run(it: Interpreter, cmd: Command) -> None:
    """Evaluate the fields, make the call, set ``result``."""
    m = cmd.model
    fields: dict[str, Any] = {}
    for name in _SENT:
        if name in m.model_fields_set or name == "method":
            fields[name] = await it.value(getattr(m, name), join(cmd.path, name))
    fields["has_body"] = "body" in m.model_fields_set
    profile = it.session.settings.profiles.api.get(m.profile)
    timeout = m.timeout if m.timeout is not None else profile.timeout if profile is not None else None
    it.session.set_result(await it.outside("api", m.profile, fields, cmd.path, timeout))


API = CommandSpec("api", parse, run, fields=ApiFields, produces_result=True)
