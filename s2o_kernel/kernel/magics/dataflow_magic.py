"""show the paths a fragment reads and writes, as text and as SVG

%dataflow FRAGMENT     e.g. %dataflow {"var": {"x": "†conv.userInput || †agent.default"}}
%dataflow              the data flow of the last fragment the notebook ran
%%dataflow             the fragment as the cell body

The fragment is checked as a run would check it but not run. The listing names what it reads
(references, the variables its expressions read) and writes (var targets, outputPath targets);
the diagram goes from sources through commands to destinations, one block per command: paths
read on the left, the command in the middle, paths written on the right; a dashed arrow is a
read by an expression. It comes as SVG, which JupyterLab draws and saves as it came (so a
notebook saved from JupyterLab passes nbval), as does an HTML export (jupyter nbconvert --to
html), and as the same graph drawn in text, which jupyter console prints (and JupyterLab shows
for an untrusted notebook, whose SVG it does not draw):
  conv.userInput --+--> [var] --+--> local.x
where ..+ marks a path read by an expression. Secret values show as *** in all of them.
"""

from __future__ import annotations

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.cells import parse_json_argument
from s2o_kernel.kernel.magics.base import Magic, MagicCall

#: The MIME type of the diagram (JupyterLab and nbconvert's HTML draw it).
SVG = "image/svg+xml"


def handle(call: MagicCall) -> None:
    """``%dataflow [FRAGMENT]``: the data flow of a fragment (SPEC 8, 9.1).

    Shows the text listing as display data, then the diagram as the cell's result: ``image/svg+xml``
    (:meth:`~s2o_kernel.engine.Dataflow.svg`) and, as ``text/plain``, the graph drawn in text
    (:meth:`~s2o_kernel.engine.Dataflow.graph`), which a terminal (``jupyter console``) prints. No
    Mermaid source (decided in docs/design.md: JupyterLab would draw it ahead of the SVG and save its
    own drawing, which a headless rerun never produces, so nbval would fail). Secret values are
    redacted from every label before the SVG escapes it (escaping could hide a secret with ``<`` or
    ``&`` in it), and from the text forms whole; not from the whole SVG, whose labels are all redacted
    already and whose markup a short secret could break. Raises ``syntax`` for an argument that is not
    JSON, ``fragment`` for JSON that is no fragment, ``magic`` when there is neither an argument nor a
    fragment run before, and the fragment's own validation errors.
    """
    if call.text:
        fragment = parse_json_argument(call.text, "The %dataflow argument")
        if call.ctx.fragment_kind(fragment) is None:
            raise S2OError("fragment", "The %dataflow argument is JSON but not a fragment: expected a command "
                           "object, a list of command objects, a function object or an agent definition.",
                           stage="validate")
    else:
        fragment = call.ctx.last_fragment
        if fragment is None:
            raise S2OError("magic", "%dataflow needs a fragment, or a fragment cell run before it: "
                           "%dataflow {\"var\": {\"x\": \"\u2020conv.a || \u2020agent.b\"}}")
    flow = call.ctx.require_session().dataflow(fragment)
    redact = call.ctx.redact
    call.ctx.emit_display({"text/plain": redact(flow.text())})
    call.ctx.emit_result({SVG: flow.svg(label=redact), "text/plain": redact(flow.graph())})


MAGIC = Magic("dataflow", __doc__, line=handle, cell=handle)
