"""load settings from a TOML file, merged over the current settings

%config s2o.toml
Sections as in s2o.toml: allowlist, [rules], [limits], [sys], [const],
[secrets], [profiles.*]. Keys given replace the current values; tables
merge key by key (so [secrets] adds to the secrets already set), except
sys.inputs and [const], which are replaced. All or nothing: when a setting
is refused nothing changes.
"""

from __future__ import annotations

from s2o_kernel.engine import S2OError, Settings, read_toml
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.files import resolve
from s2o_kernel.kernel.magics.sections import apply_settings

PARSER = MagicArgumentParser("config")
PARSER.add_argument("file", metavar="FILE")

#: The top-level keys of a settings file (SPEC 10).
SETTINGS_KEYS = tuple(Settings.model_fields)


def handle(call: MagicCall) -> None:
    """``%config FILE``: merge a TOML settings file into the session's settings (SPEC 10).

    Raises the engine's ``settings`` error for a file that cannot be read or is not TOML (its line
    and column, never its text), ``settings`` naming none of its keys for TOML whose top-level keys
    are not all settings (a file that is not a settings file is not quoted), and the engine's load
    errors for settings it refuses (then nothing has changed).
    """
    file = call.words().file
    call.ctx.require_session()
    data = read_toml(resolve(file))
    unknown = sum(1 for key in data if key not in SETTINGS_KEYS)
    if unknown:
        raise S2OError("settings", f"{file} is not a settings file: {unknown} of its {len(data)} top-level keys "
                       f"{'is not a setting' if unknown == 1 else 'are not settings'} (the settings are "
                       f"{', '.join(SETTINGS_KEYS)})", stage="load")
    if data:
        apply_settings(call, data)


MAGIC = Magic("config", __doc__, line=handle, parser=PARSER)
