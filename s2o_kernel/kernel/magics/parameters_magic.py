"""set notebook parameters: each a local variable, and in sys.inputs

%%parameters
{"var": {"city": "Oslo", "days": 3}}

The cell papermill injects for the s2o kernel (`papermill -p city Oslo`).
Its body is one var fragment; each name it sets is also merged into
sys.inputs, where an agent definition's main takes its arguments, as an
agent run gets its inputs. Write your own defaults in the cell tagged
`parameters` the same way.
"""

from __future__ import annotations

from typing import Any

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.cells import parse_json_argument
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.sections import apply_settings

_EXAMPLE = '%%parameters\n{"var": {"city": "Oslo"}}'


def handle(call: MagicCall) -> None:
    """``%%parameters``: run the body, one ``var`` fragment, then merge every name it set into ``sys.inputs``
    with the value it now holds (issue 31: papermill's parameters reach an agent definition's ``main``).

    ``magic`` when the body is not one ``var`` object of names (the fragment ``var``'s targets that are
    Python identifiers, as papermill's translator writes them); ``syntax`` when it is not JSON. A run that
    does not succeed fails the cell and ``sys.inputs`` is left as it was; so is everything when the values
    cannot be inputs (``settings``).
    """
    if not call.text:
        raise S2OError("magic", f"%%parameters needs its body, for example:\n{_EXAMPLE}")
    obj = parse_json_argument(call.text, "The %%parameters body")
    fields = obj.get("var") if isinstance(obj, dict) and len(obj) == 1 else None
    if not isinstance(fields, dict) or not all(isinstance(k, str) and k.isidentifier() for k in fields):
        raise S2OError("magic", f"%%parameters expects one var fragment of variable names, for example:\n{_EXAMPLE}")
    ctx = call.ctx
    session = ctx.require_session()
    run = ctx.run_fragment(obj)
    if run.code != "success" or run.error is not None:
        ctx.show_run(run)  # fails the cell: nothing more changes
        return
    values: dict[str, Any] = {name: session.evaluate(name) for name in fields}
    inputs = (session.settings_dict().get("sys") or {}).get("inputs") or {}
    apply_settings(call, {"sys": {"inputs": {**inputs, **values}}})


MAGIC = Magic("parameters", __doc__, cell=handle)
