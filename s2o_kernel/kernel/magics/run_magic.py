"""run an agent definition (or any fragment) from a JSON file as one run

%run agent.json --inputs {"query": "hi"}      main gets its arguments from the inputs
%run agent.json --function greet               run another function of the agent
%%run agent.json                               the cell's body below is the inputs,
{"query": "hi"}                                a JSON object that may span lines
The file is read relative to the kernel's working directory. Output parts show
as they are produced, log lines on stderr, then the value. A run that does not
succeed fails the cell: failCommand, timedOut or stopped, or the code of the
error (runtime, not-json, loop-limit, ...). --inputs also sets sys.inputs for
the run; its JSON may span lines.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.magics.arguments import MagicArgumentParser, Once, json_object
from s2o_kernel.kernel.magics.base import Magic, MagicCall
from s2o_kernel.kernel.magics.files import read_json

_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def _function_name(text: str) -> str:
    """An argparse ``type``: a function name of an agent definition (SPEC 7)."""
    if not _IDENTIFIER.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a function name")
    return text


PARSER = MagicArgumentParser("run")
PARSER.add_argument("file", metavar="FILE")
PARSER.add_argument(
    "--inputs", action=Once, metavar="JSON",
    type=json_object("the --inputs of %run", '--inputs {"query": "hi"}'),
)  # fmt: skip
PARSER.add_argument("--function", action=Once, metavar="NAME", type=_function_name)
#: ``%%run FILE``'s body: its inputs.
_INPUTS_OF_BODY = json_object("the body of %%run (its inputs)", '{"query": "hi"}')


def _body_inputs(text: str) -> dict[str, Any]:
    """The inputs a ``%%run`` body gives: one JSON object; ``syntax`` or ``magic`` otherwise."""
    try:
        return _INPUTS_OF_BODY(text)
    except argparse.ArgumentTypeError as exc:
        raise S2OError("magic", f"%%run: the cell's body {exc}") from None


def parse_run_arguments(text: str) -> tuple[str, dict[str, Any] | None, str | None]:
    """``(file, inputs, function)`` of ``%run FILE [--inputs JSON] [--function NAME]``.

    ``--inputs`` takes one JSON object (it may hold spaces and span lines, quoted or not);
    ``--inputs=JSON`` and ``--function=NAME`` work too. Raises ``magic`` for a wrong use and
    ``syntax`` (with line and column) for inputs that are not JSON.
    """
    words = PARSER.parse_words(text)
    return words.file, words.inputs, words.function


def handle(call: MagicCall) -> None:
    """``%run FILE``: run the file's fragment as one run (SPEC 7, 9.1); its value is the result.

    A file that cannot be read is ``magic``, one that is not JSON ``syntax``, one that is not a
    fragment ``fragment``; ``--function`` with a fragment that is not an agent definition is
    ``magic``. A run that does not succeed fails the cell with its code.
    """
    body = call.body.strip()
    inputs_option = any(w == "--inputs" or w.startswith("--inputs=") for w in call.arg.split())
    if body and not body.startswith("-") and not inputs_option:  # %%run FILE: the body is the inputs (a body
        file, inputs, function = parse_run_arguments(call.arg)  # after --inputs, or of options, is read as
        inputs = _body_inputs(body)  # more arguments, as before)
    else:
        file, inputs, function = parse_run_arguments(call.text)
    call.ctx.require_session()
    data = read_json(file)
    kind = call.ctx.fragment_kind(data)
    if kind is None:
        raise S2OError(
            "fragment",
            f"{file} is JSON but not a fragment: expected an agent definition "
            '({"functions": {"main": ...}}), a function object, a command object or a list '
            "of command objects.",
            stage="validate",
        )
    if function is not None and kind != "agent":
        raise S2OError(
            "magic",
            f"%run: --function picks a function of an agent definition, but {file} holds a {kind} fragment.",
        )
    call.ctx.show_run(call.ctx.run_fragment(data, inputs=inputs, function=function))


MAGIC = Magic("run", __doc__, line=handle, cell=handle, parser=PARSER)
