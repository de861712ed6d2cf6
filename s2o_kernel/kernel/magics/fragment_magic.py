"""read the cell as a JSON fragment

%%fragment
{"var": {"x": 1}}
"""

from __future__ import annotations

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.cells import parse_json_argument
from s2o_kernel.kernel.magics.base import Magic, MagicCall


def handle(call: MagicCall) -> None:
    """``%%fragment``: run the text as a fragment (SPEC 7).

    ``syntax`` when it is not JSON (with line and column), ``fragment`` when the JSON is not a
    fragment, ``magic`` when empty; a run that does not succeed fails the cell.
    """
    if not call.text:
        raise S2OError("magic", "%%fragment needs a JSON fragment in the cell body.")
    obj = parse_json_argument(call.text, "The %%fragment body")
    if call.ctx.fragment_kind(obj) is None:
        raise S2OError(
            "fragment",
            "The %%fragment body is JSON but not a fragment: expected a command object, "
            "a list of command objects, a function object or an agent definition.",
            stage="validate",
        )
    call.ctx.show_run(call.ctx.run_fragment(obj))


MAGIC = Magic("fragment", __doc__, line=handle, cell=handle)
