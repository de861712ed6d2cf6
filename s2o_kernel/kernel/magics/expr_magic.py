"""read the cell as an expression, whatever it looks like

%%expr
{"a": 1}              the Python dict, not a dynamic string
"""

from __future__ import annotations

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.magics.base import Magic, MagicCall


def handle(call: MagicCall) -> None:
    """``%%expr``: evaluate the text as one expression (SPEC 2), never as JSON; ``magic`` when empty."""
    if not call.text:
        raise S2OError("magic", "%expr needs an expression: after %expr, or in the body of a %%expr cell.")
    call.ctx.show_value(call.ctx.require_session().evaluate(call.text))


MAGIC = Magic("expr", __doc__, line=handle, cell=handle)
