"""show the paths a fragment reads and writes, as text and as SVG

%dataflow FRAGMENT     e.g. %dataflow {"var": {"x": "†conv.userInput || †agent.default"}}
%dataflow              the data flow of the last fragment the notebook ran
%%dataflow             the fragment as the cell body

The fragment is checked as a run would check it but not run. The listing names what it reads
(references, the variables its expressions read) and writes (var targets, outputPath targets);
the diagram goes from sources through commands to destinations, one block per command: paths
read on the left, the command in the middle, paths written on the right; a dashed arrow is a
read by an expression. It comes as SVG, as Mermaid and as text, and the front end picks one:
JupyterLab 4.1 and later draws the Mermaid diagram (it ranks Mermaid above SVG, and saves its
own drawing in place of the SVG, so store notebooks with %dataflow cells headless for nbval),
an HTML export (jupyter nbconvert --to html) shows the SVG, and jupyter console prints the
graph drawn in text:
  conv.userInput --+--> [var] --+--> local.x
where ..+ marks a path read by an expression. Secret values show as *** in all three.
"""

from __future__ import annotations

from s2o_kernel.engine import S2OError
from s2o_kernel.kernel.cells import parse_json_argument
from s2o_kernel.kernel.magics.base import Magic, MagicCall

#: The MIME type of a Mermaid diagram, which JupyterLab 4.1+ renders natively.
MERMAID = "text/vnd.mermaid"
#: The MIME type of the SVG drawing: nbconvert's HTML shows it; JupyterLab ranks it below Mermaid.
SVG = "image/svg+xml"


def handle(call: MagicCall) -> None:
    """``%dataflow [FRAGMENT]``: the data flow of a fragment (SPEC 8, 9.1).

    Shows the text listing as display data, then the diagram as the cell's result:
    ``image/svg+xml`` (:meth:`~s2o_kernel.engine.Dataflow.svg`, which nbconvert's HTML shows),
    ``text/vnd.mermaid`` (which JupyterLab 4.1+ draws: it ranks Mermaid first) and as ``text/plain``
    the graph drawn in text (:meth:`~s2o_kernel.engine.Dataflow.graph`), which a terminal
    (``jupyter console``) prints (decided in docs/design.md). Secret values are redacted from every label before the SVG
    and the Mermaid source escape it (escaping could hide a secret with ``<`` or ``&`` in it), and
    from the text forms and the Mermaid source whole as well; not from the whole SVG, whose labels
    are all redacted already and whose markup a short secret could break. Raises ``syntax`` for an
    argument that is not JSON, ``fragment`` for JSON that is no fragment, ``magic`` when there is
    neither an argument nor a fragment run before, and the fragment's own validation errors.
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
    call.ctx.emit_display({"text/plain": call.ctx.redact(flow.text())})
    redact = call.ctx.redact
    call.ctx.emit_result({SVG: flow.svg(label=redact), MERMAID: redact(flow.mermaid(label=redact)),
                          "text/plain": redact(flow.graph())})


MAGIC = Magic("dataflow", __doc__, line=handle, cell=handle)
