"""load settings from a TOML file, merged over the current settings

%config s2o.toml
Sections as in s2o.toml: allowlist, [rules], [limits], [sys], [const],
[secrets], [profiles.*]. Keys given replace the current values; tables
merge key by key (so [secrets] adds to the secrets already set), except
sys.inputs and [const], which are replaced. All or nothing: when a setting
is refused nothing changes.
"""

from __future__ import annotations

from s2o_kernel.engine import read_toml
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.files import resolve
from s2o_kernel.kernel.magics.sections import apply_settings

PARSER = MagicArgumentParser("config")
PARSER.add_argument("file", metavar="FILE")


def handle(call: MagicCall) -> None:
    """``%config FILE``: merge a TOML settings file into the session's settings (SPEC 10).

    Raises the engine's ``settings`` error for a file that cannot be read or is not TOML, and its
    load errors for settings it refuses (then nothing has changed).
    """
    file = call.words().file
    call.ctx.require_session()
    data = read_toml(resolve(file))
    if data:
        apply_settings(call, data)


MAGIC = Magic("config", __doc__, line=handle, parser=PARSER)
