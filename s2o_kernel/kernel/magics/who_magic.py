"""show the variables, as %vars does (IPython's %who)

%who

The same table as %vars: one row a variable, its scope (locals, agent, conv), its name and its value.
"""

from __future__ import annotations

from s2o_kernel.kernel.magics import vars_magic
from s2o_kernel.kernel.magics.base import Magic, MagicCall


def handle(call: MagicCall) -> None:
    """``%who``: what ``%vars`` shows (SPEC 9.1), for the habit of IPython's ``%who``; ``magic`` for an argument."""
    vars_magic.handle(call)


MAGIC = Magic("who", __doc__, line=handle)
