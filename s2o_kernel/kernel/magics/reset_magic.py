"""clear the session's variables (configuration stays)

%reset
"""

from __future__ import annotations

from s2o_kernel.kernel.magics.base import Magic, MagicCall


def handle(call: MagicCall) -> None:
    """``%reset``: clear locals, agent and conversation variables; the settings stay (SPEC 5)."""
    call.no_argument()
    call.ctx.require_session().reset()


MAGIC = Magic("reset", __doc__, line=handle)
