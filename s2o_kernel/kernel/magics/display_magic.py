"""show results as text only (plain, the default) or also as application/json (json)

%display          show the mode in use
%display plain    results as text/plain (and an html table for rows), as IPython shows them
%display json     also application/json, which JupyterLab draws as a JSON tree

The mode belongs to the running kernel: %reset keeps it, a restart goes back to plain.
"""

from __future__ import annotations

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.magics.base import Magic, MagicCall

#: The display modes (SPEC 9.1): ``plain`` (the default) and ``json``.
MODES = ("plain", "json")

_SHOWN = {
    "plain": "display: plain (results as text/plain, rows also as an html table)",
    "json": "display: json (results as text/plain and, when they are JSON, application/json)",
}


def handle(call: MagicCall) -> None:
    """``%display [plain|json]``: set the display mode, or show it (SPEC 9, 9.1).

    Raises ``magic`` for any other argument; the mode stays as it was.
    """
    mode = call.text
    if not mode:
        call.ctx.emit_result({"text/plain": _SHOWN[call.ctx.display]})
        return
    if mode not in MODES:
        raise S2OError("magic", f"%display takes plain or json, not {mode[:40]!r}. {_SHOWN[call.ctx.display]}")
    call.ctx.display = mode


MAGIC = Magic("display", __doc__, line=handle)
