"""list the magics

%lsmagic
"""

from __future__ import annotations

from s2o_kernel.kernel.magics.base import Magic, MagicCall


def handle(call: MagicCall) -> None:
    """``%lsmagic``: every magic of the registry with its summary (SPEC 9.1)."""
    call.no_argument()
    call.ctx.emit_result({"text/plain": call.registry.lsmagic_text()})


MAGIC = Magic("lsmagic", __doc__, line=handle)
