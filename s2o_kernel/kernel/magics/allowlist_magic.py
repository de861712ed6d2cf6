"""show (%allowlist) or replace (%%allowlist) the allowlist

%allowlist            show the current allowlist
%%allowlist           replace it with the cell body, one entry a line:
len
math.sqrt
json
Loading is all-or-nothing: when a line fails nothing changes and every
failing line is reported with its own message. A body with no line at all is
refused (it would take every entry away); to empty the allowlist on purpose,
give it a comment line only, such as # nothing granted. In the console, an
empty line ends the body, as in IPython.
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
    if not call.raw_body.strip():
        raise S2OError(
            "magic",
            "%%allowlist needs its entries below it, one a line: a cell with no body would take every entry "
            "away. %allowlist shows the allowlist; to empty it on purpose, give %%allowlist a comment line "
            "only (# nothing granted).",
        )
    apply_settings(call, {"allowlist": call.raw_body}, show_all_warnings=True)


MAGIC = Magic("allowlist", __doc__, line=show, cell=replace)
