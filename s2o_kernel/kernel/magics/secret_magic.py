"""ask for a secret's value with a password prompt (never stored in the notebook)

%secret API_KEY       then f'Bearer {sys.secret["API_KEY"]}'
The value is asked with the front end's password prompt, kept for this
session only, and shown as *** wherever it would appear. Front ends that cannot
prompt (nbval, nbconvert) get an error: give secrets to the kernel as
environment variables S2O_SECRET_<NAME> or under [secrets] in s2o.toml.
"""

from __future__ import annotations

import argparse
import re

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.sections import apply_settings

_SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _secret_name(text: str) -> str:
    """An argparse ``type``: a secret's name, as ``sys.secret['NAME']`` reads it (SPEC 5)."""
    if not _SECRET_NAME.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a secret name (letters, digits and _)")
    return text


PARSER = MagicArgumentParser("secret")
PARSER.add_argument("name", metavar="NAME", type=_secret_name)


def _no_prompt(name: str) -> S2OError:
    return S2OError(
        "magic",
        f"%secret cannot ask for {name}: this front end cannot prompt for input "
        "(allow_stdin is false, as in nbval, nbconvert and papermill). Give the secret "
        f"to the kernel instead: as the environment variable S2O_SECRET_{name}, or under "
        "[secrets] in s2o.toml (or the file named by S2O_CONFIG).",
    )


def handle(call: MagicCall) -> None:
    """``%secret NAME``: ask for the value and add it to the session's secrets (SPEC 5, 10).

    The value is never echoed. ``magic`` when the front end cannot prompt, nothing was entered or
    the value is empty; an interrupt (``KeyboardInterrupt``) ends the cell as ``stopped``.
    """
    name = call.words().name
    call.ctx.require_session()
    prompt = call.ctx.getpass
    if prompt is None:
        raise _no_prompt(name)
    try:
        value = prompt(f"Value of the secret {name}: ")
    except EOFError:
        raise S2OError("magic", f"no value was entered; the secret {name} was not changed.") from None
    if value is None:
        raise _no_prompt(name)
    if not value:
        raise S2OError("magic", f"the value is empty; the secret {name} was not changed.")
    # The engine merges ``secrets`` key by key: this adds one secret and keeps the others.
    apply_settings(call, {"secrets": {name: value}})
    call.ctx.emit_stream(
        "stdout",
        f"The secret {name} is set for this session (it is not stored in the notebook); "
        f"expressions read it as sys.secret['{name}'].\n",
    )


MAGIC = Magic("secret", __doc__, line=handle, parser=PARSER)
