"""read the cell as a JSON fragment

%%fragment
{"var": {"x": 1}}
"""

from __future__ import annotations

from typing import Any

from s2o_kernel.engine import S2OError, fragment_words
from s2o_kernel.kernel.cells import parse_json_argument
from s2o_kernel.kernel.magics.base import Magic, MagicCall


def _unknown_keys(obj: Any) -> str | None:
    """``unknown keys 'a', 'b'``: the keys of ``obj`` (an object, or the objects of a list) that no
    fragment uses (:func:`~s2o_kernel.engine.fragment_words`), or ``None``."""
    words = fragment_words()
    keys: list[str] = []
    for item in obj if isinstance(obj, list) else [obj]:
        if isinstance(item, dict):
            keys.extend(repr(k) for k in item if k not in words and repr(k) not in keys)
    return f"unknown key{'s' if len(keys) > 1 else ''} {', '.join(keys[:5])}" if keys else None


def handle(call: MagicCall) -> None:
    """``%%fragment``: run the text as a fragment (SPEC 7).

    ``syntax`` when it is not JSON (with line and column), ``fragment`` when the JSON is not a
    fragment, ``magic`` when empty; a run that does not succeed fails the cell.
    """
    if not call.text:
        raise S2OError("magic",
                       "%fragment needs a JSON fragment: after %fragment, or in the body of a %%fragment cell.")
    what = "The %%fragment body" if call.body.strip() else "The %fragment argument"  # as the cell was written
    obj = parse_json_argument(call.text, what)
    if call.ctx.fragment_kind(obj) is None:
        hint = call.ctx.fragment_hint(obj) or _unknown_keys(obj)
        raise S2OError(
            "fragment",
            f"{what} is JSON but not a fragment: expected a command object, "
            "a list of command objects, a function object or an agent definition"
            + (f" ({hint})." if hint else "."),
            stage="validate",
        )
    call.ctx.show_run(call.ctx.run_fragment(obj))


MAGIC = Magic("fragment", __doc__, line=handle, cell=handle)
