"""show (%allowlist) or replace (%%allowlist) the allowlist

%allowlist            show the current allowlist
%%allowlist           replace it with the cell body, one entry a line:
len
math.sqrt
json
Loading is all-or-nothing: when a line fails nothing changes and every
failing line is reported with its own message.
"""

from __future__ import annotations

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.sections import apply_settings


def show(call: MagicCall) -> None:
    """``%allowlist``: the allowlist text as the result (SPEC 4, 9.1); ``magic`` when given an argument."""
    if call.arg.strip():
        raise S2OError(
            "magic",
            "%allowlist takes no argument: it shows the allowlist. To replace it, "
            "start a cell with %%allowlist and put one entry a line below it.",
        )
    text = str(call.ctx.require_session().settings_dict().get("allowlist") or "")
    if not text.strip():
        text = "# (the allowlist is empty)"
    call.ctx.emit_result({"text/plain": call.ctx.redact(text.rstrip("\n"))})


def replace(call: MagicCall) -> None:
    """``%%allowlist``: the body, comments included, becomes the allowlist, all or nothing (SPEC 4, 10).

    Raises the engine's ``allowlist`` or ``refused-entry`` error (every failing line in
    ``details["lines"]``) and then nothing has changed.
    """
    if call.arg.strip():
        raise S2OError(
            "magic",
            "%%allowlist takes no argument on its first line; put the entries below it, one a line.",
        )
    apply_settings(call, {"allowlist": call.raw_body}, show_all_warnings=True)


MAGIC = Magic("allowlist", __doc__, line=show, cell=replace)
