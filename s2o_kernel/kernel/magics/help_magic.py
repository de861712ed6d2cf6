"""general help, or help on one magic
"""

from __future__ import annotations

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser
from s2o_kernel.kernel.magics.base import Magic, MagicCall

PARSER = MagicArgumentParser("help")
PARSER.add_argument("name", metavar="NAME", nargs="?", default="")

GENERAL_HELP = """\
s2o kernel: Search2o agent expressions and fragments.

Each cell is one of:
  price * quantity        an expression: one Python expression, allowlisted names only
                          (a trailing ; hides its result, as in IPython)
  "Hello {name}"          a JSON string: a dynamic string, shown as the value it becomes
  { price * quantity }    a cell wrapped in braces: the dynamic-string form of its body
  {"var": {"x": 1}}       a JSON fragment: commands, a function or an agent definition
  %name / %%name          a magic (%lsmagic lists them, %help NAME or %NAME? explains one)
  name?                   help on a granted name or a variable

A reference expression in a fragment's field starts with a dagger
("†conv.city || †agent.home"): type \\dagger and press Tab to get it.

Lines starting with # are comments in every kind of cell (not the lines of a
triple-quoted string), so nbval markers such as # NBVAL_RAISES_EXCEPTION work. Errors show their code as the name
(e.g. underscore, unknown-name, timedOut). Interrupt stops a running cell and
keeps the session's variables.

The outside world is reached through profiles of the settings (%profiles
lists them; the embedded default's are offline). Each command sets result:
  {"db": {"profile": "demo", "sql": "SELECT id, name FROM customers"}}
  {"api": {"profile": "echo", "path": "/orders/7"}}
  {"llm": {"profile": "scripted", "input": "Hello"}}
  {"ask": {"message": "Hi", "inputs": [{"name": "city", "type": "text"}]}}
notebooks/outside-world.ipynb in the repository shows each of them.

%run FILE runs an agent definition from a file; %secret NAME asks for a
secret; %config FILE loads settings; %state save|load FILE keeps agent and
conversation variables. Cells run in a separate, supervised process, so
runaway work ends as timedOut or memory-limit and the session goes on."""


def handle(call: MagicCall) -> None:
    """``%help``: what a cell can be; ``%help NAME``: one magic's help text; ``magic`` for no such magic."""
    name = call.words().name.lstrip("%")
    if not name:
        call.ctx.emit_result({"text/plain": GENERAL_HELP})
        return
    magic = call.registry.get(name)
    if magic is None:
        raise S2OError("magic", f"No magic named %{name}. {call.registry.known_hint()}")
    call.ctx.emit_result({"text/plain": magic.help_text()})


MAGIC = Magic("help", __doc__, line=handle, cell=handle, parser=PARSER)
