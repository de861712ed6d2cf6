"""clear the session's variables (configuration stays)

%reset
%reset -f       the same (IPython's "force": this kernel never asks before clearing)
"""

from __future__ import annotations

from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall

PARSER = MagicArgumentParser("reset")
PARSER.add_argument("-f", dest="force", action="store_true", help="clear without asking (always so here)")


def handle(call: MagicCall) -> None:
    """``%reset [-f]``: clear locals, agent and conversation variables; the settings stay (SPEC 5).

    ``-f`` is accepted as IPython accepts it; any other argument is a ``magic`` error.
    """
    call.words()
    call.ctx.require_session().reset()


MAGIC = Magic("reset", __doc__, line=handle, parser=PARSER)
