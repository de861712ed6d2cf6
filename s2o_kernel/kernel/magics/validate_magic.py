"""validate an expression without running it; show the names it uses

%validate EXPR        e.g. %validate price * quantity
"""

from __future__ import annotations

from collections.abc import Iterable

from s2o_kernel.engine import ErrorGroup, S2OError
from s2o_kernel.kernel.magics.base import Magic, MagicCall


def _listed(names: Iterable[str]) -> str:
    return ", ".join(names) or "(none)"


def handle(call: MagicCall) -> None:
    """``%validate EXPR``: check an expression against the rules (SPEC 3); show the names it uses.

    Raises every refusal at once as the engine's ``ErrorGroup`` (ename: the first one's code).
    """
    expr = call.text
    if not expr:
        raise S2OError("magic", "%validate needs an expression, for example: %validate len(items)")
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
